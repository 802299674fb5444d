"""The "All-pairs peers" section of RESULTS.md, from `benchmarks/out/peers.json`
(written by `benchmarks/peers.py`); its explanation is `peers.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, speed, table


def section(d: dict, ctx) -> list[str]:
    peers = d.get("peers") or {}
    rows = [[k, num(r["wall_s"], "s"), num(r.get("pairflow_speedup")) + "x",
             num(r.get("R")), num(r.get("max_abs_diff_vs_pairflow"))] for k, r in peers.items()]
    out = [f"{d['n']} genomes, {d['pairs']} pairs, k = {d['k']}. pairflow runs at "
           f"**{num(d.get('pairflow_of_no_reuse_limit'))}** of the no-reuse limit "
           "(multiprocessing with every item in memory: limit time / pairflow's time).\n\n"
           + table(["contender", "wall time", "its time / pairflow's", "R",
                    "max abs difference from pairflow"], rows)]
    out.append(img(plot_bars(f"All pairs of {d['n']} genomes (exact Jaccard): wall time",
                             [(k, r["wall_s"]) for k, r in peers.items()],
                             "seconds (lower is better)", ctx.plots, "peers_allpairs.png",
                             ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: pairflow against each peer, side by side."""
    return [[f"all pairs of {d['n']} genomes vs {name}", speed(r["pairflow_speedup"]),
             "side by side", "wins" if r["pairflow_speedup"] >= 1 else "**loses**"]
            for name, r in (d.get("peers") or {}).items() if name != "pairflow"]
