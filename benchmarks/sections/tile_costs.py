"""The "Per-tile fixed costs" section of RESULTS.md, from `benchmarks/out/tile_costs.json`
(written by `benchmarks/tile_costs.py`); its explanation is `tile_costs.md` beside this file."""
from __future__ import annotations

from report import num, table


def _ms(v) -> str:
    return num(None if v is None else 1000 * v, "ms")


def _pct(v) -> str:
    return num(None if v is None else 100 * v, "%")


def section(d: dict, ctx) -> list[str]:
    rows = [[r["case"], r["cluster"], r["variant"], num(r["leaf"]), num(r["tiles"]),
             num(r["compute_s"], "s"), num(r["cpu_s"], "s"), _ms(r["modelled_overhead_s"]),
             _ms(r["per_tile_overhead_s"]), _ms(r["tile_seconds"]),
             _pct(r["overhead_share"]), num(r["R"])] for r in d["rows"]]
    load = d.get("load_avg_1m") or [None, None]
    return [table(["case", "cluster", "variant", "leaf", "tiles", "compute", "CPU",
                   "modelled fixed cost", "measured overhead", "time per tile", "share", "R"],
                  rows),
            f"{num(d['n'])} loci, medians of {num(d['reps'])} interleaved runs each "
            f"(load average {num(load[0])} at the start, {num(load[1])} at the end; 2 cores). "
            "compute: the compute phase's wall seconds; CPU: the command's and its children's; "
            "measured overhead: an actor's time with tiles under way and none computing, per "
            "tile (`summary.json: tile_costs`)."]
