"""The farm view's data: a tool farm's workers, their units and time, and the tool runs that failed.

A farm writes one line per tool run of a unit to farm.jsonl (worker, node, seconds, outcome, and
on failure the error, return code and stderr); the units given up after their last attempt are
known only from summary.json, once the run ends.
"""

from __future__ import annotations

import pandas as pd

from .base import RowsReader, locked
from .values import first

__all__ = ["Farm"]

WORKER_COLUMNS = ["worker", "node", "units", "failed_runs", "busy_s", "units_per_s"]
FAILED_COLUMNS = ["unit", "worker", "attempt", "error", "returncode", "stderr"]


class Farm(RowsReader):
    """farm.jsonl (one line per tool run) and the farm's summary."""

    view = "farm"
    streams = ("farm",)
    kind = "farm"

    @locked
    def frames(self) -> dict:
        """A tool farm's view: per-worker units, busy seconds and throughput, the failed tool
        runs (each attempt, with stderr), the units given up, retries.

        ``workers`` columns: worker, node, units, failed_runs, busy_s, units_per_s (units per
        second of the run so far); ``failed_runs`` columns: unit, worker, attempt, error,
        returncode, stderr; ``given_up``: summary's failures once the run ends (which units failed
        with no retry left is not knowable before), else []."""
        def build():
            runs = pd.DataFrame(self.rows)
            summ, last = self.run.summary, self.run.snapshots.last
            if runs.empty or "worker" not in runs:
                workers, failed = pd.DataFrame(columns=WORKER_COLUMNS), pd.DataFrame(columns=FAILED_COLUMNS)
            else:
                for c in ("ok", "seconds", "node", "t_end", "attempt", "error", "returncode", "stderr"):
                    if c not in runs:
                        runs[c] = None
                ok = runs["ok"].fillna(False).astype(bool)
                elapsed = first(summ.get("run_s"), last.get("elapsed"))
                g = runs.groupby("worker")
                workers = pd.DataFrame({
                    "node": g["node"].first(),
                    "units": ok.groupby(runs["worker"]).sum(),
                    "failed_runs": (~ok).groupby(runs["worker"]).sum(),
                    "busy_s": g["seconds"].sum(min_count=1),
                }).reset_index()
                workers["units_per_s"] = workers["units"] / elapsed if elapsed else None
                workers = workers[WORKER_COLUMNS]
                failed = runs.loc[~ok, FAILED_COLUMNS].reset_index(drop=True)
            return {"workers": workers, "failed_runs": failed,
                    "given_up": list(summ.get("failures") or []),
                    "retries": first(summ.get("retries"), last.get("retries")),
                    "units_failed": first(summ.get("units_failed"), last.get("units_failed")),
                    "node_bytes": summ.get("node_bytes") or {}}
        return self.cached("frames", ("farm", "metrics", "summary"), build)
