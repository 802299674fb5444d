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
import heapq
import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from ..cache.directory import DirectoryShard, shard_of
from .drift import Timing  # noqa: F401 (the simulator's clock; re-exported)
from ..cache.tiers import BudgetCache, device_cache_items
from ..items import ItemMap
from ..cache.eviction import make_eviction
from .choice import (BASELINE, DEAL_ROOMS, SHARE_MODES, TIMED_SEEDS,  # noqa: F401 (re-exported)
                     PlanChoice, _deal_arg, candidates, pick, share_modes)
from .policy import TilePolicy, make_plan
from .stealing import Pace, contiguous_shares, deal as deal_shares, stripe_starts
from ..space import PairSpace, Rectangle, Tile, TileArray, Triangle, leaves


CURVE_STEPS = 20  # SimResult.curve: R after each twentieth of the tiles (stealing.Course)


@dataclass
class SimResult:
    loads: int
    n_items: int
    l1_hits: int
    l2_hits: int
    tiles: int
    pairs: int
    l3_hits: list = field(default_factory=list)  # per hop: items taken from a peer's L2
    curve: list = field(default_factory=list)  # R after each of CURVE_STEPS equal steps of tiles

    @property
    def R(self) -> float:
        return self.loads / max(1, self.n_items)


def simulate(space: PairSpace, leaf: int, host_items: int, *, items: ItemMap | None = None,
             actors_per_node: int = 1, nodes: int = 1, l1_items: int | None = None,
             in_flight: int = 1, plan: str = "stripe", eviction: str = "next_use",
             window: int = 8, tiles: Sequence[Tile] | None = None, l3: bool = False,
             l3_hops: int = 1, deal: bool | str = False,
             timing: Timing | None = None, pace: bool | int | None = None,
             room: int | None = None) -> SimResult:
    """Count item loads for one run of ``space`` with ``host_items`` items per node's L2
    (``tiles``: the run's own, when they are not the plain leaves, e.g. cut by pair weights).

    ``l3``: an L2 miss first asks the directory (``directory.DirectoryShard``, item i on shard
    i mod nodes) for the ``l3_hops`` latest holders and takes the item from the first that still
    holds it (a hit at that hop, not a load). What enters an L2 is the same either way, so the
    tiles dealt are too: with L3, loads + L3 hits = the loads without it.

    ``deal``: the run is dealt to the nodes as the hierarchical scheduler deals it
    (``stealing.deal``: contiguous runs of the plan, or with L3 stripes as wide as every host tier
    together; ``deal="contiguous"``: always the former, ``"stripes"``: contiguous runs cut where
    the plan's stripes begin), each share handed out by a
    ``TilePolicy`` of its own (without stealing), instead of one plan every node pulls from.

    ``timing``: actors take tiles when their own clock says they are free (``Timing``: each
    tile's compare, loads, L3 asks and takes, times a wandering speed), not in turn; what a
    peer holds is what it holds at that moment, so the nodes' drift costs what it costs.

    ``pace``: with dealt shares, a node takes no tile of its share more than ``pace`` tiles
    (True: one streamed column's, ``StripePlan.deal_rows``) ahead of the peer least far along its own (``stealing.Pace``, as the head grants them):
    the drift stays inside the stripe's room (``room``: leaves kept for streamed columns beside
    each node's dealt rows, ``StripePlan.deal_room``)."""
    if items is None:
        items = ItemMap.shared(space.n_rows) if space.symmetric else \
            ItemMap.disjoint(space.n_rows, space.n_cols)
    tiles = leaves(space, leaf) if tiles is None else list(tiles)
    n_actors = actors_per_node * nodes
    spare = actors_per_node * in_flight
    planner = make_plan(plan, host_items, spare)
    order = planner.order(tiles, items)
    pacer = None
    if deal and nodes > 1:
        dealt = deal is True and deal_shares(planner, tiles, items, nodes, l3, room)
        if dealt and pace:
            # pace=True: a lead of one streamed column, the rows each node keeps
            pacer = Pace(planner.deal_rows(tiles, items, room) if pace is True else pace)
            left = {m: len(share) for m, share in enumerate(dealt)}
        shares = dealt or contiguous_shares(
            order, nodes, stripe_starts(planner, tiles, items) if deal == "stripes" else ())
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
    count = {"loads": 0, "l1": 0, "l2": 0, "pairs": 0, "done": 0}
    curve: list = []

    def step(a: int):
        """Actor ``a`` takes its next tile: its (pairs, loads, asks, takes), or None: done."""
        node = a // actors_per_node
        policy = policies[node]
        if pacer is not None and not pacer.allowed(node, left):
            return False
        if len(running[a]) >= in_flight:
            _finish(running[a].popleft(), l1[a], l2[node], policy)
        t = policy.next_tile(l1[a], l2[node])
        if t is not None and pacer is not None:
            pacer.took(node)
            left[node] -= 1
        if t is None:
            while running[a]:
                _finish(running[a].popleft(), l1[a], l2[node], policy)
            return None
        taken = sum(l3_hits)
        got = _acquire(policy.tile_items[t], l1[a], l2[node],
                       None if shards is None else (node, l2, shards, l3_hits))
        count["loads"] += got[0]
        count["l1"] += got[1]
        count["l2"] += got[2]
        running[a].append(t)
        count["pairs"] += policy.tiles[t].pairs
        count["done"] += 1
        while len(curve) < CURVE_STEPS and \
                count["done"] * CURVE_STEPS >= (len(curve) + 1) * len(tiles):
            curve.append(round(count["loads"] / max(1, items.n_items), 4))
        takes = sum(l3_hits) - taken
        misses = len(policy.tile_items[t]) - got[1] - got[2]
        return policy.tiles[t].pairs, got[0], int(shards is not None and misses > 0), takes

    if timing is None:  # lockstep: one tile each in turn
        finished = [False] * n_actors
        while not all(finished):
            for a in range(n_actors):
                if not finished[a] and step(a) is None:
                    finished[a] = True
    else:  # each actor when its clock says it is free
        speed = timing.noise(n_actors)
        clock = [(0.0, a) for a in range(n_actors)]
        held: list = []  # paced actors: they ask again when another actor takes a tile
        while clock:
            now, a = heapq.heappop(clock)
            cost = step(a)
            if cost is False:
                held.append(a)
                continue
            if cost is not None:
                heapq.heappush(clock, (now + timing.tile_s(*cost) * speed(a), a))
            for b in held:
                heapq.heappush(clock, (now, b))
            held.clear()
    return SimResult(count["loads"], items.n_items, count["l1"], count["l2"], count["done"],
                     count["pairs"], l3_hits if shards is not None else [], curve)


