"""Filter pipelines that reorder themselves by measured cost.

    from engine import Pipeline, Map, Filter
    p = Pipeline(source, [Map("pt", lambda b: np.hypot(b["px"], b["py"])),
                          Filter("hard", lambda b: b["pt"] > 20, after=["pt"]),
                          Filter("met", lambda b: b["met"] > 30)],
                 sinks=[ParquetSink(), Histogram("pt", "pt", bins=50, range=(0, 200))])
    result = p.run()           # on Ray; p.run(executor="local") runs in this process
    result.cutflow, result.to_pandas(), result.to_dask()

A *source* yields record batches (``partitions()`` -> small descriptors; ``read(spec)`` -> a
batch). A batch is columnar (:class:`Batch`: numpy or awkward columns of one length; built from
dicts, pandas, Arrow or awkward records). Operators are row-wise: a :class:`Map` adds columns, a
:class:`Filter` returns a boolean mask; ``after=[...]`` names the operators whose columns (or
guarantees) an operator needs. A record survives when every filter accepts it, so the survivors
never depend on the order; only the work does.

Mechanism (the policy is ``engine.pipeline.ordering``): the driver keeps per-operator windowed stats
(cost per record, pass rate), re-plans the order every ``replan_every`` finished batches (the
interval doubling while the order holds, up to ``max_replan_every``), and hands
each batch to a processing actor with the current order. Every batch also runs a small sample of
its records through every operator (each operator sees the sample records that passed its own
dependencies) so that estimates of operators the order rarely reaches stay honest. Reading and
decoding (data setup, DS) are Ray tasks; processing (DP) runs in actors; of ``slots`` concurrent
slots, how many read and how many process is rebalanced from the measured cost per record of each
side (``DSDPBalancer``: HEP-Frame's checkpoints, the interval doubling while nothing changes).

The run directory holds config.yaml, meta.json (kind "pipeline"), status.json, metrics.jsonl,
pipeline.jsonl (one line per re-plan: order and per-operator cost, pass rate, records),
summary.json and result/ (cutflow, histograms, Parquet of the survivors); see docs/pipelines.md.
"""
from __future__ import annotations

import math
import os
import shutil
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..errors import InputError, PairflowError, root_cause
from .ordering import (FILTER, MAP, DSDPBalancer, OperatorStats, OpSpec, OrderPolicy,
                       SampleRule, ancestors, check_dag, topological)
from ..run.rundir import JsonlWriter, RunDir, dumps, new_run_dir, write_json, write_text

# -- batches -----------------------------------------------------------------------------------


def _is_awkward(x) -> bool:
    return type(x).__module__.split(".")[0] == "awkward"


def _as_column(name: str, v):
    if isinstance(v, np.ndarray):
        return v
    if _is_awkward(v):
        import awkward as ak
        if v.ndim == 1 and not ak.fields(v):
            try:  # flat numbers: numpy is faster and simpler downstream
                return ak.to_numpy(v)
            except Exception:
                return v
        return v
    if hasattr(v, "to_numpy") and not hasattr(v, "combine_chunks"):  # pandas Series
        return v.to_numpy()
    if hasattr(v, "type") and hasattr(v, "to_pylist"):  # Arrow (chunked) array
        return _arrow_column(v)
    arr = np.asarray(v)
    if arr.ndim == 0:
        raise ValueError(f"column {name!r} is a scalar, not one value per record")
    return arr


def _arrow_column(col):
    import pyarrow as pa
    typ = col.type
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
        if col.null_count == 0:
            return col.to_numpy(zero_copy_only=False) if isinstance(col, pa.ChunkedArray) \
                else col.to_numpy(zero_copy_only=False)
    import awkward as ak
    return ak.from_arrow(col)


