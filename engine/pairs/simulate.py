"""Load-count simulator: the scheduling and eviction policy without Ray.

It replays what the engine's actors do, with the same ``TilePolicy`` and ``BudgetCache`` classes:
actors ask for tiles in turn, keep ``in_flight`` tiles pinned, and fetch a tile's items from their
L1, then their node's L2, then the source (a load). Counting loads gives R = loads / n for a plan
and an eviction policy, which is what the unit tests and ``benchmarks/allpairs.py`` compare with
the model ``1 + n / (2 S)``.

``choose_plan`` is the planner: no plan wins everywhere (the stripe plan needs a host tier several
leaves deep; with a tier of a few items a curve order loads less), so before a run the driver
simulates every candidate plan and eviction for the run's own space, leaf, tiers and actors (a
large run on its grid of leaf blocks, one item per block) and runs the one with the fewest loads
(``pick``). The baseline, Z-order with LRU, is a candidate, so
the planned run is never predicted to load more than it.
"""
from __future__ import annotations

from collections import deque
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .directory import DirectoryShard, shard_of
from .tiers import BudgetCache, device_cache_items
from .items import ItemMap
from .policy import EVICTIONS, PLANS, TilePolicy, make_eviction, make_plan
from .stealing import contiguous_shares, deal as deal_shares
from .space import PairSpace, Rectangle, Tile, Triangle, leaves


@dataclass
class SimResult:
    loads: int
    n_items: int
    l1_hits: int
    l2_hits: int
    tiles: int
    pairs: int
    l3_hits: list = field(default_factory=list)  # per hop: items taken from a peer's L2

    @property
    def R(self) -> float:
        return self.loads / max(1, self.n_items)


