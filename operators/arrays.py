"""In-memory data as a pipeline source, and ``as_source``: anything a pipeline can read.

``ArraySource(data, batch_size)``: a dict of arrays, a pandas DataFrame, an Arrow table, awkward
records (or a list of such batches) cut into batches of ``batch_size`` records.

``as_source(obj, batch_size)``: a Source as is (or any object with ``partitions()`` and
``read()``), a Dask DataFrame/Bag as a ``DaskSource``, other data as an ``ArraySource``. The
engine takes sources only, so that it never imports these data types' wrappers; this is the one
call that makes ``Pipeline(as_source(data), ops)`` as short as passing the data.
"""
from __future__ import annotations

import numpy as np

from pairflow.engine.pipeline import Batch, Source
from pairflow.operators.dask import DaskSource, dask_kind


class ArraySource(Source):
    name = "arrays"

    def __init__(self, data, batch_size: int = 10_000):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(data, (list, tuple)):
            self.batches = [Batch.from_any(b) for b in data]
        else:
            whole = Batch.from_any(data)
            self.batches = [whole.take(np.arange(s, min(s + batch_size, len(whole))))
                            for s in range(0, len(whole), batch_size)] or [whole]
        self.batch_size = batch_size

    def partitions(self):
        return list(range(len(self.batches)))

    def read(self, spec):
        return self.batches[spec]

    def describe(self):
        return {"type": "ArraySource", "batches": len(self.batches),
                "records": sum(len(b) for b in self.batches)}


def as_source(obj, batch_size: int = 10_000):
    if isinstance(obj, Source):
        return obj
    if dask_kind(obj):
        return DaskSource(obj)
    if hasattr(obj, "partitions") and hasattr(obj, "read"):
        return obj
    return ArraySource(obj, batch_size=batch_size)
