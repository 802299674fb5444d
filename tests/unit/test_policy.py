"""The scheduling and eviction policy, by simulated load counts (no Ray)."""
import numpy as np
import pytest

from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.cache.eviction import LRUEviction, NextUseEviction
from pairflow.engine.pairs.plan.policy import (StripePlan, TilePolicy, ZOrderPlan, bound_R,
                                               largest_first, read_ahead)
from pairflow.engine.pairs.plan.simulate import simulate
from pairflow.engine.pairs.space import Rectangle, Triangle, leaves


@pytest.mark.parametrize("plan", [StripePlan(10, 2), StripePlan(None), ZOrderPlan()])
def test_plans_list_every_tile_once(plan):
    tiles = leaves(Triangle(37), 3)
    order = plan.order(tiles, ItemMap.shared(37))
    assert sorted(order) == list(range(len(tiles)))


@pytest.mark.parametrize("fraction", [0.05, 0.10, 0.25, 0.50])
def test_planned_R_approaches_the_model(fraction):
    n = 400
    s = int(fraction * n)
    planned = simulate(Triangle(n), 2, s, plan="stripe", eviction="next_use")
    baseline = simulate(Triangle(n), 2, s, plan="zorder", eviction="lru")
    model = 1 + n / (2 * s)
    assert planned.R <= 1.1 * model, (planned.R, model)
    assert planned.R < baseline.R, "the plan must beat Z-order with LRU"
    assert planned.pairs == n * (n - 1) // 2


@pytest.mark.parametrize("n,s,leaf,in_flight", [(120, 6, 1, 1), (120, 6, 1, 2), (120, 12, 2, 2),
                                                (400, 20, 4, 2)])
def test_small_host_tiers_keep_most_of_the_stripe(n, s, leaf, in_flight):
    """Two actors' tiles under way run down one streamed column together, so the stripe keeps
    all but ceil(tiles under way / rows) leaves of the host tier. Reserving a leaf per tile
    under way (the earlier rule) left 4 of 6 items for the stripe at S = 5 % and gave R =
    14.78 = 1.34x the model on the first case, 2.55x on the second, 4.0x on the last. With the
    host tier only 5 leaves deep, a straddled column still costs a reload now and then: within
    1.15x here (the benchmark's real runs at n = 120 land within 1.1x)."""
    r = simulate(Triangle(n), leaf, s, actors_per_node=2, in_flight=in_flight)
    assert r.R <= 1.15 * (1 + n / (2 * s)), r.R


def test_everything_cached_loads_each_item_once():
    r = simulate(Triangle(60), 4, 60, actors_per_node=2, in_flight=2)
    assert r.loads == 60 and r.R == 1.0


def test_rectangle_stripes_the_smaller_side():
    # 5 queries against 300 targets, cache of 50: keep the queries resident, stream targets once
    r = simulate(Rectangle(5, 300), 1, 50, plan="stripe", eviction="next_use")
    assert r.loads == 305


def test_policy_prefers_tiles_already_in_l1():
    tiles = leaves(Triangle(8), 2)
    items = ItemMap.shared(8)
    pol = TilePolicy(tiles, items, ZOrderPlan().order(tiles, items), window=len(tiles))
    first = pol.next_tile()
    assert first == 0
    # an actor holding items 6 and 7 gets the tile made only of them
    t = pol.next_tile(l1=[6, 7])
    assert (tiles[t].r0, tiles[t].c0) == (6, 6)


def test_next_use_orders_eviction():
    tiles = leaves(Triangle(6), 1)
    items = ItemMap.shared(6)
    order = ZOrderPlan().order(tiles, items)
    pol = TilePolicy(tiles, items, order)
    for _ in range(len(tiles) - 1):
        pol.complete(pol.next_tile())
    uses = pol.next_uses(range(6))
    last = tiles[order[-1]]
    needed = {last.r0, last.c0}
    assert all(np.isinf(uses[i]) == (i not in needed) for i in range(6))
    ev = NextUseEviction(pol.next_uses)
    victims = ev.victims([last.r0, 0 if last.r0 else 1])
    assert victims[0] != last.r0, "an item with no pending pair is evicted first"
    assert LRUEviction().victims([3, 1, 2]) == [3, 1, 2]


def test_requeue_puts_a_lost_tile_back():
    tiles = leaves(Triangle(5), 1)
    items = ItemMap.shared(5)
    pol = TilePolicy(tiles, items, ZOrderPlan().order(tiles, items))
    t = pol.next_tile()
    pol.requeue(t)
    assert pol.next_tile() == t


def test_bound():
    assert bound_R(100, 25) == 3.0
    assert bound_R(100, 100) == 1.0


def test_endgame_hands_the_last_tiles_only_to_actors_with_nothing_running():
    space = Triangle(8)
    tiles = leaves(space, 2)
    items = ItemMap.shared(8)
    pol = TilePolicy(tiles, items, list(range(len(tiles))))
    actors = 2
    while pol.pending() > actors:
        assert not pol.hold_back(actors, running=1)  # early on, prefetch a second tile
        pol.next_tile()
    assert pol.pending() == actors
    assert pol.hold_back(actors, running=1)       # a busy actor waits ...
    assert not pol.hold_back(actors, running=0)   # ... an idle one gets the tile
    while pol.pending():
        pol.next_tile()
    assert pol.hold_back(actors, running=1)       # nothing left: no prefetch either


