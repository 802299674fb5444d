"""Which tile next: the scheduling policy, free of Ray (which item to evict: cache/eviction.py).

The engine knows every future pair, so unlike a hardware cache it can plan the order of tiles and
the eviction choice together:

* ``StripePlan`` keeps a stripe of rows resident while the column items stream past. With a host
  tier holding S of n items every streamed load serves up to S new pairs, which gives about
  ``R = 1 + n / (2 S)`` loads per item (the lower bound is n / (2 S)). The streaming direction
  alternates so that the items streamed last are still resident when the next stripe begins.
* ``ZOrderPlan`` visits the quadtree's leaves in Z-order: the baseline (Rocket's order).
* ``HilbertPlan`` visits them along a Hilbert curve: like Z-order it needs no cache size, but
  consecutive tiles always share a row or a column block (Z-order jumps at every quadrant), so
  a small host tier keeps more of what the next tile needs.
* ``TilePolicy`` hands out tiles: among the first ``window`` pending tiles of the plan it picks
  the one that would load the fewest items given what the asking actor's L1 and its node's L2
  hold, then the one of most pairs, then the fewest L1 misses, then the earliest in the plan.
  It also answers ``next_use(item)``: the plan position of the next pending tile needing the
  item, which is what ``NextUseEviction`` evicts by (an item no pending tile needs goes first).
* ``read_ahead`` lists the items in the order the plan first needs them: a node whose host tier
  holds every item keeps its load slots busy with them (``NodeCache``), not only with what the
  tiles under way ask for, so no compare waits on a parse that an idle slot could have run.
* ``largest_first``: when the host tier holds every item, any order loads each item once, so
  the plan's order is re-sorted by tile size (stable): a run ends on its smallest tiles (the
  triangle's diagonal ones), and the actors' idle wait for the last tile is shortest.
* The eviction rules that ``next_use`` serves (``LRUEviction``, ``NextUseEviction``,
  ``AdvisedEviction``, the ``EVICTIONS`` registry) live with the tiers: ``cache/eviction.py``.

The plans have one registry (``PLANS``), so a config name means one thing.

Everything here is a plain class over integer item ids so that the simulator
(``engine.pairs.plan.simulate``) and the Ray actors share exactly the same decisions.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ...run.registry import Registry
from ..items import ItemMap
from ..space import Tile, TileArray
from .tile_index import ItemUses, TileItems

INF = math.inf


class ZOrderPlan:
    """Leaves in quadtree Z-order (their id order): the baseline."""

    name = "zorder"

    def order(self, tiles: Sequence[Tile], items: ItemMap) -> list[int]:
        return sorted(range(len(tiles)), key=lambda t: tiles[t].id)


class StripePlan:
    """Rows in stripes that fit the host tier; columns streamed past each stripe in snake order.

    ``cache_items`` is S, the items one node's host tier holds; ``spare_tiles`` is how many tiles
    may be under way at once on that node (their column items must fit beside the stripe).
    The dimension with fewer stripes' worth of streaming is the one made into stripes.
    Room is kept beside the stripe for the streamed leaves of the tiles under way (which share
    one column while the stripe has more rows than there are such tiles).
    """

    name = "stripe"

    def __init__(self, cache_items: int | None, spare_tiles: int = 1):
        self.cache_items = cache_items
        self.spare_tiles = max(1, spare_tiles)

    def _grid(self, tiles: Sequence[Tile], items: ItemMap, room: int = 0):
        """The leaf-block grid: (block -> tile index, block rows, block columns, stripe rows h),
        transposed when striping the columns loads less (two different item sets). ``room``:
        at least this many leaves of the host tier are kept for streamed columns."""
        br, bc, idx, brows, bcols, h = self._blocks(tiles, items, room)
        block = dict(zip(zip(br.tolist(), bc.tolist()), idx.tolist()))
        return block, brows, bcols, h

    def _blocks(self, tiles: Sequence[Tile], items: ItemMap, room: int = 0):
        """``_grid`` as arrays: each tile's (block row, block column) and index, in tile order
        (a later tile of one block wins, as in the dict), then block rows, columns and h."""
        ta = TileArray.of(tiles)
        leaf = int(max((ta.r1 - ta.r0).max(), (ta.c1 - ta.c0).max()))
        br, bc = ta.r0 // leaf, ta.c0 // leaf
        n_rows = int(ta.r1.max())
        n_cols = int(ta.c1.max())
        s = self.cache_items if self.cache_items else max(n_rows, n_cols)
        # Items the stripe may hold: the rest is room for the streamed columns under way. The
        # tiles under way on a node run down one streamed column together (consecutive tiles of
        # the order share it), so that room is ceil(tiles under way / stripe rows) leaves, not
        # one per tile, which brings a small host tier's R much closer to 1 + n/(2S) (simulated).
        stream = max(room, math.ceil(self.spare_tiles / max(1, s // leaf - 1)))
        stripe_items = max(leaf, s - stream * leaf)
        h = max(1, stripe_items // leaf)
        brows, bcols = -(-n_rows // leaf), -(-n_cols // leaf)
        transpose = False
        if not np.array_equal(items.row_items, items.col_items):
            # Stripe the smaller side: loads ~ stripe side + (stripes) * streamed side.
            cost_rows = n_rows + math.ceil(n_rows / (h * leaf)) * n_cols
            cost_cols = n_cols + math.ceil(n_cols / (h * leaf)) * n_rows
            transpose = cost_cols < cost_rows
        if transpose:
            br, bc = bc, br
            brows, bcols = bcols, brows
        return br, bc, np.arange(len(ta)), brows, bcols, h

    @staticmethod
    def _stripes(brows: int, bcols: int, width: int):
        """Each stripe's rows, the columns inside it, and the streamed columns in snake order."""
        descending = True
        for s0 in range(0, brows, width):
            inside = list(range(s0, min(s0 + width, bcols)))
            outside = [bc for bc in range(bcols) if not (s0 <= bc < s0 + width)]
            if descending:
                outside.reverse()
            descending = not descending
            yield range(s0, min(s0 + width, brows)), inside, outside

    def order(self, tiles: Sequence[Tile], items: ItemMap) -> list[int]:
        return self._order(tiles, items)[0]

    def stripe_starts(self, tiles: Sequence[Tile], items: ItemMap) -> list[int]:
        """The positions in ``order`` where a stripe begins: where contiguous shares of the
        plan may be cut without two nodes loading one stripe's rows (``stealing``)."""
        return self._order(tiles, items)[1]

    def _order(self, tiles: Sequence[Tile], items: ItemMap) -> tuple[list[int], list[int]]:
        if not len(tiles):
            return [], []
        br, bc, idx, brows, bcols, h = self._blocks(tiles, items)
        if brows * bcols > 4 * len(idx) + (1 << 20):  # a sparse grid (a pair list): by dict
            block = dict(zip(zip(br.tolist(), bc.tolist()), idx.tolist()))
            grid = None
        else:  # the blocks as one array (10^6 tiles: no dict of tuples)
            grid = np.full((brows, bcols), -1, dtype=np.int64)
            grid[br, bc] = idx
        order: list[int] = []
        starts: list[int] = []
        for srows, inside, outside in self._stripes(brows, bcols, h):
            starts.append(len(order))
            # Columns inside the stripe first (only stripe items), then the stream.
            if grid is not None:  # column by column, the stripe's rows down each
                run = grid[srows.start:srows.stop][:, inside + outside].T.ravel()
                order.extend(run[run >= 0].tolist())
                continue
            for bc_ in inside + outside:
                for br_ in srows:
                    t = block.get((br_, bc_))
                    if t is not None:
                        order.append(t)
        return order, starts

    def deal_room(self, room: int | None = None) -> int:
        """Leaves of a node's host tier kept beside its dealt rows for streamed columns. By
        default room for two streamed columns when two tiles may be under way (a node's tiles
        cross from one column to the next together, and its own rows must not be what gives
        way), and one more for the peers that run a column behind (they take it from this
        node); a paced run (``stealing.Pace``) keeps its nodes closer and may keep less, which
        the planner simulates (``simulate.DEAL_ROOMS``)."""
        return min(2, self.spare_tiles) + 1 if room is None else max(1, int(room))

    def deal_rows(self, tiles: Sequence[Tile], items: ItemMap, room: int | None = None) -> int:
        """The leaf rows each node keeps in a dealt stripe (``deal``): the tiles it runs per
        streamed column, which is what a pace counts its lead in."""
        return self._grid(tiles, items, room=self.deal_room(room))[3] if tiles else 1

    def deal(self, tiles: Sequence[Tile], items: ItemMap, nodes: int,
             room: int | None = None) -> list[list[int]]:
        """Each node's tiles, in order, for nodes that share their host tiers through L3.

        One stripe is ``nodes`` node stripes side by side (each h leaves of rows, what one
        node's host tier holds), so the cluster's stripe is as wide as its caches together and
        every item streams past it once: R near ``1 + n / (2 S nodes)`` instead of one node's
        ``1 + n / (2 S)``. Node m keeps its own rows and runs them against every streamed
        column in the same order as the other nodes, so a column one node loaded is still in
        its host tier when the others ask for it (the same work per column keeps them in step).
        Inside the stripe, the tiles between the rows of nodes a and b go to a when b is less
        than half the ring of nodes ahead of a, else to b, and a block exactly half the ring
        away is split like a chessboard (a circulant split: every node gets the same work, and
        takes the other rows from the node that holds them for its own stream); they come before
        the stream, so the nodes reach it together."""
        if nodes <= 1 or not tiles:
            return [self.order(tiles, items)] if nodes >= 1 else []
        block, brows, bcols, h = self._grid(tiles, items, room=self.deal_room(room))
        shared = np.array_equal(items.row_items, items.col_items)
        out: list[list[int]] = [[] for _ in range(nodes)]
        for srows, inside, outside in self._stripes(brows, bcols, h * nodes):
            rows = list(srows)
            groups = [rows[m * len(rows) // nodes:(m + 1) * len(rows) // nodes]
                      for m in range(nodes)]
            owner = {br: m for m, g in enumerate(groups) for br in g}
            if shared:
                mine: list[list[tuple]] = [[] for _ in range(nodes)]
                for br, bc in ((br, bc) for br in rows for bc in inside):
                    idx = block.get((br, bc))
                    if idx is None:
                        continue
                    a = owner[br]
                    b = owner.get(bc, a)  # a column past the last row: the row's node
                    ahead = (b - a) % nodes
                    if 2 * ahead < nodes or (2 * ahead == nodes and (br + bc) % 2 == 0):
                        mine[a].append((ahead, bc, br, idx))
                    else:
                        mine[b].append(((a - b) % nodes, br, bc, idx))
            for m, g in enumerate(groups):
                if shared:
                    out[m].extend(idx for *_, idx in sorted(mine[m]))
                for bc in (outside if shared else inside + outside):
                    for br in g:
                        idx = block.get((br, bc))
                        if idx is not None:
                            out[m].append(idx)
        return out


def largest_first(tiles: Sequence[Tile], order: Sequence[int]) -> list[int]:
    """``order`` with the tiles of most pairs first, the plan's order kept among equals."""
    o = np.asarray(order, dtype=np.int64).reshape(-1)
    return o[np.argsort(-TileArray.of(tiles).pairs[o], kind="stable")].tolist()


def interleave(shares: Sequence[Sequence[int]]) -> list[int]:
    """One order from per-node orders, taking from each in turn (each node's order kept)."""
    out: list[int] = []
    for k in range(max((len(s) for s in shares), default=0)):
        out.extend(s[k] for s in shares if k < len(s))
    return out


def hilbert_index(x, y, side: int) -> np.ndarray:
    """Position along the Hilbert curve filling a ``side`` x ``side`` grid (a power of two)
    of the cells (x, y); vectorised over numpy arrays."""
    if side < 1 or side & (side - 1):
        raise ValueError(f"the Hilbert grid's side must be a power of two, got {side}")
    x = np.array(x, dtype=np.int64, copy=True)
    y = np.array(y, dtype=np.int64, copy=True)
    d = np.zeros(np.broadcast(x, y).shape, dtype=np.int64)
    s = side // 2
    while s > 0:
        rx = (x & s) > 0
        ry = (y & s) > 0
        d += s * s * ((3 * rx) ^ ry)
        # rotate the quadrant so the curve inside it starts where the last one ended
        flip = ~ry & rx
        x = np.where(flip, side - 1 - x, x)
        y = np.where(flip, side - 1 - y, y)
        swap = ~ry
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        s //= 2
    return d


def hilbert_pairs(n: int) -> list[tuple[int, int]]:
    """Every pair i < j of ``n`` items, once, in Hilbert-curve order over the (i, j) grid."""
    i, j = np.triu_indices(n, k=1)
    side = 1 << max(0, (n - 1).bit_length())
    order = np.argsort(hilbert_index(i, j, side), kind="stable")
    return [(int(i[k]), int(j[k])) for k in order]


class HilbertPlan:
    """Leaves along a Hilbert curve over the leaf grid (each tile's centre, in units of the
    smallest tile side, so tiles cut by pair weights are ordered too)."""

    name = "hilbert"

    def order(self, tiles: Sequence[Tile], items: ItemMap) -> list[int]:
        if not tiles:
            return []
        unit = max(1, min(min(t.r1 - t.r0, t.c1 - t.c0) for t in tiles))
        rows = np.array([(t.r0 + t.r1 - 1) // 2 // unit for t in tiles])
        cols = np.array([(t.c0 + t.c1 - 1) // 2 // unit for t in tiles])
        side = 1 << int(max(rows.max(), cols.max())).bit_length()
        return [int(t) for t in np.argsort(hilbert_index(rows, cols, side), kind="stable")]


# the order of the names is the order of preference when the simulator finds plans equal
PLANS = Registry("plan", {
    "stripe": StripePlan,
    "hilbert": lambda cache_items, spare_tiles: HilbertPlan(),
    "zorder": lambda cache_items, spare_tiles: ZOrderPlan(),
})


def make_plan(name: str, cache_items: int | None, spare_tiles: int):
    return PLANS.make(name, cache_items, spare_tiles)


class TilePolicy:
    """Hands out tiles in a planned order, preferring tiles whose items an actor already holds."""

    def __init__(self, tiles: Sequence[Tile], items: ItemMap, order: Sequence[int],
                 window: int = 8, locality: bool = True):
        # integers only (tile_index.py): a run of 10^6 tiles holds no object per tile or use
        self.tiles = TileArray.of(tiles)
        self.items = items
        self.order = list(order)
        position = np.full(len(self.tiles), -1, dtype=np.int64)
        at = np.asarray(self.order, dtype=np.int64)
        if len(at) != len(self.tiles) or (len(at) and (at.min() < 0 or at.max() >= len(at))):
            raise ValueError("a plan must list every tile exactly once")
        position[at] = np.arange(len(at))
        if (position < 0).any():
            raise ValueError("a plan must list every tile exactly once")
        self.tile_items = TileItems(self.tiles, items)
        small = self.tile_items.small
        self.position = position.tolist() if small else position
        self._pairs = self.tiles.pairs.tolist() if small else self.tiles.pairs
        self.window = max(1, window)
        self.locality = locality
        self.assigned = np.zeros(len(self.tiles), bool)
        self.done = np.zeros(len(self.tiles), bool)
        self._cursor = 0
        self._uses = ItemUses(self.tile_items, position, items.n_items)

    # -- handing out work -------------------------------------------------------------------
    def pending(self) -> int:
        return int((~self.assigned).sum())

    def hold_back(self, actors: int, running: int) -> bool:
        """Endgame: once no more tiles are pending than there are actors, a tile goes only to
        an actor whose device has nothing to compute (``running``: its tiles waiting for or in
        compute; one being written does not hold the device). Otherwise an actor's prefetch
        slot (``in_flight``) queues one of the last tiles behind its current one while another
        actor idles to the end of the run."""
        return running > 0 and self.pending() <= actors

    def _candidates(self) -> list[int]:
        while self._cursor < len(self.order) and self.assigned[self.order[self._cursor]]:
            self._cursor += 1
        out = []
        pos = self._cursor
        while pos < len(self.order) and len(out) < self.window:
            t = self.order[pos]
            if not self.assigned[t]:
                out.append(t)
            pos += 1
        return out

    def next_tile(self, l1=(), l2=()) -> int | None:
        """The tile to give an actor whose L1 holds ``l1`` and whose node's L2 holds ``l2``.

        ``l1``/``l2`` are any containers answering ``in`` (sets, dicts, caches).
        """
        cands = self._candidates()
        if not cands:
            return None
        best = cands[0]
        if self.locality and len(cands) > 1:
            l1s = l1 if hasattr(l1, "__contains__") and not isinstance(l1, list) else set(l1)
            l2s = l2 if hasattr(l2, "__contains__") and not isinstance(l2, list) else set(l2)
            best_cost = None
            for t in cands:
                l1_miss = loads = 0
                for i in self.tile_items[t]:
                    if i not in l1s:
                        l1_miss += 1
                        if i not in l2s:
                            loads += 1
                # a larger tile before a smaller one of as many loads: the run ends on its
                # small tiles (the plan's order, largest_first, would else be undone here)
                cost = (loads, -self._pairs[t], l1_miss, self.position[t])
                if best_cost is None or cost < best_cost:
                    best, best_cost = t, cost
        self.assign(best)
        return best

    def assign(self, t: int) -> None:
        self.assigned[t] = True

    def requeue(self, t: int) -> None:
        """A tile lost with its actor goes back to the pending set at its planned position."""
        if not self.done[t]:
            self.assigned[t] = False
            self._cursor = min(self._cursor, int(self.position[t]))
            self._uses.requeue(self.tile_items[t], int(self.position[t]))

    def complete(self, t: int) -> None:
        self.assigned[t] = True
        self.done[t] = True

    # -- eviction advice --------------------------------------------------------------------
    def next_use(self, item: int) -> float:
        """Plan position of the next unassigned tile needing ``item`` (inf: none left)."""
        return self._uses.next_use(int(item), self.assigned, self.order)

    def next_uses(self, items: Iterable[int]) -> dict[int, float]:
        return {int(i): self.next_use(i) for i in items}


def read_ahead(tile_items: Sequence[Sequence[int]], order: Sequence[int],
               done: Iterable[int] = ()) -> list[int]:
    """Every item the plan's pending tiles need, once, in the order the plan first needs it
    (``tile_items[t]``: tile t's items; ``done``: tiles already journaled, which need none)."""
    skip = set(done)
    seen: dict[int, None] = {}
    for t in order:
        if t not in skip:
            seen.update((int(i), None) for i in tile_items[t])
    return list(seen)


def bound_R(n_items: int, cache_items: int | None) -> float:
    """The modelled loads per item, 1 + n / (2 S), for a host tier holding S of n items."""
    if not cache_items or cache_items >= n_items:
        return 1.0
    return 1.0 + n_items / (2.0 * cache_items)
