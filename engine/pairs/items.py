"""Which items the rows and columns of the pair matrix are: ``ItemMap``, plain or packed.

The caches, the loaders and the tile policy deal in item ids; sinks, masks and tiles deal in
rows and columns. An ``ItemMap`` is the one translation between the two, including packs (a
tile side's items loaded and cached as one item, ``ItemMap.packed``).
"""
from __future__ import annotations

import numpy as np

from .space import Tile


class ItemMap:
    """Maps matrix rows/columns to item ids: a row i and a column j may be the same item.

    A *packed* map (``packed``) maps each row to (pack, offset): one cached, loaded item holds
    the rows of a whole tile side. Items of microseconds (a read's k-mer bitset) cost more to
    track one by one (loads, cache entries, eviction ranks, the tile policy's sets) than to
    compare; packed, the caches and the policy see a few dozen items where there were
    thousands, and every decision they make is the same one on the coarser grid.
    """

    def __init__(self, row_items: np.ndarray, col_items: np.ndarray,
                 row_offsets: np.ndarray | None = None, col_offsets: np.ndarray | None = None):
        self.row_items = np.asarray(row_items, dtype=np.int64)
        self.col_items = np.asarray(col_items, dtype=np.int64)
        self.n_items = int(max(self.row_items.max(initial=-1), self.col_items.max(initial=-1)) + 1)
        self.row_offsets = None if row_offsets is None else np.asarray(row_offsets, np.int64)
        self.col_offsets = None if col_offsets is None else np.asarray(col_offsets, np.int64)

    @classmethod
    def shared(cls, n: int) -> "ItemMap":
        ids = np.arange(n, dtype=np.int64)
        return cls(ids, ids)

    @classmethod
    def disjoint(cls, n_rows: int, n_cols: int) -> "ItemMap":
        return cls(np.arange(n_rows), n_rows + np.arange(n_cols))

    def tile_items(self, tile: Tile) -> np.ndarray:
        return np.unique(np.concatenate([self.row_items[tile.r0:tile.r1],
                                         self.col_items[tile.c0:tile.c1]]))

    @property
    def is_packed(self) -> bool:
        return self.row_offsets is not None

    def packed(self, rows: int) -> tuple["ItemMap", list[np.ndarray]]:
        """The map whose items are packs of ``rows`` consecutive rows (and columns), and each
        pack's member items (ids of this map) in row order. Rows and columns share packs when
        they are the same items (a triangle); otherwise each side is packed on its own. With
        tiles cut on a grid of ``rows`` (``space.leaves(space, rows)``) every tile side is one
        pack."""
        rows = max(1, int(rows))

        def side(items: np.ndarray, first: int):
            pos = np.arange(len(items))
            packs = first + pos // rows
            members = [items[p:p + rows] for p in range(0, len(items), rows)]
            return packs, pos % rows, members

        r_packs, r_off, members = side(self.row_items, 0)
        if np.array_equal(self.row_items, self.col_items):
            return ItemMap(r_packs, r_packs, r_off, r_off), members
        c_packs, c_off, c_members = side(self.col_items, len(members))
        return ItemMap(r_packs, c_packs, r_off, c_off), members + c_members

    def rows(self, values: dict, side: str, lo: int, hi: int):
        """The items of rows (``side="row"``) or columns [lo, hi) from ``values`` (item id ->
        value): a list of values; packed, the rows of the packs' values (each pack a 2-D array
        or a list, indexable by offset): a slice of one pack (no copy) or the slices of several
        joined."""
        items = (self.row_items if side == "row" else self.col_items)[lo:hi]
        offsets = self.row_offsets if side == "row" else self.col_offsets
        if offsets is None:
            return [values[i] for i in items]
        offsets = offsets[lo:hi]
        # runs of one pack with consecutive offsets
        breaks = np.flatnonzero((np.diff(items) != 0) | (np.diff(offsets) != 1)) + 1
        starts = np.concatenate([[0], breaks]).astype(np.int64)
        ends = np.concatenate([breaks, [len(items)]]).astype(np.int64)
        pieces = [values[int(items[s])][int(offsets[s]):int(offsets[s]) + int(e - s)]
                  for s, e in zip(starts, ends)]
        if len(pieces) == 1:
            return pieces[0]
        if all(isinstance(p, np.ndarray) for p in pieces):
            return np.concatenate(pieces)
        return [row for p in pieces for row in p]
