"""A (weighted) histogram of a column of a pipeline's survivors, filled batch by batch.

Counts and the sum of squared weights add up over batches, so the result does not depend on the
order batches finish in. ``finalize`` writes ``hist-NAME.json`` (edges, counts, sumw2, entries)
into the run's result directory and returns the same dict, which the run's result holds under
``histograms[NAME]``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from pairflow.engine.pipeline import PipelineSink
from pairflow.engine.run.rundir import write_json


class Histogram(PipelineSink):
    """``column`` is a column name or ``fn(batch) -> array``; ``bins`` an int (with ``range``)
    or edges; ``weight`` a column name. Jagged columns are flattened, each value weighted by its
    record's weight."""

    result_group = "histograms"

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

    @property
    def result_key(self) -> str:
        return self.hname

    def write(self, batch_index, batch):
        if len(batch) == 0:
            return
        values = self.column(batch) if callable(self.column) else batch[self.column]
        w = None if self.weight is None else np.asarray(batch[self.weight], dtype=float)
        ak = sys.modules.get("awkward")  # jagged values exist only once awkward is imported
        if ak is not None and isinstance(values, ak.Array):
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
