"""The "Hierarchical scheduling: steals and round trips" section of RESULTS.md, from `benchmarks/out/stealing.json`
(written by `benchmarks/stealing.py`); its explanation is `stealing.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
    return [table(["nodes", "hierarchical", "tiles", "steals", "head round trips",
                   "per tile", "handed out in nodes", "R"],
                  [[r["nodes"], r["hierarchical"], r["tiles"], r["steals"],
                    r["head_round_trips"], num(r["round_trips_per_tile"]),
                    r.get("local_handouts", 0), num(r["R"])] for r in d["runs"]])]
