"""The work on one batch, wherever it runs (a slot actor or the driver's own process).

``read_batch`` is the data-setup step: a source's ``read`` turned into a Batch, its failures
named by batch and partition. ``Processor`` is the processing step: the operators in a given
order over lazily indexed views, with per-operator observations for the driver's statistics.
"""
from __future__ import annotations

import time
from typing import Iterable, Sequence

import numpy as np

from ..errors import InputError, PairflowError
from .batch import Batch
from .ordering import FILTER, MAP, OrderPolicy, ancestors, check_dag, topological
from .protocol import Op


def where(source, index: int, spec) -> str:
    """How errors name a batch: its index in the run and the source's own descriptor."""
    return f"batch {index} ({type(source).__name__} partition {spec!r})"


def read_batch(source, spec, index: int) -> Batch:
    """A source's failure comes back naming the batch and partition (an ``InputError`` or a
    ``PairflowError`` already names what is wrong and passes as it is)."""
    try:
        return Batch.from_any(source.read(spec))
    except (InputError, PairflowError):
        raise
    except Exception as exc:
        raise PairflowError(f"reading {where(source, index, spec)} failed: "
                            f"{type(exc).__name__}: {exc}") from exc


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

    def __init__(self, ops: Sequence[Op], method: str = "auto", clock="cpu"):
        if not callable(clock) and clock not in ("cpu", "wall"):
            raise ValueError(f"clock must be 'cpu' or 'wall', got {clock!r}")
        # operator costs in thread CPU time by default: processes that time-share cores (more
        # slots than cores, or a busy machine) would otherwise charge waiting to the operator;
        # a callable is the clock itself (a test's counter of the work done)
        self.clock = clock if callable(clock) else \
            time.thread_time if clock == "cpu" else time.perf_counter
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
