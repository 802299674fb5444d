"""Run sizing (engine/pairs/plan/sizing.py), pure: tile size, budgets, deadlines and the weighted
budget, each checked against a hand-computed case, without Ray."""
import math

import numpy as np
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.plan.simulate import simulate
from pairflow.engine.pairs.cache.tiers import device_cache_items
from pairflow.engine.pairs.plan.leaf import choose_leaf
from pairflow.engine.pairs.plan.sizing import (app_weights, plan_nodes, plan_run, validation_sample,
                                               weighted_budget, weighted_probe)
from pairflow.engine.pairs.space import PairWeights, Rectangle, Triangle, leaves


def test_weight_hook_sizes_tiles_from_the_probe():
    """The sizing's optional hook (no Ray started): the probe is a median pair, never the huge
    item; a tile may weigh target_tile_s of measured work, or 1/4 of an actor's share."""
    rows = np.array([100.0, 120, 150, 5e6])
    cols = np.array([90.0, 110, 300])
    keys_r, keys_c = [f"q{i}" for i in range(4)], [f"t{i}" for i in range(3)]
    sample, probe_w = weighted_probe(PairWeights(rows, cols), keys_r, keys_c)
    assert sample == ["q2", "t1"] and probe_w == ((150 + 110) / 2) ** 2

    space = Rectangle(4, 3)
    w = PairWeights(rows, cols)
    b = weighted_budget(w, space, t_pair=1e-5, probe_weight=1e4, target_s=0.05, n_actors=2)
    assert b["weight_per_s"] == pytest.approx(1e9)
    assert b["total_weight"] == pytest.approx(rows.sum() * cols.sum())
    share = b["total_weight"] / 2
    assert b["max_weight"] == pytest.approx(min(max(0.05 * 1e9, share / 64), share / 4))
    slow = weighted_budget(w, space, t_pair=10.0, probe_weight=1e4, target_s=0.05, n_actors=2)
    assert slow["max_weight"] == pytest.approx(share / 64)  # never thousands of tiny tiles
    # with a per-tile overhead the cost model sets the tile: t* = sqrt(2 * 0.02 * W), W = an
    # actor's share in probed seconds (here 1.25e9 / 1e9 = 1.25 s -> t* = 0.224 s)
    model = weighted_budget(w, space, t_pair=1e-5, probe_weight=1e4, target_s=0.05,
                            n_actors=2, overhead_s=0.02)
    t_star = (2 * 0.02 * share / 1e9) ** 0.5
    assert t_star > 0.05
    assert model["max_weight"] == pytest.approx(min(max(t_star * 1e9, share / 64), share / 4))

    class App:
        def pair_weights(self):
            return rows[:3], cols

    with pytest.raises(PairflowError, match="3 x 3 weights for a 4 x 3 space"):
        app_weights(App(), space)
    assert app_weights(object(), space) is None




NODE = {"node_id": "n0", "address": "127.0.0.1", "head": True, "cpus": 2, "gpus": 0,
        "object_store": 10_000}


def test_plan_run_hand_case():
    """Triangle(200) on one 2-CPU node whose object store holds 10,000 bytes, items of 100
    bytes: every number below is worked out by hand from the rules in sizing.py."""
    measured = {"t_pair": 0.001, "t_parse": 0.044, "item_bytes": 100.0}
    plan = plan_run(measured, Triangle(200), None, [NODE], AllPairsConfig(),
                    items=ItemMap.shared(200))
    assert [(n.actors, n.device, n.preprocess_on_host) for n in plan.nodes] == [(2, "cpu", True)]
    assert plan.host_bytes == 4000                      # 40 % of the store
    assert plan.host_items == plan.host_items_eff == 40  # 4000 // 100
    # the cost model alone gives 28 (test_leaf.py); a stripe of 4 blocks plus the 2 x 2 tiles
    # under way must fit 40 items: 40 // (4 + 4) = 5
    assert plan.leaf == 5
    assert plan.l1_items == 2 * 5 * (2 + 1)
    assert plan.l1_bytes == 3000 // 2                   # 30 % of the store over 2 actors
    assert plan.load_batch == 7                         # ceil(0.3 s / 0.044 s)
    assert plan.bound_R == pytest.approx(1 + 200 / (2 * 40))
    assert len(plan.tiles) == 40 + 40 * 39 // 2          # 40 blocks a side, triangle
    assert sum(t.pairs for t in plan.tiles) == 200 * 199 // 2
    assert sorted(plan.order) == list(range(len(plan.tiles)))
    assert plan.deadlines == [120.0] * len(plan.tiles)   # 20 x expected cost < the floor
    assert plan.plan == "stripe" and plan.warnings == ()
    assert plan.measured == measured


