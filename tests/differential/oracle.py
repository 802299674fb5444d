"""The brute-force answer for a run shape, in plain Python: every wanted pair computed one by one
from the items (Python sets and integer sums), then what each sink should hold. Nothing here
imports pairflow.

What the sinks hold (the engine's documented contract):
- dense: a rows x columns matrix of NaN; each wanted pair's value at (row, column), and for a
  symmetric space at (column, row) too.
- top-k (per row): each row's k best partners (largest or smallest value, ties to the lower
  index); in a symmetric space every item's partners on both sides; per column: each column's
  k best rows.
- threshold: each wanted pair (row, column) whose value is >= t (above) or <= t, by row then
  column.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from tests.differential.items import make_items


def pair_value(kind: str, a: np.ndarray, b: np.ndarray) -> float:
    if kind == "vectors":
        return float(sum(int(x) * int(y) for x, y in zip(a.tolist(), b.tolist())))
    sa, sb = set(a.tolist()), set(b.tolist())
    return float(Fraction(len(sa & sb), len(sa | sb)))


def wanted_pairs(shape) -> list[tuple[int, int]]:
    """(row, column) positions of the space's pairs, row-major."""
    rows, cols = shape.rows(), shape.cols()
    if shape.space == "triangle":
        return [(i, j) for i in range(shape.n) for j in range(i + 1, shape.n)]
    if shape.space == "pairlist":
        return sorted(set(shape.pairs))
    return [(r, c) for r in range(len(rows)) for c in range(len(cols))]


class Expected:
    def __init__(self, shape):
        self.shape = shape
        items = make_items(shape.n, shape.kind, shape.seed)
        rows, cols = shape.rows(), shape.cols()
        self.pairs = wanted_pairs(shape)
        self.values = {(r, c): pair_value(shape.kind, items[rows[r]], items[cols[c]])
                       for r, c in self.pairs}
        self.n_rows, self.n_cols = len(rows), len(cols)
        # items some pair needs (a run loads at least these)
        self.touched = {rows[r] for r, _ in self.pairs} | {cols[c] for _, c in self.pairs}

    def dense(self) -> np.ndarray:
        out = np.full((self.n_rows, self.n_cols), np.nan)
        for (r, c), v in self.values.items():
            out[r, c] = v
            if self.shape.symmetric:
                out[c, r] = v
        return out

    def topk(self, k: int, largest: bool, per: str) -> list[tuple[int, int, float]]:
        """(query, target, value) rows, by query then rank."""
        partners: dict[int, list] = {}
        for (r, c), v in self.values.items():
            if per == "col" and not self.shape.symmetric:
                partners.setdefault(c, []).append((r, v))
            else:
                partners.setdefault(r, []).append((c, v))
                if self.shape.symmetric:
                    partners.setdefault(c, []).append((r, v))
        out = []
        for q in sorted(partners):
            best = sorted(partners[q], key=lambda tv: ((-tv[1]) if largest else tv[1], tv[0]))
            out += [(q, t, v) for t, v in best[:k]]
        return out

    def threshold(self, t: float, above: bool) -> list[tuple[int, int, float]]:
        return [(r, c, v) for (r, c), v in sorted(self.values.items())
                if (v >= t if above else v <= t)]
