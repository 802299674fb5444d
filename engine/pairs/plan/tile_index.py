"""The tile policy's indexes over ints: each tile's items, and each item's uses in plan order.

``TilePolicy`` asks, per hand-out, which items a candidate tile needs, and per eviction, the
plan position of an item's next pending use. Kept as a tuple per tile and a deque of positions
per item, a run of 10^6 tiles held ~10^7 Python objects (over a GiB in the coordinator) and took
most of a minute to build. Here both are CSR arrays built with numpy: ``TileItems`` (tile ->
its items, sorted, each once) and ``ItemUses`` (item -> the plan positions of the tiles that need
it, ascending, with a cursor past those already handed out). Small runs (the simulator's, the
tests') get the same arrays as Python lists: one index on a list is several times cheaper than
on an array, and the simulator does millions of them.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

INF = math.inf
#: entries (a tile's items, summed over the tiles) up to which the indexes are Python lists
LIST_ENTRIES = 1 << 21
#: entries built at once (the build's temporaries are a few int64 arrays of this length)
BUILD_ENTRIES = 1 << 23


def _tile_items_csr(r0, r1, c0, c1, row_items, col_items) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat): tile t's items are ``flat[offsets[t]:offsets[t + 1]]``, the union of
    its rows' and its columns' items, ascending."""
    n = len(r0)
    rl, cl = r1 - r0, c1 - c0
    lens = rl + cl
    parts, counts = [], np.zeros(n, dtype=np.int64)
    # items increasing with their rows and columns (a plain space: items are positions)
    monotone = bool(np.all(np.diff(row_items) > 0) and np.all(np.diff(col_items) > 0))
    lo = 0
    while lo < n:  # in blocks of tiles: the temporaries stay near BUILD_ENTRIES long
        cum = np.cumsum(lens[lo:])
        hi = lo + max(1, int(np.searchsorted(cum, BUILD_ENTRIES, side="right")))
        sl = slice(lo, hi)
        total = int(lens[sl].sum())
        tile = np.repeat(np.arange(lo, hi, dtype=np.int64), lens[sl])
        start = np.concatenate([[0], np.cumsum(lens[sl])[:-1]])
        k = np.arange(total, dtype=np.int64) - np.repeat(start, lens[sl])
        is_row = k < rl[tile]
        idx = np.where(is_row, r0[tile] + k, c0[tile] + k - rl[tile])
        vals = np.where(is_row, row_items[np.minimum(idx, len(row_items) - 1)],
                        col_items[np.minimum(idx, len(col_items) - 1)]) if total else idx
        tile, vals = _sorted_per_tile(tile, vals, r0[sl], r1[sl], c0[sl], c1[sl], lo,
                                      row_items, col_items, monotone)
        first = np.ones(total, bool)
        first[1:] = (tile[1:] != tile[:-1]) | (vals[1:] != vals[:-1])
        tile, vals = tile[first], vals[first]
        counts[lo:hi] = np.bincount(tile - lo, minlength=hi - lo)
        parts.append(vals)
        lo = hi
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    dtype = np.int32 if flat.size == 0 or flat.max() < 2**31 else np.int64
    return offsets, flat.astype(dtype)


def _sorted_per_tile(tile, vals, r0, r1, c0, c1, lo, row_items, col_items, monotone):
    """(tile, vals) ordered by tile, then value. Entries come grouped by tile, each tile's
    rows' items then its columns'; with ``monotone`` items each part is ascending already, so
    only a tile whose two ranges overlap (a diagonal block) or whose columns come first is
    sorted (a few of 10^6 leaves, where sorting every entry took seconds of a start)."""
    if not monotone or not len(tile):
        order = np.lexsort((vals, tile))
        return tile[order], vals[order]
    has_r, has_c = r1 > r0, c1 > c0
    last_r = row_items[np.maximum(r1 - 1, 0)]
    first_c = col_items[np.minimum(c0, len(col_items) - 1)]
    ordered = ~has_r | ~has_c | (last_r < first_c)  # rows' items all before columns'
    if ordered.all():
        return tile, vals
    sort = ~ordered[tile - lo]  # the entries of tiles to sort
    sub = np.flatnonzero(sort)
    order = np.lexsort((vals[sub], tile[sub]))
    vals = vals.copy()
    vals[sub] = vals[sub][order]  # (tile-major: a tile's entries stay in its own slots)
    return tile, vals