def test_leaf_counts_the_tiles_under_way_where_the_device_tier_holds_them():
    """The hand case above with device tiers of 6,000 bytes (60 items each, where 1,500 held
    15): each holds its 2 tiles under way and one more, 2 x 10 x 3 = 60 items, so the host
    tier keeps only the stripe, 40 // 4 = 10. With 15 items (above) an L1 holds 3 tiles of 2 a
    side, fewer than the 40 // (4 + 4) = 5 of a host tier that keeps the tiles under way beside
    the stripe: 5."""
    measured = {"t_pair": 0.001, "t_parse": 0.044, "item_bytes": 100.0}
    plan = plan_run(measured, Triangle(200), None, [NODE],
                    AllPairsConfig(device_cache_bytes=6000), items=ItemMap.shared(200))
    assert plan.leaf == 10 and plan.l1_bytes == 6000
    # one byte less: 59 items hold 3 tiles of 59 // 6 = 9 a side, which cuts 200 into 23
    # blocks of ceil(200 / 23) = 9; the L1's item count binds as its bytes do
    assert plan_run(measured, Triangle(200), None, [NODE],
                    AllPairsConfig(device_cache_bytes=5999), items=ItemMap.shared(200)).leaf == 9
    assert plan_run(measured, Triangle(200), None, [NODE],
                    AllPairsConfig(device_cache_bytes=6000, device_cache_items=59),
                    items=ItemMap.shared(200)).leaf == 9
    # and so in choose_leaf: max(40 // 8, min(40 // 4, 60 // (2 x 3)))
    assert choose_leaf(0.001, Triangle(200), host_items=40, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02,
                       device_items=60, in_flight=2) == 10


def test_a_host_tier_short_of_items_takes_the_leaf_of_least_modelled_time():
    """The hand case's host tier of 40 items, with L1s of 12,000 bytes (120 items): the
    stripe rule gives max(40 // 8, min(40 // 4, 120 // 6)) = 10; the cost model 29 (first
    test), a tile of 2 x 20 fills the host tier, so the candidates are 10 and 20. Each is
    simulated and timed by hand: 20 blocks make 210 tiles, 10 blocks 55;
    10: (2.65 x 200 x 0.044 + 19.9 + 210 x 0.02) / 2 + 100 x 0.001 / 2 = 23.76 s;
    20: (1.00 x 200 x 0.044 + 19.9 + 55 x 0.02) / 2 + 400 x 0.001 / 2 = 15.1 s."""
    measured = {"t_pair": 0.001, "t_parse": 0.044, "item_bytes": 100.0}
    plan = plan_run(measured, Triangle(200), None, [NODE],
                    AllPairsConfig(device_cache_bytes=12_000), items=ItemMap.shared(200))
    searched = plan.choice["leaf_search"]
    assert set(searched) == {"10", "20"}
    for leaf, blocks in ((10, 20), (20, 10)):
        tiles = blocks * (blocks + 1) // 2
        assert searched[str(leaf)]["modelled_s"] == pytest.approx(
            (searched[str(leaf)]["R"] * 200 * 0.044 + 19.9 + tiles * 0.02) / 2
            + leaf * leaf * 0.001 / 2, abs=1e-3)
    # two L1s of 2 x 20 x 3 = 120 items each hold every item between them
    assert searched["20"]["R"] == 1.0 and searched["10"]["R"] > 2
    assert plan.leaf == 20 and len(plan.tiles) == 55 and plan.l1_items == 120
    assert "leaf 20, modelled 15.1 s (vs 10 23.8 s)" in plan.choice["line"]
    # a leaf set, or a resumed one, is never searched
    for cfg, kw in ((AllPairsConfig(device_cache_bytes=12_000, leaf_items=10), {}),
                    (AllPairsConfig(device_cache_bytes=12_000), {"resume_leaf": 10})):
        kept = plan_run(measured, Triangle(200), None, [NODE], cfg, items=ItemMap.shared(200),
                        **kw)
        assert kept.leaf == 10 and "leaf_search" not in kept.choice


