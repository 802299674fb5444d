"""The "Many small sequences: proteomes" section of RESULTS.md, from `benchmarks/out/many_small_proteomes.json`
(written by `benchmarks/many_small_proteomes.py`); its explanation is `many_small_proteomes.md` beside this file."""
from __future__ import annotations

from report import img, num, pct, plot_bars, table


def section(d: dict, ctx) -> list[str]:
    i = d["inputs"]
    out = [f"{i['n_queries']} x {i['n_targets']} proteins ({num(i['cells'] / 1e9)} Gcells), "
           f"{i['scoring']}, top {i['top_k']}, E ≤ {i['evalue']}.\n\n" + table(
               ["contender", "Gcells/s", "wall"], [
                   ["parasail, 2 plain processes", num(d["kernel_2p"]["cells_per_s"] / 1e9),
                    num(d["kernel_2p"]["seconds"], "s")],
                   ["Opal (pyopal), 2 plain processes", num(d["pyopal_2p"]["cells_per_s"] / 1e9),
                    num(d["pyopal_2p"]["seconds"], "s")],
                   [f"pairflow, parasail kernel ({d['engine_parasail'].get('executor', '?')})",
                    num(d["engine_parasail"]["cells_per_s"] / 1e9),
                    num(d["engine_parasail"]["run_wall_s"], "s")],
                   *([[f"pairflow, parasail kernel, forced onto Ray (efficiency "
                       f"{num(d['engine_parasail_ray']['efficiency'])})",
                       num(d["engine_parasail_ray"]["cells_per_s"] / 1e9), "—"]]
                     if d.get("engine_parasail_ray") else []),
                   ["pairflow, auto kernel", num(d["engine"]["cells_per_s"] / 1e9),
                    f"{num(d['engine']['call_wall_s'], 's')} (whole call)"],
                   ["blastp -num_threads 2 (heuristic)", "—", num(d["blastp"]["wall_s"], "s")]]),
           f"Efficiency (engine / the same kernel in 2 processes): **{num(d['efficiency'])}**"
           + (f" (the median of {len(d['efficiencies'])} interleaved repetitions: "
              f"{', '.join(num(x) for x in d['efficiencies'])})" if d.get("efficiencies") else "")
           + "; "
           f"engine / the faster kernel: {num(d['vs_best_kernel'])}; pairflow's whole call "
           f"takes {num(d['engine_wall_vs_blastp'])}x blastp's time; blastp finds "
           f"{pct(d['recall']['blastp_recall'])} of the exact hits at E ≤ {i['evalue']}."]
    out.append(img(plot_bars("Proteome against proteome: wall time",
                             [("pairflow (auto kernel, whole call)", d["engine"]["call_wall_s"]),
                              ("parasail, 2 processes", d["kernel_2p"]["seconds"]),
                              ("Opal, 2 processes", d["pyopal_2p"]["seconds"]),
                              ("blastp, 2 threads", d["blastp"]["wall_s"])],
                             "seconds (lower is better)", ctx.plots,
                             "peers_proteomes.png", ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's row: the whole call against blastp, and blastp's recall."""
    return [["proteome vs proteome, whole call vs blastp (heuristic)",
             f"{num(d['engine_wall_vs_blastp'])}x blastp's time",
             f"blastp recall {pct(d['recall']['blastp_recall'])}",
             "**loses** on time, exact" if d["engine_wall_vs_blastp"] > 1 else "wins"]]