class Batch:
    """Columns of one length: numpy arrays or awkward arrays (jagged collections)."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: Mapping[str, Any] | None = None, n: int | None = None):
        cols = {str(k): _as_column(str(k), v) for k, v in (columns or {}).items()}
        lengths = {k: len(v) for k, v in cols.items()}
        if n is None:
            n = next(iter(lengths.values()), 0)
        bad = {k: m for k, m in lengths.items() if m != n}
        if bad:
            raise ValueError(f"columns of a batch must have one length ({n}); got {bad}")
        self.columns, self.n = cols, int(n)

    @classmethod
    def _raw(cls, columns: dict, n: int) -> "Batch":
        b = cls.__new__(cls)
        b.columns, b.n = columns, n
        return b

    @classmethod
    def from_any(cls, obj) -> "Batch":
        """dict of arrays, pandas DataFrame, pyarrow Table/RecordBatch, awkward record array,
        numpy structured array, or a Batch."""
        if isinstance(obj, Batch):
            return obj
        if isinstance(obj, Mapping):
            return cls(obj)
        mod = type(obj).__module__.split(".")[0]
        if mod == "pandas":
            return cls({c: obj[c].to_numpy() for c in obj.columns})
        if mod == "pyarrow":
            if hasattr(obj, "column_names"):
                return cls({name: _arrow_column(obj.column(name)) for name in obj.column_names},
                           n=obj.num_rows)
        if mod == "awkward":
            import awkward as ak
            fields = ak.fields(obj)
            if not fields:
                raise TypeError("an awkward batch must be an array of records (with fields)")
            return cls({f: obj[f] for f in fields}, n=len(obj))
        if isinstance(obj, np.ndarray) and obj.dtype.names:
            return cls({f: obj[f] for f in obj.dtype.names})
        raise TypeError(f"cannot make a record batch from {type(obj).__name__}: give a dict of "
                        f"arrays, a pandas DataFrame, a pyarrow Table or an awkward record array")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str):
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no column {name!r} in this batch (columns: "
                           f"{sorted(self.columns)}); does the operator declare after= the "
                           f"map that makes it?") from None

    def __contains__(self, name) -> bool:
        return name in self.columns

    def keys(self):
        return self.columns.keys()

    def get(self, name, default=None):
        return self.columns.get(name, default)

    def take(self, sel) -> "Batch":
        """Rows by boolean mask or integer indices."""
        sel = np.asarray(sel)
        n = int(sel.sum()) if sel.dtype == bool else len(sel)
        return Batch._raw({k: v[sel] for k, v in self.columns.items()}, n)

    def with_columns(self, cols: Mapping[str, Any]) -> "Batch":
        new = dict(self.columns)
        new.update(cols)
        return Batch._raw(new, self.n)

    def select(self, names: Iterable[str] | None) -> "Batch":
        if names is None:
            return self
        return Batch._raw({k: self.columns[k] for k in names if k in self.columns}, self.n)

    def without(self, names) -> "Batch":
        if not names:
            return self
        return Batch._raw({k: v for k, v in self.columns.items() if k not in names}, self.n)

    @staticmethod
    def concat(batches: Sequence["Batch"]) -> "Batch":
        batches = [b for b in batches if b is not None]
        if not batches:
            return Batch({})
        names = list(batches[0].columns)
        out = {}
        for k in names:
            parts = [b.columns[k] for b in batches]
            if any(_is_awkward(p) for p in parts):
                import awkward as ak
                out[k] = ak.concatenate(parts)
            else:
                out[k] = np.concatenate(parts)
        return Batch._raw(out, sum(b.n for b in batches))

    def to_arrow(self):
        import pyarrow as pa
        arrays, names = [], []
        for k, v in self.columns.items():
            names.append(k)
            if _is_awkward(v):
                import awkward as ak
                arrays.append(ak.to_arrow(v, extensionarray=False))
            elif v.ndim > 1:
                import awkward as ak
                arrays.append(ak.to_arrow(ak.from_numpy(v), extensionarray=False))
            else:
                arrays.append(pa.array(v))
        return pa.table(arrays, names=names) if names else pa.table({})

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def to_awkward(self):
        import awkward as ak
        return ak.zip(dict(self.columns), depth_limit=1)

    def __repr__(self):
        return f"Batch({self.n} records, columns={list(self.columns)})"


# -- operators ---------------------------------------------------------------------------------


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
            v = _as_column(k, v)
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
        if _is_awkward(m):
            import awkward as ak
            m = ak.to_numpy(ak.fill_none(m, False))
        m = np.asarray(m)
        if m.dtype != bool or m.shape != (len(batch),):
            raise PairflowError(f"filter {self.name!r} must return one boolean per record: got "
                                f"dtype {m.dtype}, shape {m.shape} for {len(batch)} records")
        return m


# -- sources -----------------------------------------------------------------------------------


class Source:
    """A source of record batches: ``partitions()`` lists small picklable descriptors, and
    ``read(spec)`` (run in a data-setup task) returns one batch for one of them."""

    name = "source"

    def partitions(self) -> list:
        raise NotImplementedError

    def read(self, spec) -> Any:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"type": type(self).__name__}


class ArraySource(Source):
    """In-memory data (dict of arrays, DataFrame, Arrow table, awkward records, or a list of
    such batches), cut into batches of ``batch_size`` records."""

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


def _dask_kind(obj) -> str | None:
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
    """A Dask DataFrame or Bag: one batch per partition, each computed inside a data-setup task
    with Ray's Dask scheduler (dask-on-Ray). Bag items are dicts (one column per key) or values
    (one column ``value``)."""

    name = "dask"

    def __init__(self, collection, scheduler: str = "ray"):
        kind = _dask_kind(collection)
        if kind is None:
            raise TypeError(f"DaskSource needs a dask DataFrame or Bag, got "
                            f"{type(collection).__name__}")
        self.kind = kind
        self.parts = list(collection.to_delayed())
        self.scheduler = scheduler

    def partitions(self):
        return list(range(len(self.parts)))

    def read(self, spec):
        part = self.parts[spec]
        if self.scheduler == "ray":
            import ray
            from ray.util.dask import ray_dask_get
            value = part.compute(scheduler=ray_dask_get) if ray.is_initialized() \
                else part.compute(scheduler="sync")
        else:
            value = part.compute(scheduler=self.scheduler)
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


def as_source(obj, batch_size: int = 10_000) -> Source:
    if isinstance(obj, Source):
        return obj
    if _dask_kind(obj):
        return DaskSource(obj)
    if hasattr(obj, "partitions") and hasattr(obj, "read"):
        return obj
    return ArraySource(obj, batch_size=batch_size)


# -- sinks -------------------------------------------------------------------------------------


class PipelineSink:
    """Gets the survivors of each batch in the driver (``write``), then ``finalize``."""

    name = "sink"

    def open(self, out_dir: str) -> None:
        self.out_dir = out_dir

    def write(self, batch_index: int, batch: Batch) -> None:
        raise NotImplementedError

    def finalize(self):
        return None


class ParquetSink(PipelineSink):
    """The surviving records as a Parquet dataset (a directory of one part per batch), written
    under ``NAME.partial`` and renamed when the run finishes."""

    name = "parquet"

    def __init__(self, filename: str = "selected.parquet", columns: Sequence[str] | None = None):
        self.filename, self.columns = filename, list(columns) if columns else None

    def open(self, out_dir):
        super().open(out_dir)
        self.final = os.path.join(out_dir, self.filename)
        self.partial = self.final + ".partial"
        shutil.rmtree(self.partial, ignore_errors=True)
        os.makedirs(self.partial)
        self.parts = 0

    def write(self, batch_index, batch):
        import pyarrow.parquet as pq
        table = batch.select(self.columns).to_arrow()
        path = os.path.join(self.partial, f"part-{batch_index:06d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.replace(path + ".tmp", path)
        self.parts += 1

    def finalize(self):
        if os.path.exists(self.final):
            shutil.rmtree(self.final)
        os.replace(self.partial, self.final)
        return self.final


class Histogram(PipelineSink):
    """A (weighted) histogram of a column of the survivors; jagged columns are flattened.

    ``column`` is a column name or ``fn(batch) -> array``; ``bins`` an int (with ``range``) or
    edges; ``weight`` a column name (jagged columns broadcast the record's weight)."""

    name = "histogram"

    def __init__(self, name: str, column, bins=50, range: tuple | None = None,
                 weight: str | None = None):
        self.hname, self.column, self.weight = name, column, weight
        if np.ndim(bins) == 0:
            if range is None:
                raise ValueError(f"histogram {name!r}: give range=(lo, hi) with an integer bins")
            self.edges = np.linspace(range[0], range[1], int(bins) + 1)
        else:
            self.edges = np.asarray(bins, dtype=float)
        self.counts = np.zeros(len(self.edges) - 1)
        self.sumw2 = np.zeros(len(self.edges) - 1)
        self.entries = 0

    @property
    def name(self):  # type: ignore[override]
        return f"hist:{self.hname}"

    def write(self, batch_index, batch):
        if len(batch) == 0:
            return
        values = self.column(batch) if callable(self.column) else batch[self.column]
        w = None if self.weight is None else np.asarray(batch[self.weight], dtype=float)
        if _is_awkward(values):
            import awkward as ak
            if w is not None:
                w = ak.to_numpy(ak.flatten(ak.broadcast_arrays(w, values)[0], axis=None))
            values = ak.to_numpy(ak.flatten(values, axis=None))
        values = np.asarray(values, dtype=float)
        c, _ = np.histogram(values, self.edges, weights=w)
        s, _ = np.histogram(values, self.edges, weights=None if w is None else w * w)
        self.counts += c
        self.sumw2 += s
        self.entries += int(np.isfinite(values).sum())

    def finalize(self):
        out = {"name": self.hname, "edges": self.edges.tolist(), "counts": self.counts.tolist(),
               "sumw2": self.sumw2.tolist(), "entries": self.entries,
               "column": self.column if isinstance(self.column, str) else "<fn>",
               "weight": self.weight}
        write_json(os.path.join(self.out_dir, f"hist-{self.hname}.json"), out)
        return out


# -- processing one batch ----------------------------------------------------------------------


class View:
    """What an operator sees: the rows of one batch still alive, each column taken (indexed by
    those rows) only when an operator first reads it. A filter that drops records therefore costs
    nothing for the columns nobody reads afterwards. Map outputs are kept at the rows they were
    computed for and re-indexed on access. Columns of maps that are not among the operator's
    dependencies are hidden, so a missing ``after=`` fails the same way in every order."""

    __slots__ = ("_src", "_rows", "_derived", "_hidden", "_cache", "n")

    def __init__(self, src: Batch, rows: np.ndarray | None, derived: dict,
                 hidden: frozenset = frozenset(), cache: dict | None = None):
        self._src, self._rows, self._derived = src, rows, derived
        self._hidden = hidden
        self._cache = {} if cache is None else cache
        self.n = len(src) if rows is None else len(rows)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name) -> bool:
        return name not in self._hidden and (name in self._derived or name in self._src.columns)

    def keys(self):
        return [k for k in list(self._src.columns) + list(self._derived) if k not in self._hidden]

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __getitem__(self, name: str):
        if name in self._hidden:
            raise KeyError(f"column {name!r} is made by a map this operator does not declare "
                           f"in after=") from None
        v = self._cache.get(name)
        if v is not None:
            return v
        rows = self._rows
        if name in self._derived:
            at, arr = self._derived[name]
            if at is rows:
                v = arr
            elif at is None:
                v = arr[rows]
            else:
                v = arr[np.searchsorted(at, rows)]
        elif name in self._src.columns:
            col = self._src.columns[name]
            v = col if rows is None else col[rows]
        else:
            raise KeyError(f"no column {name!r} (columns: {sorted(self.keys())}); does the "
                           f"operator declare after= the map that makes it?")
        self._cache[name] = v
        return v

    def take(self, sel) -> Batch:
        names = self.keys()
        return Batch._raw({k: self[k] for k in names}, self.n).take(sel)

    def materialize(self, names: Iterable[str] | None = None) -> Batch:
        names = self.keys() if names is None else [k for k in names if k in self]
        return Batch._raw({k: self[k] for k in names}, self.n)

    @property
    def columns(self) -> dict:
        return self.materialize().columns

    def __repr__(self):
        return f"View({self.n} records, columns={self.keys()})"


