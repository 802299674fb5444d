"""Pair filters of the align app: cheap tests on candidate pairs (length ratio, shared k-mers),
run before any Smith-Waterman cell.

Why: a filter that rules a pair out costs far less than the pair's dynamic programming, so the app
turns its space into a ``PairList`` of the pairs that pass, through the engine's pair prefilter
(``pairflow.engine.prefilter``), which measures each filter's cost and pass rate and reorders them.
"""
from __future__ import annotations

import numpy as np

from pairflow.engine import Filter

from .settings import as_int


class PairFilter:
    """A cheap test on candidate pairs, run before any Smith-Waterman cell.

    ``prepare(row_seqs, col_seqs)`` sees the sequences once; ``keep(rows, cols)`` gets arrays of
    row and column indices (the app's length-sorted order) and returns a boolean mask.
    ``operator`` makes it a pipeline ``Filter`` over the pair columns ``i`` and ``j``: the app
    runs its filters through the engine's pair prefilter, which measures each one's cost and
    pass rate and runs them in the order that does the least work.
    """

    name = "filter"

    def prepare(self, row_seqs: list[str], col_seqs: list[str]) -> None:
        pass

    def keep(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def operator(self) -> Filter:
        return Filter(self.name, lambda b: self.keep(b["i"], b["j"]))

    def release(self) -> None:
        """Drop what ``prepare`` built (the app is pickled for every worker)."""

    def describe(self) -> dict:
        return {"name": self.name}


class LengthRatioFilter(PairFilter):
    """Keep pairs whose shorter sequence is at least ``ratio`` times the longer one."""

    name = "min_length_ratio"

    def __init__(self, ratio: float):
        ratio = float(ratio)
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"min_length_ratio must be in (0, 1], got {ratio}")
        self.ratio = ratio

    def prepare(self, row_seqs, col_seqs):
        self.rl = np.array([len(s) for s in row_seqs], dtype=np.float64)
        self.cl = np.array([len(s) for s in col_seqs], dtype=np.float64)

    def keep(self, rows, cols):
        a, b = self.rl[rows], self.cl[cols]
        return np.minimum(a, b) >= self.ratio * np.maximum(a, b)

    def release(self):
        del self.rl, self.cl

    def describe(self):
        return {"name": self.name, "ratio": self.ratio}


class SharedKmerFilter(PairFilter):
    """Keep pairs sharing at least ``min_shared`` distinct k-mers (exact words of k letters)."""

    name = "min_shared_kmers"

    def __init__(self, min_shared: int, k: int):
        self.min_shared = as_int(min_shared, "min_shared_kmers")
        self.k = as_int(k, "kmer")
        if self.min_shared < 1:
            raise ValueError(f"min_shared_kmers must be >= 1, got {self.min_shared}")
        if not 1 <= self.k <= 12:
            raise ValueError(f"kmer must be from 1 to 12, got {self.k}")

    def _matrix(self, seqs: list[str], vocab: dict):
        indptr, indices = [0], []
        for s in seqs:
            words = {s[i:i + self.k] for i in range(len(s) - self.k + 1)}
            for w in words:
                indices.append(vocab.setdefault(w, len(vocab)))
            indptr.append(len(indices))
        return indptr, indices

    def prepare(self, row_seqs, col_seqs):
        from scipy.sparse import csr_matrix
        vocab: dict = {}
        rp, ri = self._matrix(row_seqs, vocab)
        cp, ci = self._matrix(col_seqs, vocab)
        n = max(1, len(vocab))
        a = csr_matrix((np.ones(len(ri), np.int32), ri, rp), shape=(len(row_seqs), n))
        b = csr_matrix((np.ones(len(ci), np.int32), ci, cp), shape=(len(col_seqs), n))
        self.shared = (a @ b.T).tocsr()  # shared distinct k-mers of every pair that shares any

    def keep(self, rows, cols):
        return np.asarray(self.shared[rows, cols]).ravel() >= self.min_shared

    def release(self):
        del self.shared

    def describe(self):
        return {"name": self.name, "min_shared": self.min_shared, "k": self.k}
