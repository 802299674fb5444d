"""A Dask DataFrame or Bag as a pipeline source: one batch per partition.

Each partition is computed inside a data-setup task, with Ray's Dask scheduler (dask-on-Ray)
when the task runs on Ray and the synchronous one otherwise, so a Dask graph runs where the
pipeline reads. Bag items are dicts (one column per key) or values (one column ``value``).
"""
from __future__ import annotations

import sys
from typing import Mapping

import numpy as np

from pairflow.engine.pipeline import Batch, Source


def dask_kind(obj) -> str | None:
    """"dataframe", "bag" or None, by type name: telling needs no import of dask."""
    mod = type(obj).__module__
    if not mod.startswith("dask"):
        return None
    name = type(obj).__name__
    if name in ("DataFrame", "Series"):
        return "dataframe"
    if name == "Bag":
        return "bag"
    return None


class DaskSource(Source):
    name = "dask"

    def __init__(self, collection, scheduler: str = "ray"):
        kind = dask_kind(collection)
        if kind is None:
            raise TypeError(f"DaskSource needs a dask DataFrame or Bag, got "
                            f"{type(collection).__name__}")
        self.kind = kind
        self.parts = list(collection.to_delayed())
        self.scheduler = scheduler

    def partitions(self):
        return list(range(len(self.parts)))

    def _compute(self, part):
        if self.scheduler != "ray":
            return part.compute(scheduler=self.scheduler)
        ray = sys.modules.get("ray")  # a process that never imported Ray is not on Ray
        if ray is not None and ray.is_initialized():
            from ray.util.dask import ray_dask_get
            return part.compute(scheduler=ray_dask_get)
        return part.compute(scheduler="sync")

    def read(self, spec):
        value = self._compute(self.parts[spec])
        if self.kind == "dataframe":
            if type(value).__name__ == "Series":
                value = value.to_frame()
            return Batch.from_any(value)
        items = list(value)
        if items and all(isinstance(x, Mapping) for x in items):
            import pandas as pd
            return Batch.from_any(pd.DataFrame(items))
        return Batch({"value": np.asarray(items)})

    def describe(self):
        return {"type": "DaskSource", "kind": self.kind, "partitions": len(self.parts)}