class Processor:
    """Runs one batch through the operators in a given order (and its sample through every
    operator); returns the survivors and per-operator observations. Used by the processing
    actors and by the local executor alike."""

    def __init__(self, ops: Sequence[Op], method: str = "auto", clock: str = "cpu"):
        if clock not in ("cpu", "wall"):
            raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
        # operator costs in thread CPU time by default: processes that time-share cores (more
        # slots than cores, or a busy machine) would otherwise charge waiting to the operator
        self.clock = time.thread_time if clock == "cpu" else time.perf_counter
        self.ops = {o.name: o for o in ops}
        specs = [o.spec for o in ops]
        check_dag(specs)
        self.specs, self.method = specs, method
        self._policy = None
        self.written = topological(specs)
        anc = ancestors(specs)
        self.anc = anc
        self.anc_filters = {n: [f for f in self.written
                                if f in anc[n] and self.ops[f].kind == FILTER]
                            for n in self.ops}

    def _call(self, op: Op, batch, where: str):
        try:
            return op.apply(batch)
        except PairflowError:
            raise
        except Exception as exc:
            raise PairflowError(f"operator {op.name!r} failed on {where}: "
                                f"{type(exc).__name__}: {exc}") from exc

    @staticmethod
    def _add(batch: Batch, derived: dict, name: str, out: dict, rows) -> None:
        clash = [k for k in out if k in derived or k in batch.columns]
        if clash:
            what = "input columns" if set(clash) & set(batch.columns) else \
                "columns of another map"
            raise PairflowError(f"map {name!r} would overwrite {what} {clash}")
        for k, v in out.items():
            derived[k] = (rows, v)

    def bootstrap_order(self, obs: list) -> list[str]:
        """An order from one sample's observations (before the driver has any stats)."""
        if self._policy is None:
            self._policy = OrderPolicy(self.specs, method=self.method)
        stats = {name: (sec / n, passed / n) for name, n, passed, sec, _ in obs if n > 0}
        return self._policy.order(stats)

    def process(self, batch: Batch, order: Sequence[str] | None, sample_rows=None,
                where: str = "a batch", columns: Sequence[str] | None = None
                ) -> tuple[Batch, list, list]:
        """Returns (survivors, observations, the order used). ``order=None``: choose it here
        from this batch's sample (the first batches of an adaptive run, before any stats)."""
        obs: list = []
        if sample_rows is not None and len(sample_rows):
            obs += self._sample(batch, np.asarray(sample_rows, dtype=np.int64), where)
        if order is None:
            order = self.bootstrap_order(obs) if obs else list(self.written)
        rows = None  # all
        derived: dict = {}
        produced: dict[str, list] = {}
        cache: dict = {}
        n = len(batch)
        for name in order:
            op = self.ops[name]
            if op.kind == FILTER and n == 0:
                continue
            hidden = frozenset(c for m, cols in produced.items() if m not in self.anc[name]
                               for c in cols)
            view = View(batch, rows, derived, hidden, cache)
            t0 = self.clock()
            out = self._call(op, view, where)
            if op.kind == MAP:
                self._add(batch, derived, name, out, rows)
                produced[name] = list(out)
                obs.append((name, n, n, self.clock() - t0, False))
            else:
                if not out.all():
                    rows = np.flatnonzero(out) if rows is None else rows[out]
                    cache = {}
                obs.append((name, n, len(out) if rows is None else len(rows),
                            self.clock() - t0, False))
                n = len(batch) if rows is None else len(rows)
        survivors = View(batch, rows, derived, frozenset(), cache).materialize(columns)
        return survivors, obs, list(order)

    def _sample(self, batch: Batch, sample: np.ndarray, where: str) -> list:
        """Every operator on the sample records that passed its own dependencies."""
        obs = []
        passed: dict[str, np.ndarray] = {}   # filter -> bool over the sample
        derived: dict = {}
        m = len(sample)
        for name in self.written:
            op = self.ops[name]
            ok = np.ones(m, bool)
            for f in self.anc_filters[name]:
                ok &= passed[f]
            rows = sample[ok]
            if len(rows) == 0:
                if op.kind == FILTER:
                    passed[name] = np.zeros(m, bool)
                continue
            view = View(batch, rows, derived)
            t0 = self.clock()
            out = self._call(op, view, where + " (sample)")
            dt = self.clock() - t0
            if op.kind == MAP:
                self._add(batch, derived, name, out, rows)
                obs.append((name, len(rows), len(rows), dt, True))
            else:
                p = np.zeros(m, bool)
                p[ok] = out
                passed[name] = p
                obs.append((name, len(rows), int(out.sum()), dt, True))
        return obs