def test_plan_run_clamps_the_host_tier_and_keeps_a_resumed_leaf():
    cfg = AllPairsConfig(host_cache_bytes=8000, deadline_floor_s=0.0, deadline_factor=10.0)
    measured = {"t_pair": 0.001, "t_parse": 0.01, "item_bytes": 100.0}
    plan = plan_run(measured, Rectangle(6, 9), None, [NODE], cfg,
                    items=ItemMap.disjoint(6, 9), resume_leaf=4)
    assert plan.host_bytes == 7000 and "more than 70%" in plan.warnings[0]
    assert plan.leaf == 4
    for t, d in zip(plan.tiles, plan.deadlines):
        want = 10.0 * (0.001 * t.pairs + 0.01 * ((t.r1 - t.r0) + (t.c1 - t.c0)))
        assert d == pytest.approx(want)


def test_weighted_plan_uses_zorder_and_records_the_budget():
    rows, cols = np.array([100.0, 120, 150, 5e6]), np.array([90.0, 110, 300])
    w = PairWeights(rows, cols)
    measured = {"t_pair": 1e-5, "t_parse": 0.0, "item_bytes": 10.0}
    plan = plan_run(measured, Rectangle(4, 3), w, [NODE], AllPairsConfig(plan="stripe"),
                    items=ItemMap.disjoint(4, 3), probe_weight=1e4)
    assert plan.plan == "zorder" and "Z-order" in plan.warnings[-1]
    # the planner never proposes stripes for such tiles, so it has nothing to warn about
    auto = plan_run(measured, Rectangle(4, 3), w, [NODE], AllPairsConfig(),
                    items=ItemMap.disjoint(4, 3), probe_weight=1e4)
    assert auto.plan in ("zorder", "hilbert") and auto.warnings == ()
    budget = weighted_budget(w, Rectangle(4, 3), 1e-5, 1e4, 0.05, 2, 0.02, True)
    assert plan.measured == {**measured, **budget}
    assert "max_weight" not in measured  # the caller's measurements are left alone
    covered = np.zeros((4, 3), int)
    for t in plan.tiles:
        covered[t.r0:t.r1, t.c0:t.c1] += 1
    assert (covered == 1).all()


def test_one_l1_rule_for_driver_and_simulator():
    assert device_cache_items(5, 2) == 30
    assert device_cache_items(1, 1) == 4
    assert device_cache_items(5, 2, configured=7) == 7
    # the simulator takes the same default: with every item fitting its L1 and L2, each item
    # is loaded once
    assert simulate(Triangle(12), 3, 12, in_flight=2).R == 1.0


def test_plan_nodes_one_actor_per_cpu_or_gpu():
    gpu = {**NODE, "gpus": 1}
    auto = plan_nodes([NODE, gpu], AllPairsConfig())
    assert [(n.actors, n.device, n.preprocess_on_host) for n in auto] == \
        [(2, "cpu", True), (1, "cuda", False)]
    forced = plan_nodes([gpu], AllPairsConfig(devices="torch-cpu", actors_per_node=3,
                                              preprocess_on_host=False))
    assert [(n.actors, n.device, n.preprocess_on_host) for n in forced] == \
        [(3, "torch-cpu", False)]


def test_plan_nodes_mixed_gpu_and_cpu_actors_on_one_node():
    # 3 CPUs and 2 GPUs: one actor per GPU, one per CPU slot not feeding a GPU (3 - 2 = 1)
    node = {**NODE, "cpus": 3, "gpus": 2}
    (plan,) = plan_nodes([node], AllPairsConfig(devices="cuda,cpu"))
    assert plan.actors == 3 and [plan.device_of(d) for d in range(3)] == ["cuda", "cuda", "cpu"]
    assert plan.device == "cuda" and not plan.preprocess_on_host
    # a node without GPUs keeps one CPU actor per CPU; actors_per_node caps the CPU actors
    (cpu_only,) = plan_nodes([{**NODE, "cpus": 4}], AllPairsConfig(devices="cuda,torch-cpu",
                                                                  actors_per_node=2))
    assert [cpu_only.device_of(d) for d in range(cpu_only.actors)] == ["torch-cpu"] * 2
    with pytest.raises(PairflowError, match="one GPU device and one CPU device"):
        plan_nodes([node], AllPairsConfig(devices="cuda,cuda"))


def test_validation_sample_is_a_reproducible_fraction():
    pending = list(range(0, 50, 2))
    assert validation_sample(pending, 0.0, 0) == []
    got = validation_sample(pending, 0.1, seed=3)
    assert len(got) == math.ceil(0.1 * 25) and set(got) <= set(pending)
    assert got == sorted(got) == validation_sample(pending, 0.1, seed=3)
    assert validation_sample([4], 0.01, 0) == [4]


