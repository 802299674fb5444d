"""An independent replay of a run's item loads: the oracle for the planner's simulator
(``engine.pairs.plan.simulate``). Nothing here imports pairflow: the rules are written out again
from the design (DESIGN.md's tiers, ``policy.TilePolicy``'s and ``tiers.BudgetCache``'s
docstrings), over plain dicts and lists, for one node.

The rules:

* Actors take turns, 0, 1, ... An actor with ``in_flight`` tiles under way first finishes its
  oldest one (the tile is done; its items are no longer pinned in the actor's L1).
* It is then handed a tile: of the first ``window`` tiles of the plan's order not yet handed
  out, the one that would load the fewest items (in neither its L1 nor the node's L2), then
  the one of most pairs, then of fewest L1 misses, then the earliest. When none is left it
  finishes every tile it holds and stops.
* Each item of the tile, in the tile's item order: in L1, an L1 hit (its L1 recency renewed);
  else in L2, an L2 hit (its L2 recency renewed) and a copy into L1; else a load, into L2 and
  L1. The tile's items stay pinned in L1 until the tile is finished. Then L1 evicts down to
  its capacity (never a pinned item), then L2 down to its own (nothing is pinned there once
  the tile's items are copied).
* Which item goes: ``lru``, the least recently used; ``next_use``, the item whose next use
  (the plan position of the earliest tile not yet handed out that needs it) is latest, an
  item no such tile needs first, ties to the least recently used.
"""
from __future__ import annotations

import math


class _Tier:
    """A cache of item ids: recency in a list (least recent first), a capacity, pins."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.recency: list[int] = []
        self.pins: dict[int, int] = {}

    def __contains__(self, item) -> bool:
        return item in self.pins

    def touch(self, item: int) -> None:
        self.recency.remove(item)
        self.recency.append(item)

    def insert(self, item: int) -> None:
        self.recency.append(item)
        self.pins[item] = 0

    def evict(self, next_use) -> None:
        """Down to capacity, unpinned items only; ``next_use``: None for LRU, else item ->
        plan position of its next use."""
        over = len(self.recency) - self.capacity
        if over <= 0:
            return
        free = [it for it in self.recency if self.pins[it] == 0]
        if next_use is not None:
            lru_rank = {it: k for k, it in enumerate(free)}
            free.sort(key=lambda it: (-next_use(it), lru_rank[it]))
        for it in free[:over]:
            self.recency.remove(it)
            del self.pins[it]


def replay(tile_items, tile_pairs, order, *, l1_items: int, l2_items: int,
           eviction: str, actors: int = 1, in_flight: int = 1, window: int = 8):
    """(loads, L1 hits, L2 hits) of one node running ``order`` (tile indices) by the rules
    above; ``tile_items[t]``: tile t's item ids in order, ``tile_pairs[t]``: its pairs."""
    position = {t: p for p, t in enumerate(order)}
    handed = set()

    def next_use(item: int) -> float:
        later = [position[t] for t in users[item] if t not in handed]
        return min(later) if later else math.inf

    users: dict[int, list[int]] = {}
    for t, its in enumerate(tile_items):
        for it in its:
            users.setdefault(it, []).append(t)
    rank = None if eviction == "lru" else next_use
    if eviction not in ("lru", "next_use"):
        raise ValueError(eviction)
    l2 = _Tier(max(1, l2_items))
    l1 = [_Tier(l1_items) for _ in range(actors)]
    under_way: list[list[int]] = [[] for _ in range(actors)]
    stopped = [False] * actors
    loads = l1_hits = l2_hits = 0

    def finish(a: int, t: int) -> None:
        for it in tile_items[t]:
            l1[a].pins[it] -= 1
        l1[a].evict(rank)

    def hand_out(a: int):
        pending = [t for t in order if t not in handed][:window]
        if not pending:
            return None

        def cost(t):
            misses = [it for it in tile_items[t] if it not in l1[a]]
            return (sum(it not in l2 for it in misses), -tile_pairs[t], len(misses),
                    position[t])
        best = min(pending, key=cost)
        handed.add(best)
        return best

    while not all(stopped):
        for a in range(actors):
            if stopped[a]:
                continue
            if len(under_way[a]) >= in_flight:
                finish(a, under_way[a].pop(0))
            t = hand_out(a)
            if t is None:
                while under_way[a]:
                    finish(a, under_way[a].pop(0))
                stopped[a] = True
                continue
            for it in tile_items[t]:
                if it in l1[a]:
                    l1_hits += 1
                    l1[a].touch(it)
                elif it in l2:
                    l2_hits += 1
                    l2.touch(it)
                    l1[a].insert(it)
                else:
                    loads += 1
                    l2.insert(it)
                    l1[a].insert(it)
                l1[a].pins[it] += 1
            l1[a].evict(rank)
            l2.evict(rank)
            under_way[a].append(t)
    return loads, l1_hits, l2_hits


def tile_item_lists(tiles, row_items, col_items) -> list[list[int]]:
    """Each tile's items: its rows' and its columns' item ids, once each, in ascending order."""
    return [sorted({int(i) for i in row_items[t.r0:t.r1]} | {int(i) for i in col_items[t.c0:t.c1]})
            for t in tiles]