# -- configuration and result ------------------------------------------------------------------


@dataclass
class PipelineConfig:
    """Every knob of a pipeline run (the Hydra ``pipeline:`` block has the same names)."""

    order: Any = "adaptive"          # adaptive | written | [names...] (fixed)
    method: str = "auto"             # the OrderPolicy: auto | exact | greedy
    replan_every: int = 2            # finished batches between re-plans (doubling while the
    max_replan_every: int = 16       #   order holds, up to max_replan_every)
    window: int = 16                 # batches in the stats window
    sample_rate: float | None = None  # records per batch run through every op (adaptive: 0.005)
    min_sample: int = 8
    sample_every: int = 1            # sample every k-th batch only
    sample_budget: float = 0.02      # adaptive: the sample costs at most this share of the work
    executor: str = "ray"            # ray | local (in this process, no Ray)
    slots: int | None = None         # concurrent DS + DP slots; default CPUs + 1 (>= 2)
    ds_slots: int | None = None      # fixed number of reading slots; None: balanced
    balance: bool = True
    balance_clock: str = "cpu"       # cpu (thread CPU time; robust to time-sharing) | wall
    op_clock: str = "cpu"            # how operator costs are timed: cpu | wall (I/O-bound ops)
    checkpoint: int = 2              # first DS/DP checkpoint interval, batches (then doubles)
    max_checkpoint: int = 64
    max_ready: int | None = None     # batches read or being read, not yet processed;
                                     # default 2 x slots
    depth: int = 2                   # calls queued per slot actor (hides the Ray round trip)
    columns: Sequence[str] | None = None  # columns of the survivors to keep (None: all)
    collect: bool = True             # keep the survivors in the result (in memory)
    weight: str | None = None        # a column summed over the survivors in the cutflow
    name: str = "pipeline"
    runs_root: str = "runs"
    progress: bool = True
    seed: int = 0
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_mb: int | None = None


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
        return self.selected.to_arrow() if self.selected is not None else \
            __import__("pyarrow.parquet", fromlist=["x"]).read_table(self.outputs["parquet"])

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


# -- the run -----------------------------------------------------------------------------------


