"""The scheduling view's data: how an all-pairs run handed out its tiles across nodes.

With hierarchical scheduling each node hands out tiles from its own frontier, goes to the head
for more in batches and steals from a slower node when it runs dry; summary.json's
``scheduling`` counts all of it once the run ends (nothing of it is written while it runs).
"""

from __future__ import annotations

import pandas as pd

from .base import Reader, locked
from .values import int_or_none, num

__all__ = ["Scheduling"]

NODE_COLUMNS = ["node", "granted", "local_handouts", "head_round_trips", "steals", "stolen_from"]


class Scheduling(Reader):
    """summary.json's ``scheduling``: totals, a row per node, the steals in time order."""

    view = "scheduling"

    def applies(self, kind: str | None) -> bool:
        return kind == "allpairs" or bool(self.run.summary.get("scheduling"))

    @locked
    def frames(self) -> dict:
        """Hierarchical scheduling of a finished run (summary.json ``scheduling``): totals, a
        row per node (tiles granted by the head, tiles handed out inside the node, round trips
        to the head, steals made and suffered) and the steals in time order with their running
        count. Empty frames before the summary exists or for a run without it."""
        def build():
            sch = self.run.summary.get("scheduling") or {}
            rows = []
            for node, v in sorted((sch.get("per_node") or {}).items()):
                rows.append({"node": node, **{c: int_or_none(v.get(c)) for c in NODE_COLUMNS[1:]}})
            nodes = pd.DataFrame(rows, columns=NODE_COLUMNS)
            steals = pd.DataFrame(sch.get("steal_log") or [], columns=["t", "thief", "victim", "tiles"])
            steals = steals.rename(columns={"t": "sec"}).sort_values("sec").reset_index(drop=True)
            steals["steals_so_far"] = range(1, len(steals) + 1)
            return {"hierarchical": sch.get("hierarchical"), "steals": int_or_none(sch.get("steals")),
                    "local_handouts": int_or_none(sch.get("local_handouts")),
                    "head_round_trips": int_or_none(sch.get("head_round_trips")),
                    "round_trips_per_tile": num(sch.get("round_trips_per_tile")),
                    "tiles": int_or_none(sch.get("tiles")), "nodes": nodes, "steal_log": steals,
                    "known": bool(sch)}
        return self.cached("frames", ("summary",), build)