def test_a_resumed_weighted_plan_keeps_the_first_runs_tiles_whatever_it_would_cut_now():
    """The journal names tiles by id: a resume with another host tier (allowed) must work on
    the tiles the first run cut and split, not on the ones its own plan choice would cut."""
    rng = np.random.default_rng(3)
    rows, cols = rng.integers(50, 5000, 40).astype(float), rng.integers(50, 5000, 60).astype(float)
    w, space = PairWeights(rows, cols), Rectangle(40, 60)
    measured = {"t_pair": 1e-6, "t_parse": 0.0, "item_bytes": 10.0}
    kw = dict(items=ItemMap.disjoint(40, 60), probe_weight=1e5)
    first = plan_run(measured, space, w, [NODE], AllPairsConfig(host_cache_items=12), **kw)
    planned = [first.tiles[i].to_dict() for i in first.order]  # what tiles.json holds
    fresh = plan_run(first.measured, space, w, [NODE], AllPairsConfig(host_cache_items=100),
                     items=kw["items"], resume_leaf=first.leaf)
    resumed = plan_run(first.measured, space, w, [NODE], AllPairsConfig(host_cache_items=100),
                       items=kw["items"], resume_leaf=first.leaf, resume_tiles=planned)
    assert [t.to_dict() for t in resumed.tiles] == [t.to_dict() for t in first.tiles]
    assert resumed.order == list(first.order)
    assert len(resumed.deadlines) == len(first.tiles)
    # the case the saved plan is for: re-planned, the same tile ids would name other pairs
    assert [t.to_dict() for t in fresh.tiles] != [t.to_dict() for t in first.tiles]


def test_load_batch_hand_cases():
    from pairflow.engine.pairs.plan.sizing import LOAD_BATCH_MAX, load_batch
    cfg = AllPairsConfig()
    assert load_batch(cfg, 0.044) == 7            # ceil(0.3 s / 0.044 s)
    assert load_batch(cfg, 0.5) == 1              # a slow parse: one item a task
    assert load_batch(cfg, 1e-3) == 300           # 0.3 s of 1 ms parses
    assert load_batch(cfg, 2e-6) == LOAD_BATCH_MAX == 2048  # reads: capped, not 50,000
    assert load_batch(AllPairsConfig(load_batch=7), 2e-6) == 7


def test_with_l3_on_several_nodes_the_run_is_dealt_in_cluster_stripes():
    """``cache.l3`` with more than one node running actors: each node gets its share
    (``StripePlan.deal``), the run's order interleaves them, and a resume names the same blocks
    by the first run's tile ids."""
    from pairflow.engine.pairs.plan.policy import StripePlan, interleave
    from pairflow.engine.pairs.space import leaves
    nodes = [dict(NODE, node_id="head", cpus=0)] + \
        [dict(NODE, node_id=f"w{i}", head=False, cpus=1) for i in range(3)]
    measured = {"t_pair": 0.001, "t_parse": 0.01, "item_bytes": 100.0}
    # a host tier of 10 leaves: each node's stripe is 7 of them, room to drift (at 4 leaves it
    # is one leaf, and the planner chooses contiguous shares: test_simulate_drift.py)
    cfg = AllPairsConfig(l3=True, leaf_items=2, host_cache_items=20)
    plan = plan_run(measured, Triangle(60), None, nodes, cfg, items=ItemMap.shared(60))
    assert plan.plan == "stripe" and len(plan.shares) == 3   # the head runs no actor
    assert plan.choice["shares"] == "dealt"
    tiles = leaves(Triangle(60), 2)
    # spare tiles: one actor per node, two tiles under way each; the room for streamed
    # columns is the one the planner simulated and chose (a paced deal may keep less)
    room = plan.choice["room"]
    assert room in (1, 2, 3)
    assert plan.shares == StripePlan(20, 2).deal(tiles, ItemMap.shared(60), 3, room=room)
    assert plan.order == interleave(plan.shares)
    assert sorted(plan.order) == list(range(len(plan.tiles)))
    # off: contiguous runs of the one plan, cut where its stripes begin (n = 120: stripes of
    # 504, 423, 342, ... tiles; equal thirds would cut at 610 and 1220); on one node: none
    off = plan_run(measured, Triangle(120), None, nodes, AllPairsConfig(
        leaf_items=2, host_cache_items=20), items=ItemMap.shared(120))
    assert off.choice["shares"] == "contiguous" and [t for s in off.shares for t in s] == \
        off.order and len(off.shares) == 3
    starts = StripePlan(20, 2).stripe_starts(leaves(Triangle(120), 2), ItemMap.shared(120))
    assert starts[:3] == [0, 504, 927] and len(off.order) == 1830
    assert [len(s) for s in off.shares] == [504, 1269 - 504, 1830 - 1269]  # the nearest starts
    assert 1269 in starts
    assert plan_run(measured, Triangle(60), None, [NODE], cfg,
                    items=ItemMap.shared(60)).shares is None
    # a resume: the saved tiles (tiles.json, in the first run's order) keep their ids
    planned = [plan.tiles[i].to_dict() for i in plan.order]
    resumed = plan_run(plan.measured, Triangle(60), None, nodes, cfg, items=ItemMap.shared(60),
                       resume_leaf=plan.leaf, resume_tiles=planned)
    assert resumed.shares == plan.shares and resumed.order == plan.order