class _Run:
    def __init__(self, pipeline: "Pipeline", cfg: PipelineConfig, run_dir: str | None,
                 config_dump: dict | None):
        self.p, self.cfg = pipeline, cfg
        self.t_start = time.time()
        self.rundir = RunDir(run_dir).create() if run_dir else new_run_dir(cfg.runs_root,
                                                                           cfg.name)
        self.config_dump = config_dump
        self.specs = [o.spec for o in pipeline.ops]
        self.policy = OrderPolicy(self.specs, method=cfg.method)
        self.written = self.policy.written
        self.fixed = None
        if isinstance(cfg.order, str):
            if cfg.order == "written":
                self.fixed = list(self.written)
            elif cfg.order != "adaptive":
                raise ValueError(f"order must be 'adaptive', 'written' or a list of operator "
                                 f"names, got {cfg.order!r}")
        else:
            order = [str(x) for x in cfg.order]
            if topological(self.specs, order) != order:
                raise ValueError(f"order {order} breaks a dependency (after=)")
            self.fixed = order
        self.order = list(self.fixed or self.written)
        # until the first re-plan, an adaptive run lets each batch choose its order from its
        # own sample (a batch dispatched before any stats would otherwise run the written order)
        self.bootstrapping = self.fixed is None
        self._costs = None
        rate = cfg.sample_rate if cfg.sample_rate is not None else \
            (0.005 if self.fixed is None else 0.0)
        self.sample = SampleRule(rate, cfg.min_sample, cfg.seed, cfg.sample_every)
        self.boot_sample = SampleRule(max(rate, 0.005), max(cfg.min_sample, 16), cfg.seed)
        self.stats = {o.name: OperatorStats(o.kind, cfg.window) for o in self.specs}
        self.batches_done = 0
        self.last_replan = 0
        self.replan_interval = cfg.replan_every
        self.records_in = 0
        self.records_selected = 0
        self.weight_selected = 0.0
        self.orders_used: list = []
        self.replans: list = []
        self.selected: dict[int, Batch] = {}
        self.stage = {"read_wall_s": 0.0, "read_cpu_s": 0.0, "process_wall_s": 0.0,
                      "process_cpu_s": 0.0}
        self.balancer: DSDPBalancer | None = None
        self.warnings: list[str] = []

    # -- files --
    def start(self, n_batches: int, slots: int | None) -> None:
        cfg = self.cfg
        self.n_batches = n_batches
        dump = self.config_dump or {"pipeline": _jsonable(asdict(cfg)),
                                    "source": self.p.source.describe(),
                                    "ops": [_op_dict(o) for o in self.specs]}
        try:
            from omegaconf import OmegaConf
            text = OmegaConf.to_yaml(OmegaConf.create(_jsonable(dump)))
        except Exception:
            text = dumps(dump)
        write_text(self.rundir.file("config.yaml"), text)
        self.meta = {"kind": "pipeline", "app": cfg.name, "source": self.p.source.describe(),
                     "ops": [_op_dict(o) for o in self.specs], "written_order": self.written,
                     "order_mode": "adaptive" if self.fixed is None else "fixed",
                     "initial_order": self.order, "n_batches": n_batches,
                     "executor": cfg.executor, "slots": slots,
                     "sample_rate": self.sample.rate, "replan_every": cfg.replan_every,
                     "sinks": [s.name for s in self.p.sinks], "started": self.t_start}
        write_json(self.rundir.file("meta.json"), self.meta)
        self.rundir.set_status("starting")
        self.metrics_w = JsonlWriter(self.rundir.file("metrics.jsonl"))
        self.plan_w = JsonlWriter(self.rundir.file("pipeline.jsonl"))
        for s in self.p.sinks:
            s.open(self.rundir.result_dir)
        self._log_plan(changed=False)
        self._last_snap = 0.0
        self._last_line = self._last_status = time.time()

    def dispatch(self, index: int, n: int) -> tuple[list | None, np.ndarray]:
        """The order to send with batch ``index`` (None: choose from the sample) and the rows
        of its sample."""
        if self.bootstrapping:
            return None, self.boot_sample.rows(index, n)
        if self.fixed is None and self.cfg.sample_budget and self._costs is not None:
            expected, full, overhead = self._costs
            return list(self.order), self.sample.budgeted(index, n, expected, full, overhead,
                                                          self.cfg.sample_budget)
        return list(self.order), self.sample.rows(index, n)

    def _update_costs(self) -> None:
        """Expected work per record of the current order, of running every operator on one
        record, and the operators' fixed costs per call: what the sample budget needs."""
        snaps = {n: s.snapshot() for n, s in self.stats.items()}
        if any(v["cost_s"] is None for v in snaps.values()):
            self._costs = None
            return
        full = sum(v["cost_s"] for v in snaps.values())
        overhead = sum(v["overhead_s"] or 0.0 for v in snaps.values())
        self._costs = (self.policy.expected_cost(self.order, self.stats), full, overhead)

    def _log_plan(self, changed: bool, expected: float | None = None) -> None:
        line = {"t": time.time(), "batch": self.batches_done, "order": list(self.order),
                "ops": {n: s.snapshot() for n, s in self.stats.items()}, "changed": changed,
                "expected_cost_s": expected}
        if self.balancer is not None:
            line.update(ds_slots=self.balancer.n_ds, dp_slots=self.balancer.n_dp)
        self.replans.append(line)
        self.plan_w.write([line])

    def snapshot(self, force: bool = False, **extra) -> None:
        now = time.time()
        if not force and now - self._last_snap < 0.5:
            return
        self._last_snap = now
        snap = {"t": now, "elapsed": now - self.t_start, "batches_done": self.batches_done,
                "batches_total": self.n_batches, "records_in": self.records_in,
                "records_selected": self.records_selected,
                "stage_seconds": {k: round(v, 6) for k, v in self.stage.items()}, **extra}
        if self.balancer is not None:
            snap.update(ds_slots=self.balancer.n_ds, dp_slots=self.balancer.n_dp)
        self.metrics_w.write([snap])
        if self.cfg.progress and (force or now - self._last_line > 5):
            self._last_line = now
            print(f"[pairflow] batches {self.batches_done}/{self.n_batches}  records "
                  f"{self.records_in}  selected {self.records_selected}", file=sys.stderr,
                  flush=True)
        if now - self._last_status > 2:
            self._last_status = now
            self.rundir.set_status("running")

    # -- one finished batch --
    def on_batch(self, index: int, order: Sequence[str], survivors: Batch, obs: list,
                 n_records: int) -> None:
        for name, n_in, n_pass, sec, sampled in obs:
            self.stats[name].observe(n_in, n_pass, sec, sampled)
        self.batches_done += 1
        self.records_in += n_records
        self.records_selected += len(survivors)
        if self.cfg.weight and len(survivors):
            self.weight_selected += float(np.sum(survivors[self.cfg.weight]))
        self.orders_used.append(list(order))
        for s in self.p.sinks:
            s.write(index, survivors)
        if self.cfg.collect:
            self.selected[index] = survivors
        if self.batches_done == 1 or self.batches_done - self.last_replan >= self.replan_interval:
            self.last_replan = self.batches_done
            changed = False
            if self.fixed is None:
                self.bootstrapping = False
                new = self.policy.order(self.stats)
                changed = new != self.order
                self.order = new
                self._update_costs()
            # like the DS/DP checkpoints: a plan that holds is re-examined less and less often
            self.replan_interval = self.cfg.replan_every if changed else min(
                self.cfg.max_replan_every, 2 * self.replan_interval)
            self._log_plan(changed, self.policy.expected_cost(self.order, self.stats))

    # -- the end --
    def finish(self, extra: dict) -> PipelineResult:
        import pandas as pd
        self._log_plan(changed=False, expected=self.policy.expected_cost(self.order, self.stats))
        rows = []
        after = {o.name: list(o.after) for o in self.specs}
        for name in self.written:
            st = self.stats[name]
            t, s = st.total, st.sample_total
            rows.append({"op": name, "kind": st.kind, "after": after[name],
                         "records_in": t["records_in"], "passed": t["passed"],
                         "pass_rate": t["passed"] / t["records_in"] if t["records_in"] else None,
                         "seconds": t["seconds"],
                         "cost_s": t["seconds"] / t["records_in"] if t["records_in"] else None,
                         "sample_records_in": s["records_in"], "sample_passed": s["passed"],
                         "sample_pass_rate": (s["passed"] / s["records_in"]
                                              if s["records_in"] else None),
                         "sample_seconds": s["seconds"]})
        cutflow = pd.DataFrame(rows)
        tmp = self.rundir.file("result/cutflow.parquet.tmp")
        cutflow.to_parquet(tmp, index=False)
        os.replace(tmp, self.rundir.file("result/cutflow.parquet"))
        totals = {"records_in": self.records_in, "records_selected": self.records_selected,
                  "weight_selected": self.weight_selected if self.cfg.weight else None}
        write_json(self.rundir.file("result/cutflow.json"), {"ops": rows, "totals": totals})
        outputs, hists = {"cutflow": self.rundir.file("result/cutflow.parquet")}, {}
        for s in self.p.sinks:
            out = s.finalize()
            if isinstance(s, Histogram):
                hists[s.hname] = out
            else:
                outputs[s.name] = out
        selected = Batch.concat([self.selected[i] for i in sorted(self.selected)]) \
            if self.cfg.collect else None
        op_seconds = sum(st.total["seconds"] + st.sample_total["seconds"]
                         for st in self.stats.values())
        summary = {"kind": "pipeline", "app": self.cfg.name, "batches": self.batches_done,
                   **totals, "wall_s": time.time() - self.t_start, "op_seconds": op_seconds,
                   "order_mode": self.meta["order_mode"], "written_order": self.written,
                   "final_order": self.order, "orders_used": self.orders_used,
                   "distinct_orders": len({tuple(o) for o in self.orders_used}),
                   "replans": len(self.replans), "stage_seconds": self.stage,
                   "ops": {n: {**s.snapshot(), "total": s.total, "sample_total": s.sample_total}
                           for n, s in self.stats.items()},
                   "outputs": outputs, "warnings": self.warnings, **extra}
        if self.balancer is not None:
            summary["balance"] = {"slots": self.balancer.slots, "final_ds": self.balancer.n_ds,
                                  "final_dp": self.balancer.n_dp,
                                  "checkpoints": self.balancer.history}
        self.snapshot(force=True)
        self.metrics_w.close()
        self.plan_w.close()
        write_json(self.rundir.file("summary.json"), summary)
        self.rundir.set_status("finished")
        return PipelineResult(self.rundir.path, summary, selected, cutflow, hists, outputs,
                              self.replans)

    def fail(self, exc: BaseException) -> None:
        try:
            self.rundir.set_status("failed", error=str(exc))
            for w in (getattr(self, "metrics_w", None), getattr(self, "plan_w", None)):
                if w is not None:
                    w.close()
        except Exception:
            pass


