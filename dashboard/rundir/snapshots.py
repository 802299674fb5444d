"""The run's metrics snapshots (metrics.jsonl), the series every kind of run writes.

Each snapshot holds cumulative counters; this reader keeps one flat row per snapshot (the numbers
at its top level) and the last snapshot as written, for progress, throughput and the overview's
chart. Other readers take their own parts of the same snapshots (actors, tiers). Memory stays
bounded on long runs: beyond ``max_snapshots`` the run view thins every reader of the stream to
the same snapshot times (every other one of the older half; counters are cumulative, so rates
over what remains stay right, only coarser).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import Reader, locked
from .values import num

__all__ = ["Snapshots", "window_delta"]


class Snapshots(Reader):
    """metrics.jsonl as flat rows: t, elapsed and every top-level number of each snapshot."""

    view = "overview"
    streams = ("metrics",)

    def __init__(self, run):
        super().__init__(run)
        self.rows: list[dict] = []  # one per snapshot
        self.raw_last: dict | None = None  # the last snapshot as written (nested)

    def ingest(self, stream: str, recs: list[dict]) -> None:
        for r in recs:
            t = num(r.get("t"))
            if t is None:
                continue
            self.raw_last = r
            row = {"t": t, "elapsed": num(r.get("elapsed"))}
            for k, v in r.items():
                if k in ("t", "elapsed"):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    row[k] = num(v)
            self.rows.append(row)

    def clear(self, stream: str) -> None:
        self.rows.clear()
        self.raw_last = None

    def thin(self, keep: set[float]) -> None:
        self.rows[:] = [r for r in self.rows if r["t"] in keep]

    def keep_on_thinning(self) -> set[float]:
        """The snapshot times kept by one thinning: the newer half, every other of the older."""
        cut = len(self.rows) // 2
        return {m["t"] for i, m in enumerate(self.rows) if i >= cut or i % 2 == 0}

    def applies(self, kind: str | None) -> bool:
        return True

    @property
    def last(self) -> dict:
        """The last snapshot's flat row, or {}."""
        return self.rows[-1] if self.rows else {}

    @locked
    def frame(self) -> pd.DataFrame:
        """One row per snapshot: t, elapsed, sec (since start), tiles_done, pairs_done, loads, R, ..."""
        def build():
            df = pd.DataFrame(self.rows)
            if df.empty:
                return pd.DataFrame(columns=["t", "sec", "elapsed", "tiles_done", "pairs_done", "R"])
            df["sec"] = df["t"] - (self.run.started or df["t"].iloc[0])
            return df
        return self.cached("frame", ("metrics", "meta"), build)


def window_delta(t, v, smooth_s: float):
    """(dv, dt) of cumulative series v(t) against the last sample at least ``smooth_s`` earlier
    (the first sample for early rows); dt = 0 where there is no earlier sample."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    j = np.clip(np.searchsorted(t, t - smooth_s, side="right") - 1, 0, None)
    return v - v[j], t - t[j]