def _from_peer(it: int, l3) -> bool:
    """L3: is the item in the L2 of one of its directory's candidates (counted per hop)?
    A tile's items are acquired in one step here, so the node that loads an item is listed
    before any other node asks for it: what the cluster does through the directory's claims
    (``DirectoryShard.lookup``: the first asker of an item no one holds is listed, the others
    wait for its load). Without them nodes asking together each loaded the item, which this
    model could not see (issue 57: the grid's tier-4 cells ran 1.3-2.0x their simulation)."""
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

# a run with more tiles is simulated on a smaller copy of its leaf grid (``_proxy``), as far as
# that keeps its stripes (``_proxy_scale``): the simulation is paid before the run starts
MAX_SIM_TILES = 1500
# a run whose tiles hold more items than this in all (tiles x a tile's items) is simulated on its
# grid of leaf blocks, one item per block (``_proxy`` at full scale). Rule: past this bound an
# item-by-item simulation costs seconds before the run starts, and a block's items travel
# together, so the grid chooses the items' own plan or one within 5 % of its R (measured:
# RESULTS.md, "Planner", part (c))
MAX_SIM_VISITS = 60_000
# past this many simulated tiles (a proxy that must stay large to keep its stripes) the choice
# would cost seconds: such a run has a host tier of >= 16 leaf blocks or many tiles per block,
# where the stripe plan's model holds, and it runs the first candidate unsimulated
MAX_PROXY_TILES = 4 * MAX_SIM_TILES


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
    host tier counts the whole blocks it holds: 190 items hold 4 blocks of 40, not 5 (a grid
    with room for a stripe the items have not chooses a plan that loads more)."""
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
                l3: bool = False, frontiers: bool | None = None,
                timing: Timing | None = None) -> PlanChoice:
    """Simulate every candidate (``candidates``) for this run and pick the fewest loads
    (``l3``: the nodes share their host tiers; ``frontiers``: node frontiers hand out each
    node's share, by default when ``l3``).

    On several nodes with frontiers each way of sharing the run (``share_modes``: with L3,
    stripes dealt across the cluster or contiguous shares) is simulated for every candidate in
    lockstep, and, given ``timing``, each way's best again with the nodes drifting apart as
    they do on a cluster (``Timing``, averaged over ``TIMED_SEEDS``); the way of least R runs,
    so a plan that only wins in lockstep is not chosen (issue 57; measured: RESULTS.md,
    "Scaling grid"). One node at the same host tier is simulated too (``one_node_R``: what
    the cluster must not exceed).

    Nothing is simulated when there is one candidate and one way of sharing, or when the host
    tier holds every item (each item is then loaded once, whatever the order)."""
    cands = candidates(plan, eviction, weighted)
    frontiers = l3 if frontiers is None else frontiers
    modes = share_modes(nodes, l3 and nodes > 1, frontiers)
    if weighted or plan not in ("auto", "stripe"):  # only the stripe plan deals
        modes = [m for m in modes if m != "dealt"] or modes
    first = modes[-1] if nodes > 1 and frontiers else modes[0]
    if len(cands) == 1 and len(modes) == 1:
        return PlanChoice(*cands[0], note="as configured", shares=first)
    if host_items >= items.n_items:
        return PlanChoice(*cands[0], note="the host tier holds every item: any plan loads "
                                          "each item once", shares=first)
    # columns of ints (space.TileArray): a run of 10^6 tiles is not copied into Tile objects
    # to find that it is simulated on a proxy, or not at all
    tiles = leaves(space, leaf) if tiles is None else TileArray.of(tiles)
    l1 = device_cache_items(leaf, in_flight, l1_items)
    kw = dict(actors_per_node=actors_per_node, nodes=nodes, in_flight=in_flight, window=window,
              l3=l3 and nodes > 1)
    note = ""
    f = 1.0
    if len(tiles) > MAX_SIM_TILES:
        f = None if weighted else _proxy_scale(space, leaf, host_items, len(tiles),
                                               actors_per_node * in_flight)
        simulated = len(tiles) * f * f if f is not None else math.inf
        if simulated > MAX_PROXY_TILES:
            return PlanChoice(*cands[0], note=f"{len(tiles)} tiles: too many to simulate",
                              shares=first)
    on_blocks = f < 1.0 or (not weighted and leaf > 1 and _one_item_a_cell(space, items)
                            and len(tiles) * 2 * leaf > MAX_SIM_VISITS)
    if not on_blocks:
        def sim(c, mode, **more):
            return simulate(space, leaf, host_items, items=items, tiles=tiles, l1_items=l1,
                            plan=c[0], eviction=c[1], deal=_deal_arg(mode), **{**kw, **more})
        given = dict(leaf=leaf, host_items=host_items, l1_items=l1)
    else:
        small, host, l1_small = _proxy(space, leaf, host_items, l1, f)
        if timing is not None:  # a block is a leaf of items: its loads and pairs scale
            timing = replace(timing, t_pair=timing.t_pair * leaf * leaf,
                             t_load=timing.t_load * leaf, t_take=timing.t_take * leaf)

        def sim(c, mode, **more):
            return simulate(small, 1, host, l1_items=l1_small, plan=c[0], eviction=c[1],
                            deal=_deal_arg(mode), **{**kw, **more})
        note = (f"simulated on a {small.n_rows} x {small.n_cols} grid of leaf blocks "
                f"with {host} in the host tier")
        given = dict(leaf=1, host_items=host, l1_items=l1_small, grid=small.describe())
    given.update(actors_per_node=actors_per_node, nodes=nodes, in_flight=in_flight,
                 window=window)
    runs = {m: {c: sim(c, m) for c in cands if m != "dealt" or c[0] == "stripe"}
            for m in modes}
    best = {m: pick({c: r.loads for c, r in rm.items()}) for m, rm in runs.items()}
    timed, curves = {}, {m: runs[m][best[m]].curve for m in modes}
    paced: dict = {}
    if timing is not None and nodes > 1 and l3:
        for m in modes:
            ways = [{}] if m != "dealt" else [dict(pace=True, room=r) for r in DEAL_ROOMS]
            for way in ways:
                rs = [sim(best[m], m, timing=replace(timing, seed=k), **way)
                      for k in range(TIMED_SEEDS)]
                R = sum(r.R for r in rs) / len(rs)
                if m not in timed or R < timed[m]:
                    timed[m] = R
                    curves[m] = [round(sum(c) / len(c), 4) for c in zip(*(r.curve for r in rs))]
                    if way:  # the run's own lead: one column of its rows, in its tiles
                        lead = make_plan(best[m][0], host_items, actors_per_node * in_flight) \
                            .deal_rows(tiles, items, way["room"])
                        paced = {"room": way["room"], "pace": lead}
    cuts = "equal"
    if "contiguous" in modes and best["contiguous"][0] == "stripe":
        # contiguous runs cut where stripes begin (no stripe's rows loaded by two nodes), or
        # in equal runs (the triangle's stripes are unequal: cut at them, the shares are too,
        # and steals split stripes anyway): whichever the simulation finds loads less
        c = best["contiguous"]
        alt = sim(c, "stripes")
        if "contiguous" in timed:
            alt_timed = [sim(c, "stripes", timing=replace(timing, seed=k))
                         for k in range(TIMED_SEEDS)]
            alt_R = sum(r.R for r in alt_timed) / len(alt_timed)
        else:
            alt_timed, alt_R = [alt], alt.R
        if alt_R < timed.get("contiguous", runs["contiguous"][c].R):
            cuts = "stripes"
            runs["contiguous"][c] = alt
            curves["contiguous"] = [round(sum(v) / len(v), 4)
                                    for v in zip(*(r.curve for r in alt_timed))]
            if "contiguous" in timed:
                timed["contiguous"] = alt_R
    score = {m: timed.get(m, runs[m][best[m]].R) for m in modes}
    mode = min(modes, key=lambda m: (round(score[m], 9), modes.index(m)))
    one_R = None
    if nodes > 1:  # one node with this host tier, running either way's best candidate
        one_R = round(min(sim(c, "one", nodes=1, l3=False).R for c in set(best.values())), 4)
    info = {m: {"candidate": "/".join(best[m]), "R": round(score[m], 4),
                "lockstep_R": round(runs[m][best[m]].R, 4), "timed": m in timed,
                "curve": curves[m], **({"cuts": cuts} if m == "contiguous" else {}),
                **(paced if m == "dealt" else {})}
            for m in modes} if nodes > 1 else {}
    return PlanChoice(*best[mode], simulated={f"{p}/{e}": round(r.R, 4)
                                              for (p, e), r in runs[mode].items()},
                      note=note, shares=mode, modes=info, one_node_R=one_R,
                      simulated_with=given)
