"""What a finished pipeline run hands back: survivors, cutflow, histograms and the run directory.

Survivors come as the engine holds them (a Batch) or through the usual tables (pandas, Arrow,
awkward, a Dask DataFrame), read back from the Parquet output when they were not kept in memory.
"""
from __future__ import annotations

import math

from .batch import Batch


class PipelineResult:
    """A finished pipeline: survivors, cutflow, histograms, re-plans, and the run directory."""

    def __init__(self, run_dir: str, summary: dict, selected: Batch | None, cutflow,
                 histograms: dict, outputs: dict, replans: list):
        self.run_dir, self.summary, self.selected = run_dir, summary, selected
        self.cutflow, self.histograms, self.outputs = cutflow, histograms, outputs
        self.replans = replans

    @property
    def n_selected(self) -> int:
        return self.summary["records_selected"]

    @property
    def orders(self) -> list[list[str]]:
        """The distinct operator orders the run used, in first-use order."""
        seen, out = set(), []
        for o in self.summary["orders_used"]:
            if tuple(o) not in seen:
                seen.add(tuple(o))
                out.append(list(o))
        return out

    def to_pandas(self):
        if self.selected is not None:
            return self.selected.to_pandas()
        import pandas as pd
        return pd.read_parquet(self.outputs["parquet"])

    def to_arrow(self):
        if self.selected is not None:
            return self.selected.to_arrow()
        import pyarrow.parquet as pq
        return pq.read_table(self.outputs["parquet"])

    def to_awkward(self):
        if self.selected is None:
            import awkward as ak
            return ak.from_arrow(self.to_arrow())
        return self.selected.to_awkward()

    def to_dask(self, npartitions: int | None = None):
        """The survivors as a Dask DataFrame (the Parquet dataset when the run wrote one).
        Compute it on Ray with ``scheduler=ray.util.dask.ray_dask_get``."""
        import dask.dataframe as dd
        if "parquet" in self.outputs:
            return dd.read_parquet(self.outputs["parquet"])
        df = self.to_pandas()
        return dd.from_pandas(df, npartitions=npartitions or max(1, min(
            self.summary["batches"], math.ceil(len(df) / 10_000) or 1)))

    def __repr__(self):
        s = self.summary
        return (f"PipelineResult({s['records_selected']}/{s['records_in']} records selected, "
                f"{s['batches']} batches, wall={s['wall_s']:.2f}s, run_dir={self.run_dir!r})")