def _op_dict(o: OpSpec) -> dict:
    return {"name": o.name, "kind": o.kind, "after": list(o.after)}


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    return str(obj)


def _where(source: Source, index: int, spec) -> str:
    return f"batch {index} ({type(source).__name__} partition {spec!r})"


def _read(source: Source, spec, index: int) -> Batch:
    try:
        return Batch.from_any(source.read(spec))
    except (InputError, PairflowError):
        raise
    except Exception as exc:
        raise PairflowError(f"reading {_where(source, index, spec)} failed: "
                            f"{type(exc).__name__}: {exc}") from exc


# -- executors ---------------------------------------------------------------------------------


def _run_local(run: _Run, source: Source, specs: list) -> dict:
    proc = Processor(run.p.ops, run.cfg.method, run.cfg.op_clock)
    run.start(len(specs), None)
    run.rundir.set_status("running")
    for index, spec in enumerate(specs):
        t0, c0 = time.perf_counter(), time.thread_time()
        batch = _read(source, spec, index)
        t1, c1 = time.perf_counter(), time.thread_time()
        order, rows = run.dispatch(index, len(batch))
        survivors, obs, order = proc.process(batch, order, rows, _where(source, index, spec),
                                             run.cfg.columns)
        t2, c2 = time.perf_counter(), time.thread_time()
        run.stage["read_wall_s"] += t1 - t0
        run.stage["read_cpu_s"] += c1 - c0
        run.stage["process_wall_s"] += t2 - t1
        run.stage["process_cpu_s"] += c2 - c1
        run.on_batch(index, order, survivors, obs, len(batch))
        run.snapshot()
    return {"executor": "local"}


