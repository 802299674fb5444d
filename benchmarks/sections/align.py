"""The "Smith-Waterman" section of RESULTS.md, from `benchmarks/out/align.json`
(written by `benchmarks/align.py`); its explanation is `align.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, table


E2E_CASES = {"proteomes": "S. aureus proteins x proteomes", "balanced": "balanced",
             "skewed": "skewed"}


def _case(name: str, d: dict) -> str:
    e = d["end_to_end"][name]
    return f"{E2E_CASES.get(name, name)} ({e['queries']:,} x {e.get('targets', 0):,})"


def verdict(e: dict) -> str:
    """wins / loses against the faster alternative, and issue 59's target (>= 0.95)."""
    word = "wins" if e["ratio"] >= 1 else "**loses**"
    return word + ("; target ≥ 0.95 met" if e["ratio"] >= 0.95 else "; target ≥ 0.95 **not met**")


def end_to_end(d: dict, ctx) -> list[str]:
    rows = []
    for name, e in (d.get("end_to_end") or {}).items():
        sides = e["sides"]
        pf, alt = sides["pairflow"], sides[e["best_alternative"]]
        other = [f"{s}: {num(v['wall_s'], 's')}" for s, v in sides.items()
                 if s not in ("pairflow", e["best_alternative"])]
        loads = [x for v in sides.values() for pair in v["loads"] for x in pair]
        rows.append([_case(name, d), f"{num(pf['wall_s'], 's')} ({num(pf['cpu_s'], 'CPU s')})",
                     f"{e['best_alternative']}, 2 threads: {num(alt['wall_s'], 's')} "
                     f"({num(alt['cpu_s'], 'CPU s')})" + (f"; {', '.join(other)}" if other else ""),
                     f"**{num(e['ratio'])}** (each repetition: "
                     f"{', '.join(num(x) for x in e['runs_ratio'])}; CPU {num(e['cpu_ratio'])})",
                     verdict(e), f"{num(min(loads))}-{num(max(loads))}"])
    if not rows:
        return []
    return ["**Against the user's alternative, end to end** (`--parts e2e`): each side a fresh "
            "process on the whole input, best wall time of the interleaved repetitions; ratio "
            "= the faster alternative's wall / pairflow's (pairflow's speed as a fraction of "
            "it; target ≥ 0.95); top-k scores checked equal on every side.\n\n"
            + table(["case", "pairflow app=align", "the user's alternative", "ratio", "verdict",
                     "load (1 min)"], rows)]


def section(d: dict, ctx) -> list[str]:
    out = end_to_end(d, ctx)
    if not (d.get("inputs") or {}) or not any(r.get("engine") for r in d["inputs"].values()):
        return out
    return out + kernel_efficiency(d, ctx)


def kernel_efficiency(d: dict, ctx) -> list[str]:
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
    out = ["**Against its own kernel in one process** (`--parts efficiency`):\n\n"
           + table(["input", "single process", "two plain processes (of 2 x single)",
                    "engine, best run", "efficiency", "each run", "of the limit", "vs numpy"],
                   rows)]
    out.append(img(plot_bars("Smith-Waterman on 2 cores: throughput", bars,
                             "Gcells/s (higher is better)", ctx.plots, "peers_align.png",
                             ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: pairflow against the faster of pyopal and parasail, per case."""
    rows = []
    for name, e in (d.get("end_to_end") or {}).items():
        pf, alt = e["sides"]["pairflow"], e["sides"][e["best_alternative"]]
        rows.append([f"Smith-Waterman, {_case(name, d)}", num(pf["wall_s"], "s"),
                     f"{e['best_alternative']} (2 threads): {num(alt['wall_s'], 's')} "
                     f"({num(e['ratio'])})", verdict(e)])
    return rows