def simulate(space: PairSpace, leaf: int, host_items: int, *, items: ItemMap | None = None,
             actors_per_node: int = 1, nodes: int = 1, l1_items: int | None = None,
             in_flight: int = 1, plan: str = "stripe", eviction: str = "next_use",
             window: int = 8, tiles: Sequence[Tile] | None = None, l3: bool = False,
             l3_hops: int = 1, deal: bool | str = False) -> SimResult:
    """Count item loads for one run of ``space`` with ``host_items`` items per node's L2
    (``tiles``: the run's own, when they are not the plain leaves, e.g. cut by pair weights).

    ``l3``: an L2 miss first asks the directory (``directory.DirectoryShard``, item i on shard
    i mod nodes) for the ``l3_hops`` latest holders and takes the item from the first that still
    holds it (a hit at that hop, not a load). What enters an L2 is the same either way, so the
    tiles dealt are too: with L3, loads + L3 hits = the loads without it.

    ``deal``: the run is dealt to the nodes as the hierarchical scheduler deals it
    (``stealing.deal``: contiguous runs of the plan, or with L3 stripes as wide as every host tier
    together; ``deal="contiguous"``: always the former), each share handed out by a
    ``TilePolicy`` of its own (without stealing), instead of one plan every node pulls from."""
    if items is None:
        items = ItemMap.shared(space.n_rows) if space.symmetric else \
            ItemMap.disjoint(space.n_rows, space.n_cols)
    tiles = leaves(space, leaf) if tiles is None else list(tiles)
    n_actors = actors_per_node * nodes
    spare = actors_per_node * in_flight
    planner = make_plan(plan, host_items, spare)
    order = planner.order(tiles, items)
    if deal and nodes > 1:
        shares = deal_shares(planner, tiles, items, nodes, l3 and deal != "contiguous") or \
            contiguous_shares(order, nodes)
        policies = [TilePolicy([tiles[t] for t in share], items, range(len(share)),
                               window=window, locality=True) for share in shares]
    else:
        policies = [TilePolicy(tiles, items, order, window=window, locality=True)] * nodes

    def tier(budget: int, policy: TilePolicy) -> BudgetCache:
        return BudgetCache(budget_items=budget,
                           eviction=make_eviction(eviction, next_use=policy.next_uses))

    # the driver's rule, so the simulated L1 is the one a run gets
    l1_cap = device_cache_items(leaf, in_flight, l1_items)
    l2 = [tier(max(1, host_items), policies[k]) for k in range(nodes)]
    shards = [DirectoryShard(l3_hops) for _ in range(nodes)] if l3 and nodes > 1 else None
    l3_hits = [0] * l3_hops
    l1 = [tier(l1_cap, policies[a // actors_per_node]) for a in range(n_actors)]
    running = [deque() for _ in range(n_actors)]
    loads = l1_hits = l2_hits = pairs = done = 0
    finished = [False] * n_actors
    while not all(finished):
        for a in range(n_actors):
            if finished[a]:
                continue
            node = a // actors_per_node
            policy = policies[node]
            if len(running[a]) >= in_flight:
                _finish(running[a].popleft(), l1[a], l2[node], policy)
            t = policy.next_tile(l1[a], l2[node])
            if t is None:
                while running[a]:
                    _finish(running[a].popleft(), l1[a], l2[node], policy)
                finished[a] = True
                continue
            got = _acquire(policy.tile_items[t], l1[a], l2[node],
                           None if shards is None else (node, l2, shards, l3_hits))
            loads, l1_hits, l2_hits = loads + got[0], l1_hits + got[1], l2_hits + got[2]
            running[a].append(t)
            pairs += policy.tiles[t].pairs
            done += 1
    return SimResult(loads, items.n_items, l1_hits, l2_hits, done, pairs,
                     l3_hits if shards is not None else [])


def _from_peer(it: int, l3) -> bool:
    """L3: is the item in the L2 of one of its directory's candidates (counted per hop)?"""
    node, l2s, shards, hits = l3
    holders = [n for n in shards[shard_of(it, len(shards))].lookup([it]).get(it, [])
               if n != node]
    for hop, n in enumerate(holders[:len(hits)]):
        if it in l2s[n]:
            hits[hop] += 1
            return True
    return False


def _acquire(tile_items, l1: BudgetCache, l2: BudgetCache, l3=None) -> tuple[int, int, int]:
    """Pin a tile's items in an actor's L1, from L2 or the source: (loads, L1 hits, L2 hits).

    One transaction, as ``TileCache.acquire`` and ``NodeCache.get`` do it: every item is pinned
    (or inserted pinned) before either tier evicts, so making room for one item of a tile can
    never evict another item of the same tile that was still waiting for its turn."""
    loads = l1_hits = l2_hits = 0
    added = []
    for it in tile_items:
        if it in l1:
            l1.lookup(it)
            l1_hits += 1
            l1.pin(it)
        elif it in l2:
            l2.lookup(it)
            l2_hits += 1
            l2.pin(it)
            l1.put(it, True, 1, pin=True, shrink=False)
        else:
            if l3 is None or not _from_peer(it, l3):
                loads += 1
            added.append(it)
            l2.put(it, True, 1, pin=True, shrink=False)
            l1.put(it, True, 1, pin=True, shrink=False)
    l1.shrink()
    # L2 pins only protect items while they are copied into L1
    for it in tile_items:
        if l2.pins(it):
            l2.unpin(it)
    evicted = l2.shrink()
    if l3 is not None:  # the directory learns what entered and left this L2
        node, _, shards, _ = l3
        for it in evicted:
            shards[shard_of(it, len(shards))].record(node, removed=[it])
        for it in added:
            if it in l2:
                shards[shard_of(it, len(shards))].record(node, added=[it])
    return loads, l1_hits, l2_hits


def _finish(t: int, l1: BudgetCache, l2: BudgetCache, policy: TilePolicy) -> None:
    for it in policy.tile_items[t]:
        l1.unpin(it)
    policy.complete(t)
    l1.shrink()


# -- the planner ----------------------------------------------------------------------------

BASELINE = ("zorder", "lru")
# a run with more tiles is simulated on a smaller copy of its leaf grid (``_proxy``), as far as
# that keeps its stripes (``_proxy_scale``): the simulation is paid before the run starts
MAX_SIM_TILES = 1500
# a run whose tiles hold more items than this in all (tiles x a tile's items) is simulated on its
# grid of leaf blocks, one item per block (``_proxy`` at full scale): item by item, each of the
# six candidates costs ~2.5 us an item a tile, and 10,000 items in leaves of 125 with 500 in the
# host tier took 10.8 s to choose (3,240 tiles of 250 items), the same R as leaves of 25: a
# block's items travel together. The grid chose the items' own choice, or one loading at most
# 0.5 % more, in every case measured (benchmarks/RESULTS.md, planner (c))
MAX_SIM_VISITS = 60_000
# past this many simulated tiles (a proxy that must stay large to keep its stripes) the choice
# would cost seconds: such a run has a host tier of >= 16 leaf blocks or many tiles per block,
# where the stripe plan's model holds, and it runs the first candidate unsimulated
MAX_PROXY_TILES = 4 * MAX_SIM_TILES


@dataclass(frozen=True)
class PlanChoice:
    """The plan and eviction a run uses, and why: the simulated R of every candidate."""

    plan: str
    eviction: str
    simulated: dict = field(default_factory=dict)  # "plan/eviction" -> simulated R
    note: str = ""                                  # what was simulated, or why nothing was
    # what the simulation was given (leaf, host tier, L1, actors, ...): a check can replay it
    simulated_with: dict = field(default_factory=dict)

    @property
    def R(self) -> float | None:
        return self.simulated.get(f"{self.plan}/{self.eviction}")

    def to_dict(self) -> dict:
        return {"plan": self.plan, "eviction": self.eviction, "simulated_R": dict(self.simulated),
                "baseline": "/".join(BASELINE), "note": self.note, "line": self.describe(),
                "simulated_with": dict(self.simulated_with)}

    def describe(self) -> str:
        """One line for the console: the choice, and what it beat."""
        head = f"plan: {self.plan} with {self.eviction} eviction"
        if not self.simulated:
            return f"{head} ({self.note})" if self.note else head
        chosen = f"{self.plan}/{self.eviction}"
        others = ", ".join(f"{k} {r:.2f}" for k, r in self.simulated.items() if k != chosen)
        return (f"{head}: simulated R {self.R:.2f}" + (f" (vs {others})" if others else "")
                + (f"; {self.note}" if self.note else ""))


def candidates(plan: str, eviction: str, weighted: bool = False) -> list[tuple[str, str]]:
    """The (plan, eviction) pairs a run may use, in order of preference: ``auto`` stands for
    every registered name. Tiles cut by pair weights cannot be striped (the stripe plan wants
    one tile per leaf block); for them Z-order comes first, the order such runs always had."""
    for name, reg in ((plan, PLANS), (eviction, EVICTIONS)):
        if name != "auto" and name not in reg.factories:
            raise ValueError(f"unknown {reg.kind} {name!r}: choose auto or "
                             + ", ".join(repr(n) for n in reg.factories))
    plans = list(PLANS.factories) if plan == "auto" else [plan]
    if weighted:
        plans = sorted((p for p in plans if p != "stripe"), key=lambda p: p != "zorder") \
            or ["zorder"]
    evictions = list(EVICTIONS.factories) if eviction == "auto" else [eviction]
    return [(p, e) for p in plans for e in evictions]


def pick(loads: dict) -> tuple[str, str]:
    """The candidate with the fewest simulated loads; on a tie the first (the preferred one).
    ``loads``: (plan, eviction) -> loads, in order of preference."""
    if not loads:
        raise ValueError("no candidate plan to pick from")
    order = list(loads)
    return min(order, key=lambda c: (loads[c], order.index(c)))


def _proxy_scale(space: PairSpace, leaf: int, host_items: int, n_tiles: int,
                 spare_tiles: int) -> float | None:
    """How much to shrink a run too big to simulate (1: not at all), or None for spaces that
    cannot be shrunk (pair lists). The proxy keeps at least max(16, 4 x the tiles under way on
    a node) leaf blocks in its host tier: below that a stripe no longer fits beside the tiles
    under way, and a proxy of a few blocks ranked the plans in the opposite order of the run."""
    if not isinstance(space, (Triangle, Rectangle)):
        return None
    blocks = max(1.0, host_items / leaf)
    return min(1.0, max(math.sqrt(MAX_SIM_TILES / n_tiles), max(16, 4 * spare_tiles) / blocks))


def _one_item_a_cell(space: PairSpace, items: ItemMap) -> bool:
    """Is ``items`` the map the leaf-block grid stands for: a triangle's rows and columns the
    same items in the same order, or a rectangle's rows and columns items of their own (a
    query set inside its database shares items, which the grid would load twice)?"""
    if isinstance(space, Triangle):
        return np.array_equal(items.row_items, items.col_items)
    if isinstance(space, Rectangle):
        return not np.intersect1d(items.row_items, items.col_items).size
    return False


def _proxy(space: PairSpace, leaf: int, host_items: int, l1_items: int, f: float):
    """A smaller run with the same shape: the leaf grid with one item per leaf block, every side
    scaled by ``f``, the host tier and L1 in blocks scaled alike (L1 not below its blocks). The
    host tier counts the whole blocks it holds: 190 items hold 4 blocks of 40, and a grid that
    gave it 5 had room for a stripe the items have not (its choice loaded 1.42x the best)."""
    def scaled(n: int) -> int:
        return max(2, round(math.ceil(n / leaf) * f))
    small = Triangle(scaled(space.n)) if isinstance(space, Triangle) else \
        Rectangle(scaled(space.n_rows), scaled(space.n_cols))
    host = max(1, math.floor(host_items / leaf * f + 1e-9))
    return small, host, max(1, math.ceil(l1_items / leaf))


def choose_plan(space: PairSpace, leaf: int, host_items: int, *, items: ItemMap,
                tiles: Sequence[Tile] | None = None, actors_per_node: int = 1, nodes: int = 1,
                in_flight: int = 1, l1_items: int | None = None, window: int = 8,
                plan: str = "auto", eviction: str = "auto", weighted: bool = False,
                l3: bool = False) -> PlanChoice:
    """Simulate every candidate (``candidates``) for this run and pick the fewest loads
    (``l3``: the nodes share their host tiers and the run is dealt to them as with L3).

    Nothing is simulated when there is one candidate, or when the host tier holds every item
    (each item is then loaded once, whatever the order)."""
    cands = candidates(plan, eviction, weighted)
    if len(cands) == 1:
        return PlanChoice(*cands[0], note="as configured")
    if host_items >= items.n_items:
        return PlanChoice(*cands[0], note="the host tier holds every item: any plan loads "
                                          "each item once")
    tiles = leaves(space, leaf) if tiles is None else list(tiles)
    l1 = device_cache_items(leaf, in_flight, l1_items)
    kw = dict(actors_per_node=actors_per_node, nodes=nodes, in_flight=in_flight, window=window,
              l3=l3 and nodes > 1, deal=l3 and nodes > 1)
    note = ""
    f = 1.0
    if len(tiles) > MAX_SIM_TILES:
        f = None if weighted else _proxy_scale(space, leaf, host_items, len(tiles),
                                               actors_per_node * in_flight)
        simulated = len(tiles) * f * f if f is not None else math.inf
        if simulated > MAX_PROXY_TILES:
            return PlanChoice(*cands[0], note=f"{len(tiles)} tiles: too many to simulate")
    on_blocks = f < 1.0 or (not weighted and leaf > 1 and _one_item_a_cell(space, items)
                            and len(tiles) * 2 * leaf > MAX_SIM_VISITS)
    if not on_blocks:
        runs = {c: simulate(space, leaf, host_items, items=items, tiles=tiles, l1_items=l1,
                            plan=c[0], eviction=c[1], **kw) for c in cands}
        given = dict(leaf=leaf, host_items=host_items, l1_items=l1)
    else:
        small, host, l1_small = _proxy(space, leaf, host_items, l1, f)
        runs = {c: simulate(small, 1, host, l1_items=l1_small, plan=c[0], eviction=c[1], **kw)
                for c in cands}
        note = (f"simulated on a {small.n_rows} x {small.n_cols} grid of leaf blocks "
                f"with {host} in the host tier")
        given = dict(leaf=1, host_items=host, l1_items=l1_small, grid=small.describe())
    best = pick({c: r.loads for c, r in runs.items()})
    given.update(actors_per_node=actors_per_node, nodes=nodes, in_flight=in_flight,
                 window=window)
    return PlanChoice(*best, simulated={f"{p}/{e}": round(r.R, 4) for (p, e), r in runs.items()},
                      note=note, simulated_with=given)
