"""Pair filters: the pipeline's operators and ordering applied to the pairs of a pair space.

Cheap tests on a pair (a length ratio, a sketch estimate) run before an all-pairs run's costly
compare, in the order their measured cost and pass rate choose; what survives becomes the
``PairList`` the all-pairs engine compares.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .batch import Batch
from .protocol import Op, Source
from .run import Pipeline


class PairSource(Source):
    """The pairs of a pair space (``engine.pairs.space``: Triangle, Rectangle, PairList) as
    batches of columns ``i`` (row) and ``j`` (column), about ``batch_size`` pairs each, cut by
    rows."""

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