def test_packed_plan_hand_case():
    """The hand case above with an app that packs (``packable``): the same leaf, tiles and
    order (the plan is chosen over rows), and caches of packs of 5 rows: 40 packs, an L1 of
    the packs of the tiles under way and one more, loads in packs of 5 parses."""
    measured = {"t_pair": 0.001, "t_parse": 0.044, "item_bytes": 100.0}
    rows = plan_run(measured, Triangle(200), None, [NODE], AllPairsConfig(),
                    items=ItemMap.shared(200))
    plan = plan_run(measured, Triangle(200), None, [NODE], AllPairsConfig(),
                    items=ItemMap.shared(200), packable=True)
    assert plan.leaf == rows.leaf == 5 and plan.pack_rows == 5
    assert plan.tiles == rows.tiles and plan.order == rows.order and plan.plan == rows.plan
    assert plan.items.n_items == 40 and len(plan.pack_members) == 40
    assert plan.pack_members[3].tolist() == [15, 16, 17, 18, 19]
    assert plan.items.row_items[17] == 3 and plan.items.row_offsets[17] == 2
    assert plan.item_bytes == 500.0
    assert plan.l1_items == max(4, 2 * 1 * (2 + 1))      # a tile side is one pack
    assert plan.load_batch == 2                           # ceil(0.3 s / (5 * 0.044 s))
    # the host tier's 40 rows are 8 packs: R = 1 + 40 / (2 * 8)
    assert plan.l2_items == 8 and rows.l2_items == rows.host_items == 40
    assert plan.bound_R == pytest.approx(1 + 40 / (2 * 8))
    # pair weights cut tiles off the leaf grid: nothing is packed
    w = PairWeights(np.ones(200), np.ones(200))
    weighted = plan_run(measured, Triangle(200), w, [NODE], AllPairsConfig(),
                        items=ItemMap.shared(200), probe_weight=1.0, packable=True)
    assert weighted.pack_members is None and weighted.pack_rows == 1


def test_packed_map_hand_cases():
    """Rows and columns of two item sets packed on their own; rows of a tile side taken from
    the packs' values: one pack's slice, or slices of two joined (arrays or lists)."""
    m = ItemMap(np.array([0, 1, 2, 3, 4]), np.array([5, 6, 7]))
    packed, members = m.packed(2)
    assert packed.row_items.tolist() == [0, 0, 1, 1, 2]
    assert packed.row_offsets.tolist() == [0, 1, 0, 1, 0]
    assert packed.col_items.tolist() == [3, 3, 4] and packed.col_offsets.tolist() == [0, 1, 0]
    assert [x.tolist() for x in members] == [[0, 1], [2, 3], [4], [5, 6], [7]]
    values = {p: np.array([[10 * p + o] for o in range(2)]) for p in range(5)}
    one = packed.rows(values, "row", 2, 4)
    assert one.tolist() == [[10], [11]] and np.shares_memory(one, values[1])
    assert packed.rows(values, "row", 1, 5).tolist() == [[1], [10], [11], [20]]
    assert packed.rows(values, "col", 0, 3).tolist() == [[30], [31], [40]]
    lists = {p: [f"{p}.{o}" for o in range(2)] for p in range(5)}
    assert packed.rows(lists, "row", 1, 4) == ["0.1", "1.0", "1.1"]
    shared, members = ItemMap.shared(3).packed(2)
    assert shared.col_items.tolist() == shared.row_items.tolist() == [0, 0, 1]
    assert [x.tolist() for x in members] == [[0, 1], [2]]
    assert ItemMap.shared(3).rows({0: "a", 1: "b", 2: "c"}, "col", 1, 3) == ["b", "c"]
