"""Load-count simulator: the scheduling and eviction policy without Ray.

It replays what the engine's actors do, with the same ``TilePolicy`` and ``BudgetCache`` classes:
actors ask for tiles in turn, keep ``in_flight`` tiles pinned, and fetch a tile's items from their
L1, then their node's L2, then the source (a load). Counting loads gives R = loads / n for a plan
and an eviction policy, which is what the unit tests and ``benchmarks/allpairs.py`` compare with
the model ``1 + n / (2 S)``.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .tiers import BudgetCache
from .policy import ItemMap, TilePolicy, make_eviction, make_plan
from .sizing import device_cache_items
from .space import PairSpace, leaves


@dataclass
class SimResult:
    loads: int
    n_items: int
    l1_hits: int
    l2_hits: int
    tiles: int
    pairs: int

    @property
    def R(self) -> float:
        return self.loads / max(1, self.n_items)


def simulate(space: PairSpace, leaf: int, host_items: int, *, items: ItemMap | None = None,
             actors_per_node: int = 1, nodes: int = 1, l1_items: int | None = None,
             in_flight: int = 1, plan: str = "stripe", eviction: str = "next_use",
             window: int = 8) -> SimResult:
    """Count item loads for one run of ``space`` with ``host_items`` items per node's L2."""
    if items is None:
        items = ItemMap.shared(space.n_rows) if space.symmetric else \
            ItemMap.disjoint(space.n_rows, space.n_cols)
    tiles = leaves(space, leaf)
    n_actors = actors_per_node * nodes
    spare = actors_per_node * in_flight
    order = make_plan(plan, host_items, spare).order(tiles, items)
    policy = TilePolicy(tiles, items, order, window=window, locality=True)

    def tier(budget: int) -> BudgetCache:
        return BudgetCache(budget_items=budget,
                           eviction=make_eviction(eviction, next_use=policy.next_uses))

    # the driver's rule, so the simulated L1 is the one a run gets
    l1_cap = device_cache_items(leaf, in_flight, l1_items)
    l2 = [tier(max(1, host_items)) for _ in range(nodes)]
    l1 = [tier(l1_cap) for _ in range(n_actors)]
    running = [deque() for _ in range(n_actors)]
    loads = l1_hits = l2_hits = pairs = done = 0
    finished = [False] * n_actors
    while not all(finished):
        for a in range(n_actors):
            if finished[a]:
                continue
            node = a // actors_per_node
            if len(running[a]) >= in_flight:
                _finish(running[a].popleft(), l1[a], l2[node], policy)
            t = policy.next_tile(l1[a], l2[node])
            if t is None:
                while running[a]:
                    _finish(running[a].popleft(), l1[a], l2[node], policy)
                finished[a] = True
                continue
            got = _acquire(policy.tile_items[t], l1[a], l2[node])
            loads, l1_hits, l2_hits = loads + got[0], l1_hits + got[1], l2_hits + got[2]
            running[a].append(t)
            pairs += policy.tiles[t].pairs
            done += 1
    return SimResult(loads, items.n_items, l1_hits, l2_hits, done, pairs)


def _acquire(tile_items, l1: BudgetCache, l2: BudgetCache) -> tuple[int, int, int]:
    """Pin a tile's items in an actor's L1, from L2 or the source: (loads, L1 hits, L2 hits)."""
    loads = l1_hits = l2_hits = 0
    for it in tile_items:
        if it in l1:
            l1.lookup(it)
            l1_hits += 1
            l1.pin(it)
        elif it in l2:
            l2.lookup(it)
            l2_hits += 1
            l1.put(it, True, 1, pin=True)
        else:
            loads += 1
            l2.put(it, True, 1, pin=True)
            l1.put(it, True, 1, pin=True)
    # L2 pins only protect items while they are copied into L1
    for it in tile_items:
        if l2.pins(it):
            l2.unpin(it)
    l2.shrink()
    return loads, l1_hits, l2_hits


def _finish(t: int, l1: BudgetCache, l2: BudgetCache, policy: TilePolicy) -> None:
    for it in policy.tile_items[t]:
        l1.unpin(it)
    policy.complete(t)
    l1.shrink()