def _slot_class():
    """The Ray actor, defined on first use so that importing this module needs no Ray."""
    global _SLOT_CLASS
    if _SLOT_CLASS is not None:
        return _SLOT_CLASS
    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class PipelineSlot:
        """One slot: reads batches (DS) or processes them (DP), whichever role the driver
        gives it; calls run one at a time, so a slot uses at most one core."""

        def __init__(self):
            self.runs: dict = {}

        def configure(self, run_id, source, ops, method, clock, columns):
            self.runs = {run_id: (source, Processor(ops, method, clock), columns)}
            return True

        def release(self, run_id):
            self.runs.pop(run_id, None)
            return True

        @ray.method(num_returns=2)
        def read(self, run_id, spec, index):
            source = self.runs[run_id][0]
            t0, c0 = time.perf_counter(), time.thread_time()
            batch = _read(source, spec, index)
            info = {"index": index, "records": len(batch), "wall_s": time.perf_counter() - t0,
                    "cpu_s": time.thread_time() - c0}
            return batch, info

        def process(self, run_id, batch, index, order, rows, where):
            _, proc, columns = self.runs[run_id]
            t0, c0 = time.perf_counter(), time.thread_time()
            survivors, obs, used = proc.process(batch, order, rows, where, columns)
            info = {"records": len(batch), "wall_s": time.perf_counter() - t0,
                    "cpu_s": time.thread_time() - c0, "order": used}
            return survivors, obs, info

    _SLOT_CLASS = PipelineSlot
    return PipelineSlot


_SLOT_CLASS = None
_POOL: list = []


def _slot_pool(n: int) -> list:
    """``n`` slot actors, reused across runs of one Ray session (an actor costs ~1 s to start)."""
    import ray
    global _POOL
    alive = []
    if _POOL:
        try:
            ray.get([a.release.remote(None) for a in _POOL], timeout=30)
            alive = list(_POOL)
        except Exception:
            alive = []
    cls = _slot_class()
    while len(alive) < n:
        alive.append(cls.remote())
    _POOL = alive
    return alive[:n]


