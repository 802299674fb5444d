"""ROOT files as a pipeline source, read with uproot into awkward/numpy columns.

``RootSource(files, tree="events", branches=None, step_size=500, repeat=1)`` cuts every file's
tree into entry ranges of ``step_size`` events; each range is one batch, read and decoded in a
data-setup task. Every batch gets an ``event`` column: the event's global number (file offsets and
repeats included), which is what per-event random draws are seeded from, so a selection never
depends on how events were batched or ordered. ``repeat`` reads the same files several times
(for benchmarks on the small test files); ``keep_open=False`` opens the file afresh for every
batch, so nothing decoded is reused (what reading a stream of new files costs). Files, trees and
branches are checked when the source is made, so bad input stops the run before any compute with the file and the problem named.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from pairflow.engine.errors import InputError
from pairflow.engine.pipeline import Batch, Source

_OPEN: dict = {}


def _tree(path: str, tree: str):
    """An open tree, kept per process (a data-setup actor reads many ranges of one file)."""
    key = (path, tree)
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
        return specs

    def read(self, spec):
        i, start, stop, first = spec
        if self.keep_open:
            t = _tree(self.files[i], self.tree)
            arrays = t.arrays(self.branches, entry_start=start, entry_stop=stop, library="ak")
        else:  # every batch opened and decompressed afresh, as a stream of new files would be
            import uproot
            with uproot.open(self.files[i]) as fh:
                arrays = fh[self.tree].arrays(self.branches, entry_start=start,
                                              entry_stop=stop, library="ak")
        batch = Batch.from_any(arrays)
        return batch.with_columns({self.entry_column: np.arange(first, first + (stop - start),
                                                                dtype=np.int64)})

    def describe(self):
        return {"type": "RootSource", "files": self.files, "tree": self.tree,
                "entries": self.entries, "step_size": self.step_size, "repeat": self.repeat,
                "branches": self.branches, "keep_open": self.keep_open}
