"""What ``allpairs`` returns: a handle to the run under way, and the finished run's result."""
from __future__ import annotations

import os

import numpy as np


class AllPairsResult:
    """What a finished run produced: result files in the run directory, and its metrics."""

    def __init__(self, run_dir: str, summary: dict, sinks: dict):
        self.run_dir = run_dir
        self.summary = summary
        self.outputs = sinks

    @property
    def R(self) -> float:
        return self.summary["R"]

    def matrix(self, field: str = "value") -> np.ndarray:
        import zarr
        return zarr.open_group(self.outputs["dense"], mode="r")[field][...]

    def dask(self, field: str = "value"):
        import dask.array as da
        # the array inlined in each chunk's task: a task per chunk, no shared array task
        return da.from_zarr(os.path.join(self.outputs["dense"], field), inline_array=True)

    @property
    def topk(self):
        import pandas as pd
        return pd.read_parquet(self.outputs["topk"])

    @property
    def edges(self):
        import pandas as pd
        return pd.read_parquet(self.outputs["threshold"])

    def __repr__(self):
        s = self.summary
        return (f"AllPairsResult(n={s['n_items']}, pairs={s['pairs_total']}, "
                f"wall={s['wall_s']:.2f}s, R={s['R']:.3f}, run_dir={self.run_dir!r})")


class RunHandle:
    """A run under way: ``progress()``, ``result()``, ``metrics()``, ``cancel()``.

    ``run``: the driver's run (``driver._Run``), which does the Ray calls."""

    def __init__(self, run):
        self._run = run

    @property
    def run_dir(self) -> str:
        return self._run.recorder.path

    def progress(self) -> dict:
        return self._run.progress()

    def metrics(self) -> dict:
        return self._run.metrics_snapshot()

    def result(self, timeout: float | None = None) -> AllPairsResult:
        return self._run.wait(timeout)

    def cancel(self) -> None:
        """Stop the run; it is recorded as interrupted (reason "cancelled"), not failed, and
        ``resume=True`` continues it."""
        self._run.cancel()

    def _repr_html_(self):
        p = self.progress()
        return f"<b>pairflow run</b> {self.run_dir}: {p['done']}/{p['total']} tiles"

    def __repr__(self):
        p = self.progress()
        return f"RunHandle({self.run_dir!r}, tiles {p['done']}/{p['total']})"