def _run_ray(run: _Run, source: Source, specs: list) -> dict:
    import ray
    from ..run.runtime import init_ray
    cfg = run.cfg
    t0 = time.time()
    init_ray(cfg.ray_address, cfg.num_cpus, cfg.object_store_mb)
    ray_init_s = time.time() - t0
    cpus = int(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
    slots = max(2, cfg.slots or cpus + 1)
    if cfg.ds_slots is not None and not 1 <= cfg.ds_slots <= slots - 1:
        raise ValueError(f"ds_slots must be in [1, {slots - 1}] with {slots} slots, "
                         f"got {cfg.ds_slots}")
    run.balancer = bal = DSDPBalancer(slots, n_ds=cfg.ds_slots, cores=cpus,
                                      interval0=cfg.checkpoint, max_interval=cfg.max_checkpoint)
    balancing = cfg.balance and cfg.ds_slots is None
    depth = max(1, cfg.depth)
    max_ready = cfg.max_ready or 2 * slots
    run.start(len(specs), slots)
    run_id = os.path.basename(run.rundir.path) + f"-{time.time_ns()}"
    t1 = time.time()
    pool = _slot_pool(slots)
    src_ref, ops_ref = ray.put(source), ray.put(list(run.p.ops))
    ray.get([a.configure.remote(run_id, src_ref, ops_ref, cfg.method, cfg.op_clock, cfg.columns)
             for a in pool])
    actors_s = time.time() - t1
    try:
        run.rundir.set_status("running")
        inflight = {i: 0 for i in range(slots)}   # calls queued on each slot
        reading: dict = {}      # info ref -> (index, batch ref, slot)
        ready: deque = deque()  # (index, batch ref, records)
        processing: dict = {}   # result ref -> (index, slot, order)
        ds_recent: deque = deque(maxlen=8)
        dp_recent: deque = deque(maxlen=8)
        clock = "cpu_s" if cfg.balance_clock == "cpu" else "wall_s"
        nxt = 0
        t_compute = time.time()
        while run.batches_done < len(specs):
            # slots [0, n_ds) read, [n_ds, slots) process; a slot whose role changed finishes
            # what it has queued first (its calls run one at a time)
            for s in range(bal.n_ds):
                while (nxt < len(specs) and inflight[s] < depth
                       and len(ready) + len(reading) < max_ready):
                    b_ref, i_ref = pool[s].read.remote(run_id, specs[nxt], nxt)
                    reading[i_ref] = (nxt, b_ref, s)
                    inflight[s] += 1
                    nxt += 1
            for s in range(bal.n_ds, slots):
                while ready and inflight[s] < depth:
                    index, b_ref, n = ready.popleft()
                    order, rows = run.dispatch(index, n)
                    ref = pool[s].process.remote(run_id, b_ref, index, order, rows,
                                                 _where(source, index, specs[index]))
                    processing[ref] = (index, s)
                    inflight[s] += 1
            done, _ = ray.wait(list(reading) + list(processing), num_returns=1, timeout=0.5)
            for ref in done:
                if ref in reading:
                    index, b_ref, s = reading.pop(ref)
                    info = ray.get(ref)
                    inflight[s] -= 1
                    ready.append((index, b_ref, info["records"]))
                    ds_recent.append(info)
                    run.stage["read_wall_s"] += info["wall_s"]
                    run.stage["read_cpu_s"] += info["cpu_s"]
                else:
                    index, s = processing.pop(ref)
                    survivors, obs, info = ray.get(ref)
                    order = info["order"]
                    inflight[s] -= 1
                    dp_recent.append(info)
                    run.stage["process_wall_s"] += info["wall_s"]
                    run.stage["process_cpu_s"] += info["cpu_s"]
                    run.on_batch(index, order, survivors, obs, info["records"])
                    if balancing and bal.due(run.batches_done) and ds_recent and dp_recent:
                        ds_cost = sum(i[clock] for i in ds_recent) / max(
                            1, sum(i["records"] for i in ds_recent))
                        dp_cost = sum(i[clock] for i in dp_recent) / max(
                            1, sum(i["records"] for i in dp_recent))
                        bal.checkpoint(ds_cost, dp_cost, run.batches_done)
            run.snapshot(reading=len(reading), ready=len(ready), processing=len(processing))
        return {"executor": "ray", "slots": slots, "cpus": cpus, "balanced": balancing,
                "phases": {"ray_init_s": ray_init_s, "actors_s": actors_s,
                           "compute_s": time.time() - t_compute}}
    finally:
        try:
            ray.get([a.release.remote(run_id) for a in pool], timeout=30)
        except Exception:
            pass


class Pipeline:
    """A source, operators (maps and filters with ``after=`` dependencies) and sinks.

    ``source``: a ``Source`` (``operators.root.RootSource``, ``operators.columnar.ParquetSource``,
    ``DaskSource`` ...) or data: a dict of arrays, a DataFrame, an Arrow table, awkward records,
    a list of such batches, or a Dask DataFrame/Bag. ``options`` are ``PipelineConfig`` fields and
    may be overridden per run.
    """

    def __init__(self, source, ops: Sequence[Op], sinks: Sequence[PipelineSink] = (),
                 batch_size: int = 10_000, **options):
        self.source = as_source(source, batch_size)
        self.ops = list(ops)
        for o in self.ops:
            if not isinstance(o, Op):
                raise TypeError(f"pipeline operators must be Map or Filter, got {o!r}")
        check_dag([o.spec for o in self.ops])
        self.sinks = list(sinks)
        names = [s.name for s in self.sinks]
        if len(set(names)) != len(names):
            raise ValueError(f"two sinks have the same name: {names}")
        self.options = options
        _config(options)  # fail early on unknown options

    def run(self, run_dir: str | None = None, config_dump: dict | None = None,
            **options) -> PipelineResult:
        cfg = _config({**self.options, **options})
        run = _Run(self, cfg, run_dir, config_dump)
        specs = list(self.source.partitions())
        if not specs:
            raise InputError(str(self.source.describe()), "the source has no batches")
        try:
            if cfg.executor == "local":
                extra = _run_local(run, self.source, specs)
            elif cfg.executor == "ray":
                extra = _run_ray(run, self.source, specs)
            else:
                raise ValueError(f"executor must be 'ray' or 'local', got {cfg.executor!r}")
            return run.finish(extra)
        except BaseException as exc:
            cause = root_cause(exc)
            run.fail(cause)
            if isinstance(cause, (InputError, PairflowError, ValueError)):
                raise cause from None
            raise

    def __repr__(self):
        return f"Pipeline({self.source.describe()}, ops={self.ops}, sinks={self.sinks})"


def _config(options: dict) -> PipelineConfig:
    unknown = set(options) - set(PipelineConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown pipeline option(s): {sorted(unknown)}")
    return PipelineConfig(**options)


# -- pair filters: the same operators and ordering on the pairs of an all-pairs space ----------


class PairSource(Source):
    """The pairs of a pair space (``engine.pairs.space``: Triangle, Rectangle, PairList) as batches of
    columns ``i`` (row) and ``j`` (column), about ``batch_size`` pairs each, cut by rows."""

    name = "pairs"

    def __init__(self, space, batch_size: int = 16_384):
        self.space, self.batch_size = space, max(1, int(batch_size))

    def partitions(self):
        sp = self.space
        out, r0, acc = [], 0, 0
        for r in range(sp.n_rows):
            acc += sp.count(r, r + 1, 0, sp.n_cols)
            if acc >= self.batch_size:
                out.append((r0, r + 1))
                r0, acc = r + 1, 0
        if r0 < sp.n_rows and acc:
            out.append((r0, sp.n_rows))
        return out

    def read(self, spec):
        r0, r1 = spec
        m = self.space.mask(r0, r1, 0, self.space.n_cols)
        i, j = np.nonzero(m)
        return Batch({"i": (i + r0).astype(np.int64), "j": j.astype(np.int64)})

    def describe(self):
        return {"type": "PairSource", "space": self.space.describe(),
                "batch_size": self.batch_size}


def prefilter(space, filters: Sequence[Op], batch_size: int = 16_384, **options):
    """Run pair filters (maps/filters over columns ``i``, ``j``) over a pair space, in the order
    the measurements choose; returns ``(PairList of the surviving pairs, PipelineResult)``.
    ``options`` are PipelineConfig fields (default: in this process, no progress lines)."""
    from ..pairs.space import PairList
    options.setdefault("executor", "local")
    options.setdefault("progress", False)
    options.setdefault("name", "prefilter")
    res = Pipeline(PairSource(space, batch_size), filters, columns=["i", "j"], **options).run()
    sel = res.selected
    pairs = np.stack([np.asarray(sel["i"]), np.asarray(sel["j"])], axis=1) if len(sel) else \
        np.zeros((0, 2), np.int64)
    return PairList(pairs, space.n_rows, space.n_cols,
                    symmetric=bool(getattr(space, "symmetric", False))), res
