"""The operator protocol: what ``operators/`` and user code implement, and the engine calls.

* ``Map`` / ``Filter``: named, row-wise functions of a batch with ``after=`` dependencies. A
  record survives when every filter accepts it, so the survivors never depend on the order the
  engine chooses; only the work does.
* ``Source``: ``partitions()`` lists small picklable descriptors, ``read(spec)`` returns one
  batch; the engine calls ``read`` in a data-setup task, possibly in another process.
* ``PipelineSink``: gets the survivors of each batch in the driver, then ``finalize``.

Concrete sources and sinks live in ``operators/`` (arrays, Dask, Parquet, histograms, ROOT):
the engine knows only this protocol.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ..errors import PairflowError
from .batch import Batch, as_column, is_awkward
from .ordering import FILTER, MAP, OpSpec


class Op:
    """A named, row-wise operator with dependencies (``after``: names of operators)."""

    kind = ""

    def __init__(self, name: str, fn: Callable, after: Iterable[str] | str = ()):
        if not isinstance(name, str) or not name:
            raise ValueError(f"an operator needs a non-empty name, got {name!r}")
        if not callable(fn):
            raise TypeError(f"operator {name!r}: fn must be callable, got {type(fn).__name__}")
        self.name, self.fn = name, fn
        self.after = (after,) if isinstance(after, str) else tuple(after)

    @property
    def spec(self) -> OpSpec:
        return OpSpec(self.name, self.kind, self.after)

    def __repr__(self):
        dep = f", after={list(self.after)}" if self.after else ""
        return f"{type(self).__name__}({self.name!r}{dep})"


class Map(Op):
    """Adds columns: ``fn(batch)`` returns one array (a column named after the map), a dict of
    arrays or a Batch, one value per input record."""

    kind = MAP

    def apply(self, batch: Batch) -> dict:
        out = self.fn(batch)
        if isinstance(out, Batch):
            out = out.columns
        cols = dict(out) if isinstance(out, Mapping) else {self.name: out}
        res = {}
        for k, v in cols.items():
            v = as_column(k, v)
            if len(v) != len(batch):
                raise PairflowError(f"map {self.name!r}: column {k!r} has {len(v)} values for "
                                    f"{len(batch)} records (maps must be row-wise)")
            res[str(k)] = v
        return res


class Filter(Op):
    """Keeps records: ``fn(batch)`` returns one boolean per record."""

    kind = FILTER

    def apply(self, batch: Batch) -> np.ndarray:
        m = self.fn(batch)
        if is_awkward(m):
            import awkward as ak
            m = ak.to_numpy(ak.fill_none(m, False))
        m = np.asarray(m)
        if m.dtype != bool or m.shape != (len(batch),):
            raise PairflowError(f"filter {self.name!r} must return one boolean per record: got "
                                f"dtype {m.dtype}, shape {m.shape} for {len(batch)} records")
        return m


# -- sources and sinks ------------------------------------------------------------------------


class Source:
    """A source of record batches: ``partitions()`` lists small picklable descriptors, and
    ``read(spec)`` (run in a data-setup task) returns one batch for one of them (a Batch or
    anything ``Batch.from_any`` takes). Subclassing is optional: any object with these two
    methods is a source."""

    name = "source"

    def partitions(self) -> list:
        raise NotImplementedError

    def read(self, spec) -> Any:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"type": type(self).__name__}


def check_source(obj) -> None:
    """The engine takes sources only, so that it never needs to know the data types that
    ``operators`` wrap (arrays, DataFrames, Dask collections): say how to wrap the rest."""
    if not (callable(getattr(obj, "partitions", None)) and callable(getattr(obj, "read", None))):
        raise TypeError(f"a pipeline source needs partitions() and read(spec), got "
                        f"{type(obj).__name__}: wrap in-memory data or a Dask collection with "
                        f"pairflow.operators.arrays.as_source(data, batch_size=...)")


def describe_source(source) -> dict:
    describe = getattr(source, "describe", None)
    return describe() if callable(describe) else {"type": type(source).__name__}


class PipelineSink:
    """Gets the survivors of each batch in the driver (``write``, in the order batches finish,
    not their index order), then ``finalize``. A sink writing files keeps them under a
    temporary name until ``finalize``, so a failed run leaves nothing that looks complete.

    ``finalize()``'s value lands in the result's ``result_group`` mapping (``"outputs"`` or
    ``"histograms"``) under ``result_key``."""

    name = "sink"
    result_group = "outputs"

    @property
    def result_key(self) -> str:
        return self.name

    def open(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def write(self, batch_index: int, batch: Batch) -> None:
        raise NotImplementedError

    def finalize(self):
        return None
