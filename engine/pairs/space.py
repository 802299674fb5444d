"""Pair spaces and their quadtree decomposition.

A pair space says which (row, column) index pairs must be compared: all pairs of one set
(``Triangle``), queries x targets (``Rectangle``) or an explicit list (``PairList``). The engine
never enumerates pairs one by one; it cuts the space into a quadtree whose leaves are square tiles
of ``leaf`` items per side, aligned to a grid of ``leaf``-sized blocks. Alignment matters: the
dense sink uses the same grid as its zarr chunk grid, so every tile writes whole chunks only
(concurrent partial-chunk writes lose data).

The root is the smallest ``leaf * 2**d`` square covering the matrix; a node splits into four
quadrants (top-left, top-right, bottom-left, bottom-right) until it is one block; quadrants
holding no pair are dropped. Visiting leaves depth-first in that quadrant order is Z-order.

Weighted (capacity-aware) quadtree: when pairs differ a lot in cost (Smith-Waterman costs
|q|*|t| cells), ``quadtree(space, leaf, weights=(row_w, col_w), max_weight=W)`` keeps splitting a
node while the summed weight of its wanted pairs, sum of ``row_w[i] * col_w[j]``
(:meth:`PairSpace.weight`), exceeds ``W`` and the node spans more than one row or column; below
the leaf size a node splits at ``ceil(side / 2)``, so such leaves are smaller than ``leaf`` and
no longer sit on the leaf grid (the dense sink, whose chunks are the leaf grid, refuses them).
Every wanted pair is still in exactly one leaf, and a leaf weighs more than ``W`` only when it is
a single pair.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from .tiles import Tile, TileArray  # noqa: F401  (this module's names too)


# a full block of this many cells or more is a read-only view of one True (strides 0): a leaf of
# 22,700 reads made a 516 MB block of True per shape in every device actor (10^6 reads)
FULL_VIEW_CELLS = 1 << 24


@functools.lru_cache(maxsize=8)
def block_mask(rows: int, cols: int, diagonal: int | None) -> np.ndarray:
    """A read-only (rows, cols) mask shared by every block of that shape: all True
    (``diagonal`` None), or True where column - row > ``diagonal`` (a block of a triangle whose
    first column is ``-diagonal`` past its first row). Rule: equal tiles share one mask (a
    large tile making its own spends a noticeable share of its compare on it). A run has a
    few shapes (body, diagonal, edges); eight are kept, rows x cols bytes each (a large
    one: one byte, or a diagonal's rows + cols)."""
    if diagonal is None:
        if rows * cols >= FULL_VIEW_CELLS:  # one byte, seen as the block: no block of bytes
            return np.broadcast_to(np.ones(1, bool), (rows, cols))
        m = np.ones((rows, cols), bool)
    elif rows * cols >= FULL_VIEW_CELLS and rows > 0 and cols > 0:
        # a large diagonal block (0.47 GB of bytes an actor at a leaf of 21,740 reads): a
        # view of one row of bytes, cell (i, j) = line[rows - 1 + j - i] (strides -1, +1)
        line = np.arange(rows + cols - 1) - (rows - 1) > diagonal
        return np.lib.stride_tricks.as_strided(line[rows - 1:], (rows, cols), (-1, 1),
                                               writeable=False)
    else:
        # (np.tri compares two ranges into bools; the difference of two aranges first made
        # an int64 block eight times the mask: 5.8 s for a leaf of 6,667 reads, measured)
        m = ~np.tri(rows, cols, k=diagonal, dtype=bool)
    m.flags.writeable = False
    return m


class PairSpace:
    """Which pairs of a (n_rows x n_cols) matrix are wanted."""

    n_rows: int
    n_cols: int
    symmetric: bool = False  # rows and columns index the same items

    def count(self, r0: int, r1: int, c0: int, c1: int) -> int:
        raise NotImplementedError

    def mask(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        """Boolean (r1-r0, c1-c0) array: True where (i, j) is a wanted pair. Read-only where
        blocks of one shape share it (Triangle, Rectangle): copy it to change it."""
        raise NotImplementedError

    def weight(self, r0: int, r1: int, c0: int, c1: int, w: "PairWeights") -> float:
        """Summed ``row_w[i] * col_w[j]`` over the wanted pairs of a block (an upper bound for
        spaces that do not know better: the whole block when it holds any pair)."""
        return w.block(r0, r1, c0, c1) if self.count(r0, r1, c0, c1) else 0.0

    @property
    def total(self) -> int:
        return self.count(0, self.n_rows, 0, self.n_cols)

    def describe(self) -> dict:
        return {"type": type(self).__name__, "n_rows": self.n_rows, "n_cols": self.n_cols,
                "pairs": self.total}


@dataclass(frozen=True)
class Triangle(PairSpace):
    """All unordered pairs i < j of one set of n items."""

    n: int

    def __post_init__(self):
        if self.n < 0:
            raise ValueError(f"Triangle needs n >= 0, got {self.n}")

    @property
    def n_rows(self) -> int:  # type: ignore[override]
        return self.n

    @property
    def n_cols(self) -> int:  # type: ignore[override]
        return self.n

    symmetric = True

    def count(self, r0, r1, c0, c1):
        r1, c1 = min(r1, self.n), min(c1, self.n)
        if r0 >= r1 or c0 >= c1:
            return 0
        rows = np.arange(r0, r1, dtype=np.int64)
        return int(np.clip(c1 - np.maximum(c0, rows + 1), 0, None).sum())

    def mask(self, r0, r1, c0, c1):
        rows, cols = max(0, min(r1, self.n) - r0), max(0, min(c1, self.n) - c0)
        # (r0 + i) < (c0 + j): j - i > r0 - c0; a block right of the diagonal holds every pair
        return block_mask(rows, cols, None if c0 >= r0 + rows else r0 - c0)

    def weight(self, r0, r1, c0, c1, w):
        r1, c1 = min(r1, self.n), min(c1, self.n)
        if r0 >= r1 or c0 >= c1:
            return 0.0
        rows = np.arange(r0, r1)
        start = np.clip(np.maximum(c0, rows + 1), None, c1)  # row i pairs with columns > i
        return float((w.row[r0:r1] * (w.col_cum[c1] - w.col_cum[start])).sum())


@dataclass(frozen=True)
class Rectangle(PairSpace):
    """Every query (row) against every target (column)."""

    n_queries: int
    n_targets: int

    def __post_init__(self):
        if self.n_queries < 0 or self.n_targets < 0:
            raise ValueError(f"Rectangle needs sizes >= 0, got {self.n_queries} x {self.n_targets}")

    @property
    def n_rows(self) -> int:  # type: ignore[override]
        return self.n_queries

    @property
    def n_cols(self) -> int:  # type: ignore[override]
        return self.n_targets

    def count(self, r0, r1, c0, c1):
        return max(0, min(r1, self.n_rows) - r0) * max(0, min(c1, self.n_cols) - c0)

    def mask(self, r0, r1, c0, c1):
        return block_mask(max(0, min(r1, self.n_rows) - r0), max(0, min(c1, self.n_cols) - c0),
                          None)

    def weight(self, r0, r1, c0, c1, w):
        return w.block(r0, min(r1, self.n_rows), c0, min(c1, self.n_cols))


class PairList(PairSpace):
    """An explicit list of (row, column) pairs, deduplicated."""

    def __init__(self, pairs: Sequence[tuple[int, int]] | np.ndarray, n_rows: int | None = None,
                 n_cols: int | None = None, symmetric: bool = False):
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        if len(arr) and arr.min() < 0:
            raise ValueError("PairList indices must be >= 0")
        arr = np.unique(arr, axis=0)  # sorted by row then column
        self.pairs = arr
        self.n_rows = int(n_rows if n_rows is not None else (arr[:, 0].max() + 1 if len(arr) else 0))
        self.n_cols = int(n_cols if n_cols is not None else (arr[:, 1].max() + 1 if len(arr) else 0))
        if len(arr) and (arr[:, 0].max() >= self.n_rows or arr[:, 1].max() >= self.n_cols):
            raise ValueError("PairList has a pair outside its n_rows x n_cols bounds")
        self.symmetric = symmetric

    def _rows(self, r0, r1) -> np.ndarray:
        lo, hi = np.searchsorted(self.pairs[:, 0], [r0, r1])
        return self.pairs[lo:hi]

    def count(self, r0, r1, c0, c1):
        sub = self._rows(r0, r1)
        return int(((sub[:, 1] >= c0) & (sub[:, 1] < c1)).sum())

    def mask(self, r0, r1, c0, c1):
        m = np.zeros((max(0, min(r1, self.n_rows) - r0), max(0, min(c1, self.n_cols) - c0)), bool)
        sub = self._rows(r0, r1)
        sub = sub[(sub[:, 1] >= c0) & (sub[:, 1] < c1)]
        m[sub[:, 0] - r0, sub[:, 1] - c0] = True
        return m

    def weight(self, r0, r1, c0, c1, w):
        sub = self._rows(r0, r1)
        sub = sub[(sub[:, 1] >= c0) & (sub[:, 1] < c1)]
        return float((w.row[sub[:, 0]] * w.col[sub[:, 1]]).sum())

    def __repr__(self):
        return f"PairList({len(self.pairs)} pairs, {self.n_rows}x{self.n_cols})"


@dataclass
class QuadNode:
    """An internal node or a leaf; internal nodes are what a scheduler deals out or steals."""

    r0: int
    c0: int
    size: int
    depth: int
    pairs: int
    children: list["QuadNode"] = field(default_factory=list)
    tile: Tile | None = None

    def leaves(self) -> Iterator[Tile]:
        if self.tile is not None:
            yield self.tile
        for child in self.children:
            yield from child.leaves()


class PairWeights:
    """Per-row and per-column weights whose product estimates what one pair costs (for
    Smith-Waterman: sequence lengths, so a pair weighs its |q|*|t| dynamic-programming cells)."""

    def __init__(self, row_w, col_w):
        self.row = np.asarray(row_w, dtype=np.float64).reshape(-1)
        self.col = np.asarray(col_w, dtype=np.float64).reshape(-1)
        for name, a in (("row", self.row), ("column", self.col)):
            if len(a) and not (np.isfinite(a).all() and a.min() >= 0):
                raise ValueError(f"{name} weights must be finite and >= 0")
        self.row_cum = np.concatenate([[0.0], np.cumsum(self.row)])
        self.col_cum = np.concatenate([[0.0], np.cumsum(self.col)])

    def block(self, r0: int, r1: int, c0: int, c1: int) -> float:
        """Weight of every pair of rows [r0, r1) x columns [c0, c1)."""
        if r0 >= r1 or c0 >= c1:
            return 0.0
        return float((self.row_cum[r1] - self.row_cum[r0]) * (self.col_cum[c1] - self.col_cum[c0]))

    def total(self, space: PairSpace) -> float:
        """Weight of every wanted pair of ``space``."""
        return space.weight(0, space.n_rows, 0, space.n_cols, self)


def quadtree(space: PairSpace, leaf: int, weights=None,
             max_weight: float | None = None) -> QuadNode:
    """Cut ``space`` into a quadtree of ``leaf``-sided tiles, dropping empty quadrants.

    With ``weights`` (a ``(row_w, col_w)`` pair of arrays or a :class:`PairWeights`) and
    ``max_weight``, a node also splits, below the leaf size if need be, while its wanted pairs
    weigh more than ``max_weight`` and it spans more than one row or column.
    """
    if leaf < 1:
        raise ValueError(f"leaf size must be >= 1, got {leaf}")
    w = None
    if weights is not None or max_weight is not None:
        if weights is None or max_weight is None:
            raise ValueError("a weighted quadtree needs both weights and max_weight")
        if not max_weight > 0:
            raise ValueError(f"max_weight must be > 0, got {max_weight}")
        w = weights if isinstance(weights, PairWeights) else PairWeights(*weights)
        if (len(w.row), len(w.col)) != (space.n_rows, space.n_cols):
            raise ValueError(f"weights are for {len(w.row)} x {len(w.col)} items but the space "
                             f"is {space.n_rows} x {space.n_cols}")
    side = leaf
    while side < max(space.n_rows, space.n_cols, 1):
        side *= 2
    counter = iter(range(1 << 62))

    def build(r0: int, c0: int, size: int, depth: int, r_end: int, c_end: int) -> QuadNode | None:
        # r_end/c_end: the parent's extent, so that ceil-halves below the leaf size never reach
        # into a sibling's rows or columns
        r1, c1 = min(r0 + size, r_end), min(c0 + size, c_end)
        if r0 >= r1 or c0 >= c1:
            return None
        pairs = space.count(r0, r1, c0, c1)
        if pairs == 0:
            return None
        node = QuadNode(r0, c0, size, depth, pairs)
        heavy = (w is not None and (r1 - r0 > 1 or c1 - c0 > 1)
                 and space.weight(r0, r1, c0, c1, w) > max_weight)
        if size <= leaf and not heavy:
            node.tile = Tile(next(counter), r0, r1, c0, c1, pairs, depth)
            return node
        half = size // 2 if size > leaf else (size + 1) // 2
        for dr, dc in ((0, 0), (0, half), (half, 0), (half, half)):
            child = build(r0 + dr, c0 + dc, half, depth + 1, r1, c1)
            if child is not None:
                node.children.append(child)
        return node

    root = build(0, 0, side, 0, space.n_rows, space.n_cols)
    return root if root is not None else QuadNode(0, 0, side, 0, 0)


def leaves(space: PairSpace, leaf: int, weights=None,
           max_weight: float | None = None) -> "TileArray":
    """The quadtree's leaves in Z-order, ids numbered in that order.

    Unweighted triangles and rectangles are cut on the leaf grid without building the tree
    (``grid_leaves``: the same tiles, from arrays; at 10^6 tiles the tree of Python objects
    took over a minute and half a GiB)."""
    if leaf < 1:
        raise ValueError(f"leaf size must be >= 1, got {leaf}")
    if weights is None and max_weight is None and type(space) in (Triangle, Rectangle):
        return grid_leaves(space, leaf)
    return TileArray.of(list(quadtree(space, leaf, weights, max_weight).leaves()))


def row_strips(space: "Rectangle", weights, max_weight: float) -> "TileArray":
    """``space`` cut into strips of whole rows as wide as it (each strip the rows that follow
    while they weigh at most ``max_weight`` together; a row heavier than that alone is cut
    across its columns into pieces of at most ``max_weight``), in row order. For an app whose
    compare makes a kernel call per row of a tile, each with a fixed cost (``row_calls``:
    Opal, one query against a database of targets): one call per row, on every column."""
    if not max_weight > 0:
        raise ValueError(f"max_weight must be > 0, got {max_weight}")
    w = weights if isinstance(weights, PairWeights) else PairWeights(*weights)
    n_rows, n_cols = space.n_rows, space.n_cols
    cols = float(w.col_cum[-1])
    cuts: list[tuple[int, int, int, int]] = []
    r = 0
    while r < n_rows and n_cols:
        # the last row end whose strip from r weighs at most max_weight (at least one row)
        limit = w.row_cum[r] + max_weight / cols if cols > 0 else np.inf
        r1 = max(r + 1, min(n_rows, int(np.searchsorted(w.row_cum, limit, "right")) - 1))
        if r1 == r + 1 and w.row[r] * cols > max_weight:  # one heavy row: across its columns
            c = 0
            while c < n_cols:
                climit = w.col_cum[c] + max_weight / max(w.row[r], 1e-300)
                c1 = max(c + 1, min(n_cols, int(np.searchsorted(w.col_cum, climit, "right")) - 1))
                cuts.append((r, r1, c, c1))
                c = c1
        else:
            cuts.append((r, r1, 0, n_cols))
        r = r1
    return TileArray.of([Tile(i, r0, r1, c0, c1, (r1 - r0) * (c1 - c0), 0)
                         for i, (r0, r1, c0, c1) in enumerate(cuts)])


def _spread_bits(x: np.ndarray) -> np.ndarray:
    """Bit k of ``x`` moved to bit 2k (x < 2**31)."""
    x = x.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    for shift, mask in ((16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF),
                        (4, 0x0F0F0F0F0F0F0F0F), (2, 0x3333333333333333),
                        (1, 0x5555555555555555)):
        x = (x | (x << np.uint64(shift))) & np.uint64(mask)
    return x


def grid_leaves(space: "Triangle | Rectangle", leaf: int) -> "TileArray":
    """The leaves ``quadtree`` makes for an unweighted ``Triangle`` or ``Rectangle``, from
    arrays: every block of the leaf grid holding a pair, in Z-order (a block's Morton code with
    its row bit above its column bit: the tree's quadrant order top-left, top-right,
    bottom-left, bottom-right), all at the tree's one leaf depth."""
    n_rows, n_cols = space.n_rows, space.n_cols
    side, depth = leaf, 0
    while side < max(n_rows, n_cols, 1):
        side *= 2
        depth += 1
    brows, bcols = -(-n_rows // leaf), -(-n_cols // leaf)
    if isinstance(space, Triangle):  # blocks on and right of the diagonal (others hold none)
        br, bc = np.triu_indices(brows, 0, bcols)
    else:
        br, bc = np.divmod(np.arange(brows * bcols, dtype=np.int64), max(1, bcols))
    order = np.argsort((_spread_bits(br) << np.uint64(1)) | _spread_bits(bc), kind="stable")
    br, bc = br[order], bc[order]
    out = np.empty((len(br), len(TileArray.FIELDS)), dtype=np.int64)
    r0, r1, c0, c1, pairs = (out[:, k] for k in range(1, 6))
    np.multiply(br, leaf, out=r0)
    np.multiply(bc, leaf, out=c0)
    np.minimum(r0 + leaf, n_rows, out=r1)
    np.minimum(c0 + leaf, n_cols, out=c1)
    np.multiply(r1 - r0, c1 - c0, out=pairs)
    if isinstance(space, Triangle):
        diag = np.flatnonzero(br == bc)  # a diagonal block holds the pairs above its diagonal
        s = r1[diag] - r0[diag]
        pairs[diag] = s * (s - 1) // 2
    out[:, 6] = depth
    out = out[pairs > 0] if (pairs <= 0).any() else out
    out[:, 0] = np.arange(len(out))
    return TileArray(out)


def split_tail(space: PairSpace, tiles: Sequence[Tile], order: Sequence[int],
               tail_weight: float, weights=None, levels: int = 2,
               rows_only: bool = False) -> tuple[list[Tile], list[int]]:
    """Split the tiles at the end of ``order`` into quarters (row halves x column halves;
    ``rows_only``: four row blocks, for strips of ``row_strips``, whose width is the point).

    A run ends with actors idle while the last tiles finish, about half a tile each; big tiles
    keep per-tile overhead low but make that tail long. So the tiles whose work comes last,
    ``tail_weight`` of it (in ``weights`` units, pairs without weights), are quartered, and the
    last quarter of that again (``levels``): big tiles for the body, small ones for the end
    (guided self-scheduling). Empty quarters are dropped; every pair stays in exactly one tile.
    Returns new tiles, ids renumbered in the new plan order, and that order (0..len-1).
    Only for sinks that accept tiles off the leaf grid (not the dense matrix's whole chunks).
    """
    w = weights if weights is None or isinstance(weights, PairWeights) else PairWeights(*weights)

    def weigh(t: Tile) -> float:
        return space.weight(t.r0, t.r1, t.c0, t.c1, w) if w is not None else float(t.pairs)

    def quarters(t: Tile) -> list[Tile]:
        if t.r1 - t.r0 < 2 and t.c1 - t.c0 < 2:
            return [t]
        if rows_only and t.r1 - t.r0 > 1:
            n = t.r1 - t.r0
            ends = sorted({t.r0 + (n * k + 3) // 4 for k in range(1, 5)} - {t.r0})
            return [Tile(0, a, b, t.c0, t.c1, space.count(a, b, t.c0, t.c1), t.depth + 1)
                    for a, b in zip([t.r0] + ends[:-1], ends)]
        rm = (t.r0 + t.r1 + 1) // 2 if t.r1 - t.r0 > 1 else t.r1
        cm = (t.c0 + t.c1 + 1) // 2 if t.c1 - t.c0 > 1 else t.c1
        out = []
        for a, b in ((t.r0, rm), (rm, t.r1)):
            for c, d in ((t.c0, cm), (cm, t.c1)):
                if a < b and c < d:
                    pairs = space.count(a, b, c, d)
                    if pairs:
                        out.append(Tile(0, a, b, c, d, pairs, t.depth + 1))
        return out

    seq = [tiles[t] for t in order]
    budget = tail_weight
    for _ in range(max(0, levels)):
        if budget <= 0 or not seq:
            break
        acc, cut = 0.0, len(seq)
        while cut > 0 and acc < budget:
            cut -= 1
            acc += weigh(seq[cut])
        seq = seq[:cut] + [q for t in seq[cut:] for q in quarters(t)]
        budget /= 4
    out = [Tile(i, t.r0, t.r1, t.c0, t.c1, t.pairs, t.depth) for i, t in enumerate(seq)]
    return out, list(range(len(out)))