class TileItems:
    """Tile -> its items (a list of ints, ascending): ``tile_items[t]``."""

    def __init__(self, tiles, items):
        """``tiles``: a ``space.TileArray``; ``items``: the run's ``ItemMap``."""
        offsets, flat = _tile_items_csr(tiles.r0, tiles.r1, tiles.c0, tiles.c1,
                                        items.row_items, items.col_items)
        self.entries = len(flat)
        self.small = self.entries <= LIST_ENTRIES
        self.offsets, self.flat = offsets, flat
        # small: a tuple per tile, as fast as the policy's loops can go
        self._tuples = [tuple(flat[a:b].tolist()) for a, b in
                        zip(offsets[:-1].tolist(), offsets[1:].tolist())] if self.small else None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, t):
        if self._tuples is not None:
            return self._tuples[t]
        return self.flat[self.offsets[t]:self.offsets[t + 1]].tolist()

    def __iter__(self):
        return (self[t] for t in range(len(self)))


class ItemUses:
    """Item -> the plan positions of the tiles needing it, ascending, and a cursor per item
    past the positions already handed out (``next_use``); ``requeue`` moves it back."""

    def __init__(self, tile_items: TileItems, position: np.ndarray, n_items: int):
        n_tiles = len(tile_items)
        tile = np.repeat(np.arange(n_tiles, dtype=np.int64), np.diff(tile_items.offsets))
        item = tile_items.flat.astype(np.int64)
        pos = np.asarray(position, dtype=np.int64)[tile]
        del tile
        order = np.lexsort((pos, item))
        size = max(n_items, int(item.max()) + 1 if len(item) else 0)
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(item, minlength=size), out=offsets[1:])
        flat = pos[order].astype(np.int32 if n_tiles < 2**31 else np.int64)
        del order, item, pos
        if tile_items.small:
            self.flat, self.offsets = flat.tolist(), offsets.tolist()
            self.cursor = self.offsets[:-1].copy()
        else:
            self.flat, self.offsets, self.cursor = flat, offsets, offsets[:-1].copy()
        self.size = size

    def next_use(self, item: int, assigned, order) -> float:
        """Plan position of the next tile needing ``item`` not yet handed out (INF: none)."""
        if not 0 <= item < self.size:
            return INF
        lo, hi, flat = self.cursor[item], self.offsets[item + 1], self.flat
        while lo < hi and assigned[order[flat[lo]]]:
            lo += 1
        self.cursor[item] = lo
        return float(flat[lo]) if lo < hi else INF

    def requeue(self, items, pos: int) -> None:
        """The tile at plan position ``pos``, needing ``items``, is pending again."""
        for it in items:
            lo, hi = self.offsets[it], self.offsets[it + 1]
            at = bisect.bisect_left(self.flat, pos, lo, hi)
            if at < self.cursor[it]:
                self.cursor[it] = at


def first_needs(tiles, items, order, done=()) -> list[int]:
    """Every item the plan's pending tiles need, once, in the order the plan first needs it
    (``policy.read_ahead``'s answer, from arrays: ``tiles`` a ``space.TileArray``, ``items``
    the run's ``ItemMap``, ``done`` the tiles already journaled)."""
    o = np.asarray(order, dtype=np.int64).reshape(-1)
    if len(done):
        o = o[~np.isin(o, np.asarray(list(done), dtype=np.int64))]
    if not len(o):
        return []
    offsets, flat = _tile_items_csr(tiles.r0[o], tiles.r1[o], tiles.c0[o], tiles.c1[o],
                                    items.row_items, items.col_items)
    uniq, first = np.unique(flat, return_index=True)  # flat runs in plan order already
    return uniq[np.argsort(first, kind="stable")].tolist()