def test_endgame_counts_only_tiles_a_device_still_has_to_compute(tmp_path):
    """A tile whose compute is done and whose write is under way does not hold its device:
    an actor saying so (``busy=0``) gets one of the last tiles at once instead of idling
    through the write and the completion's round trip; without the count the scheduler counts
    every tile the actor has not completed."""
    from pairflow.engine.pairs.plan.scheduler import Scheduler
    tiles = [t.to_dict() for t in leaves(Triangle(8), 2)]  # 4 x 5 / 2 = 10 tiles
    sch = Scheduler(str(tmp_path), tiles, list(range(8)), list(range(8)),
                    list(range(len(tiles))), journal=False)
    handed = [sch.request(a, "node-0")["tile"] for a in ("a", "b") * 4]  # 8 out, 2 pending
    assert len(set(handed)) == 8
    assert sch.request("a", "node-0") == {"wait": 0.05}           # a's tiles: not completed
    assert sch.request("a", "node-0", busy=1) == {"wait": 0.05}   # one still computing
    assert "tile" in sch.request("a", "node-0", busy=0)           # only writes under way
    done = sch.complete_and_request("b", handed[1], [], None, "node-0", busy=1)
    assert done == {"wait": 0.05}  # b's other tile computes: the last tile waits for a device


def test_read_ahead_lists_each_needed_item_once_in_first_use_order():
    # hand-made: three tiles over items 0..5, visited 2, 0, 1; tile 1 is done already
    tile_items = [(0, 1, 2), (2, 3), (4, 5, 0)]
    assert read_ahead(tile_items, [2, 0, 1]) == [4, 5, 0, 1, 2, 3]
    assert read_ahead(tile_items, [2, 0, 1], done=[1]) == [4, 5, 0, 1, 2]
    assert read_ahead(tile_items, [2, 0, 1], done=[0, 1, 2]) == []
    # a real plan: every item of a triangle once, and the first tile's items first
    space, items = Triangle(40), ItemMap.shared(40)
    tiles = leaves(space, 6)
    order = StripePlan(12).order(tiles, items)
    got = read_ahead([items.tile_items(t) for t in tiles], order)
    assert sorted(got) == list(range(40))
    first = sorted(int(i) for i in items.tile_items(tiles[order[0]]))
    assert sorted(got[:len(first)]) == first


def test_largest_first_ends_on_the_smallest_tiles_keeping_the_plan_among_equals():
    space, items = Triangle(12), ItemMap.shared(12)
    tiles = leaves(space, 3)  # 4 diagonal tiles of 3 pairs, 6 off-diagonal ones of 9
    order = StripePlan(12).order(tiles, items)
    got = largest_first(tiles, order)
    assert sorted(got) == sorted(order)
    assert [tiles[t].pairs for t in got] == [9] * 6 + [3] * 4
    assert [t for t in got if tiles[t].pairs == 9] == [t for t in order if tiles[t].pairs == 9]


def test_a_host_tier_holding_every_item_plans_the_largest_tiles_first():
    from pairflow.engine.pairs.config import AllPairsConfig
    from pairflow.engine.pairs.plan.sizing import plan_run
    node = {"node_id": "n0", "address": "127.0.0.1", "head": True, "cpus": 2, "gpus": 0,
            "object_store": 2 ** 30}
    space = Triangle(30)
    measured = {"t_pair": 0.01, "t_parse": 0.0, "item_bytes": 1000.0}
    plan = plan_run(measured, space, None, [node], AllPairsConfig(leaf_items=5),
                    items=ItemMap.shared(30))
    sizes = [plan.tiles[t].pairs for t in plan.order]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    small = plan_run(measured, space, None, [node], AllPairsConfig(leaf_items=5,
                     host_cache_items=12), items=ItemMap.shared(30))
    assert [small.tiles[t].pairs for t in small.order] != sorted(
        (t.pairs for t in small.tiles), reverse=True)  # a small tier keeps the stripe order


def test_among_tiles_of_as_many_loads_the_larger_goes_first():
    space, items = Triangle(12), ItemMap.shared(12)
    tiles = leaves(space, 3)
    pol = TilePolicy(tiles, items, StripePlan(12).order(tiles, items), window=len(tiles))
    everything = set(range(12))
    diagonal = next(t for t in tiles if t.r0 == t.c0)
    # the actor's L1 holds a diagonal tile's items: still a tile of 9 pairs comes first
    got = [pol.next_tile(l1=set(range(diagonal.r0, diagonal.r1)), l2=everything)]
    got += [pol.next_tile(l2=everything) for _ in range(len(tiles) - 1)]
    assert [tiles[t].pairs for t in got] == [9] * 6 + [3] * 4
    # a tile needing fewer loads still wins over a larger one
    pol = TilePolicy(tiles, items, StripePlan(12).order(tiles, items), window=len(tiles))
    t = pol.next_tile(l1=[6, 7, 8])
    assert (tiles[t].r0, tiles[t].c0) == (6, 6)
