"""The app the differential harness runs: a real ``BasePairApp`` over the items of ``items.py``,
stored as one file per item, as records in a few files (packed or not), or made in memory.

Importable by Ray's workers (``tests.differential.drawn_app``). Its knobs that must not change a
run's fingerprint (the interruption) are private attributes: ``describe`` and ``parse_params``
see only public ones.
"""
from __future__ import annotations

import fcntl
import os
import threading

import numpy as np

from pairflow.engine import (BasePairApp, PairList, PairWeights, Rectangle, ThresholdReduction,
                    TileCandidates, TopKReduction, Triangle)
from tests.differential.items import WIDTH, make_items, read_record_file


class Interrupted(RuntimeError):
    """Raised by a compare to stop a run at a drawn point (the harness resumes it)."""


class DrawnApp(BasePairApp):
    name = "drawn"

    def __init__(self, shape, paths: list[str], fail_after: int | None = None,
                 counter: str | None = None):
        self.n, self.kind, self.storage = shape.n, shape.kind, shape.storage
        self.seed = shape.seed
        self._shape = shape
        self._paths = paths
        self._fail_after, self._counter = fail_after, counter
        # the driver's probe compares in the thread that starts the run: not counted (the
        # interruption is of the run's tiles)
        self._driver = (os.getpid(), threading.get_ident())
        self._reduce = shape.reduce_in_kernel
        prefix = "r" if self.storage == "records" else "i"
        self._keys = [f"{prefix}{i}" for i in range(self.n)]
        self._memory = None  # per process: the in-memory items, or the records files read

    # -- which pairs ---------------------------------------------------------------------------
    def keys(self):
        return self._keys

    def row_keys(self):
        return [self._keys[i] for i in self._shape.rows()]

    def col_keys(self):
        return [self._keys[i] for i in self._shape.cols()]

    def space(self):
        s = self._shape
        if s.space == "triangle":
            return Triangle(self.n)
        if s.space == "pairlist":
            return PairList(np.array(s.pairs, dtype=np.int64).reshape(-1, 2), self.n, self.n,
                            symmetric=s.pairlist_symmetric)
        return Rectangle(len(s.rows()), len(s.cols()))

    def pair_weights(self):
        if not self._shape.weighted:
            return None
        sizes = np.array([1.0 + (i * 7919) % 13 for i in range(self.n)])  # uneven, fixed
        return PairWeights(sizes[self._shape.rows()], sizes[self._shape.cols()])

    # -- loading -----------------------------------------------------------------------------
    def url(self, key):
        if self.storage == "files":
            return self._paths[int(key[1:])]
        return None

    def store_source(self, key):
        if self.storage == "records":
            return self._record_file(int(key[1:]))
        return self.url(key)

    def _record_file(self, i: int) -> str:
        bounds = np.linspace(0, self.n, len(self._paths) + 1).astype(int)
        return self._paths[int(np.searchsorted(bounds, i, side="right")) - 1]

    def parse(self, key, raw):
        i = int(key[1:])
        if self.storage == "files":
            return np.frombuffer(raw, np.int64).copy()
        if self.storage == "arrays":
            if self._memory is None:
                self._memory = make_items(self.n, self.kind, self.seed)
            return self._memory[i].copy()
        if self._memory is None:
            self._memory = {}
        path = self._record_file(i)
        if path not in self._memory:
            self._memory[path] = read_record_file(path)
        return self._memory[path][key].copy()

    def packs(self):
        return self.storage == "records"

    def parse_pack(self, keys):
        rows = [self.parse(k, None) for k in keys]
        return np.stack(rows) if self.kind == "vectors" else rows

    # -- comparing ---------------------------------------------------------------------------
    def _tick(self) -> None:
        """Count this compare in a file shared by every process; raise at the drawn count."""
        if self._fail_after is None or (os.getpid(), threading.get_ident()) == self._driver:
            return
        with open(self._counter, "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.seek(0)
            done = len(fh.read())
            fh.write(".")
        if done + 1 == self._fail_after:
            raise Interrupted(f"interrupted at compare {done + 1}")

    def _values(self, left, right, mask) -> np.ndarray:
        if self.kind == "vectors":
            a = np.asarray(left, np.int64).reshape(-1, WIDTH)
            b = np.asarray(right, np.int64).reshape(-1, WIDTH)
            return (a @ b.T).astype(np.float64)
        out = np.full(mask.shape, np.nan)
        for i, j in zip(*np.nonzero(mask)):
            inter = len(np.intersect1d(left[i], right[j], assume_unique=True))
            out[i, j] = inter / (len(left[i]) + len(right[j]) - inter)
        return out

    def compare(self, left, right, mask, device):
        self._tick()
        return {"value": self._values(left, right, mask)}

    def compare_reduced(self, left, right, mask, device, reductions):
        """Each reduction's cells from the tile's values, as the sink's contract says: a row's
        (and column's) k best, ties to the lower index, none worse than its floor; the cells
        at or past a threshold, row-major."""
        if not self._reduce:
            return None
        self._tick()
        values = self._values(left, right, mask)
        out = []
        for r in reductions:
            if isinstance(r, ThresholdReduction):
                keep = mask & ((values >= r.t) if r.above else (values <= r.t))
                i, j = np.nonzero(keep)
                out.append(TileCandidates(i, j, values[i, j]))
            elif isinstance(r, TopKReduction):
                cells = []
                if r.rows:
                    cells += [(i, j, False) for i, j in _best(values, mask, r.k, r.largest,
                                                               r.row_floor)]
                if r.cols:
                    cells += [(i, j, True) for j, i in _best(values.T, mask.T, r.k, r.largest,
                                                              r.col_floor)]
                i = np.array([c[0] for c in cells], np.int64)
                j = np.array([c[1] for c in cells], np.int64)
                out.append(TileCandidates(i, j, values[i, j] if len(i) else np.zeros(0),
                                          np.array([c[2] for c in cells], bool)))
            else:
                return None
        return out


def _best(values, mask, k, largest, floor):
    """(row, col) of each row's k best cells of the mask, ties to the lower column; a cell
    worse than the row's floor (not NaN) is dropped."""
    out = []
    for i in range(values.shape[0]):
        cols = [j for j in range(values.shape[1]) if mask[i, j]]
        if floor is not None and not np.isnan(floor[i]):
            cols = [j for j in cols if (values[i, j] >= floor[i] if largest
                                        else values[i, j] <= floor[i])]
        cols.sort(key=lambda j: ((-values[i, j]) if largest else values[i, j], j))
        out += [(i, j) for j in cols[:k]]
    return out
