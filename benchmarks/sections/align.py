"""The "Smith-Waterman" section of RESULTS.md, from `benchmarks/out/align.json`
(written by `benchmarks/align.py`); its explanation is `align.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, table


def section(d: dict, ctx) -> list[str]:
    rows = []
    bars = []
    for name, r in (d.get("inputs") or {}).items():
        e = r.get("engine")
        if not e:
            continue
        rows.append([f"{name} ({r['queries']} x {r['targets']})",
                     num(r["single_cells_per_s"] / 1e9, "Gcells/s"), r["two_process_limit"],
                     f"{num(e['cells_per_s'] / 1e9, 'Gcells/s')} ({num(e['compute_s'], 's')}, "
                     f"{e['tiles']} tiles)", f"**{num(e['efficiency'])}**",
                     ", ".join(num(x) for x in e.get("runs_efficiency", [])),
                     e["of_two_process_limit"], num(e["vs_numpy"]) + "x"])
        bars += [(f"pairflow, {name}", e["cells_per_s"] / 1e9),
                 (f"2 x parasail alone, {name}", 2 * r["single_cells_per_s"] / 1e9),
                 (f"2 plain processes, {name}",
                  2 * r["single_cells_per_s"] * r["two_process_limit"] / 1e9)]
    out = [table(["input", "single process", "two plain processes (of 2 x single)",
                  "engine, best run", "efficiency", "each run", "of the limit", "vs numpy"],
                 rows)]
    out.append(img(plot_bars("Smith-Waterman on 2 cores: throughput", bars,
                             "Gcells/s (higher is better)", ctx.plots, "peers_align.png",
                             ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's row: the efficiency on the balanced and the skewed input."""
    al = d.get("summary")
    if not al:
        return []
    return [["Smith-Waterman efficiency vs 2 x parasail alone (balanced / skewed)",
             f"{num(al['efficiency_balanced'])} / {num(al['efficiency_skewed'])}",
             "target ≥ 0.85", "met" if al["meets_efficiency"] else "**not met**"]]
