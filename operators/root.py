"""ROOT files as a pipeline source, read with uproot into awkward/numpy columns.

``RootSource(files, tree="events", branches=None, step_size=500, repeat=1)`` cuts every file's
tree into entry ranges of ``step_size`` events; each range is one batch, read and decoded in a
data-setup task. Every batch gets an ``event`` column: the event's global number (file offsets and
repeats included), which is what per-event random draws are seeded from, so a selection never
depends on how events were batched or ordered. ``repeat`` reads the same files several times
(for benchmarks on the small test files); ``keep_open=False`` opens the file afresh for every
batch, so nothing decoded is reused (what reading a stream of new files costs). Files, trees and
branches are checked when the source is made, so bad input stops the run before any compute with the file and the problem named.

``rebatch(records)`` is how the engine re-cuts the source into bigger batches when its fixed
costs per batch call for them (``engine.pipeline.sizing``): a copy whose batches may span files
and repeats, each a run of consecutive entry ranges read and concatenated in order; with
``keep_open`` an entry range that a batch holds several times (``repeat``) is decoded once for
it, as a script replicating the events in memory would.
"""
from __future__ import annotations

import copy
import os
import threading
from typing import Sequence

import numpy as np

from pairflow.engine.errors import InputError
from pairflow.engine.pipeline import Batch, Source

_OPEN: dict = {}


def _tree(path: str, tree: str):
    """An open tree, kept per process and thread (a data-setup actor reads many ranges of one
    file; the local executor's worker threads each read through their own handle)."""
    key = (path, tree, threading.get_ident())
    if key not in _OPEN:
        import uproot
        if len(_OPEN) > 16:
            for f, _ in list(_OPEN.values())[:8]:
                f.close()
            for k in list(_OPEN)[:8]:
                del _OPEN[k]
        f = uproot.open(path)
        _OPEN[key] = (f, f[tree])
    return _OPEN[key][1]


class RootSource(Source):
    name = "root"

    def __init__(self, files: str | Sequence[str], tree: str = "events",
                 branches: Sequence[str] | None = None, step_size: int = 500, repeat: int = 1,
                 entry_column: str = "event", keep_open: bool = True):
        import uproot
        self.files = [files] if isinstance(files, str) else [str(f) for f in files]
        if not self.files:
            raise InputError("inputs", "no ROOT files given")
        if step_size < 1 or repeat < 1:
            raise ValueError(f"step_size and repeat must be >= 1, got {step_size}, {repeat}")
        self.tree, self.step_size, self.repeat = tree, int(step_size), int(repeat)
        self.entry_column = entry_column
        self.keep_open = keep_open
        self.span = False  # rebatch: a batch may hold several entry ranges
        self.branches = list(branches) if branches is not None else None
        self.entries = []
        for path in self.files:
            if "://" not in path and not os.path.exists(path):
                raise InputError(path, "no such file")
            try:
                with uproot.open(path) as fh:
                    if tree not in fh:
                        trees = [k.split(";")[0] for k, c in fh.classnames().items()
                                 if c == "TTree"]
                        raise InputError(path, f"no TTree {tree!r} in this file (it has "
                                         f"{trees})")
                    t = fh[tree]
                    names = set(t.keys())
                    if self.branches is not None:
                        missing = [b for b in self.branches if b not in names]
                        if missing:
                            raise InputError(path, f"tree {tree!r} has no branch {missing}")
                    if entry_column in names:
                        raise InputError(path, f"the tree already has a branch named "
                                         f"{entry_column!r}; choose another entry_column")
                    self.entries.append(int(t.num_entries))
            except InputError:
                raise
            except Exception as exc:
                raise InputError(path, f"not a readable ROOT file: {type(exc).__name__}: "
                                 f"{exc}") from None
        self.offsets = np.concatenate([[0], np.cumsum(self.entries)]).astype(np.int64)

    @property
    def num_entries(self) -> int:
        return int(self.offsets[-1]) * self.repeat

    def partitions(self):
        specs = []
        per_pass = int(self.offsets[-1])
        for r in range(self.repeat):
            for i, n in enumerate(self.entries):
                for start in range(0, n, self.step_size):
                    stop = min(n, start + self.step_size)
                    specs.append((i, start, stop, r * per_pass + int(self.offsets[i]) + start))
        if not self.span:
            return specs
        groups, cur, n = [], [], 0
        for piece in specs:  # runs of pieces of at most step_size events (one piece may be)
            if cur and n + piece[2] - piece[1] > self.step_size:
                groups.append(tuple(cur))
                cur, n = [], 0
            cur.append(piece)
            n += piece[2] - piece[1]
        return groups + ([tuple(cur)] if cur else [])

    def rebatch(self, records: int) -> "RootSource":
        """A copy cut into batches of about ``records`` events (see the module docstring)."""
        new = copy.copy(self)
        new.step_size, new.span = max(1, int(records)), True
        return new

    def read(self, spec):
        if not self.span:
            return self._read(spec)
        decoded: dict = {}
        parts = [self._read(piece, decoded if self.keep_open else None) for piece in spec]
        return parts[0] if len(parts) == 1 else Batch.concat(parts)

    def _read(self, spec, decoded: dict | None = None):
        i, start, stop, first = spec
        if decoded is not None and (i, start, stop) in decoded:
            arrays = decoded[(i, start, stop)]
        elif self.keep_open:
            t = _tree(self.files[i], self.tree)
            arrays = t.arrays(self.branches, entry_start=start, entry_stop=stop, library="ak")
        else:  # every batch opened and decompressed afresh, as a stream of new files would be
            import uproot
            with uproot.open(self.files[i]) as fh:
                arrays = fh[self.tree].arrays(self.branches, entry_start=start,
                                              entry_stop=stop, library="ak")
        if decoded is not None:
            decoded[(i, start, stop)] = arrays
        batch = Batch.from_any(arrays)
        return batch.with_columns({self.entry_column: np.arange(first, first + (stop - start),
                                                                dtype=np.int64)})

    def describe(self):
        return {"type": "RootSource", "files": self.files, "tree": self.tree,
                "entries": self.entries, "step_size": self.step_size, "repeat": self.repeat,
                "branches": self.branches, "keep_open": self.keep_open,
                **({"spanning": True} if self.span else {})}
