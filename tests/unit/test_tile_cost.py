"""A tile's fixed cost (engine/pairs/plan/tile_cost.py) and its use in the leaf's time model
(sizing.plan_run, leaf.search_leaf), pure, without Ray: each figure worked out by hand."""
import os

import pytest

from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.plan.sizing import plan_run
from pairflow.engine.pairs.plan.tile_cost import overhead_s, run_tile_costs, tile_overhead
from pairflow.engine.pairs.preflight import measure_tile_io
from pairflow.engine.pairs.space import Triangle

NODE = {"node_id": "n0", "address": "127.0.0.1", "head": True, "cpus": 2, "gpus": 0,
        "object_store": 10_000}


def test_a_tiles_fixed_cost_is_its_executors_plus_its_measured_writes():
    """Ray 22 ms, in-process 5 ms, plus the probe's journal line and record; an executor
    not named costs what Ray does (the dearer)."""
    ray = tile_overhead("ray", 0.001)
    assert ray["tile_overhead_s"] == pytest.approx(0.023)
    assert ray["tile_costs"] == {"executor": "ray", "dispatch_s": 0.022, "io_s": 0.001}
    assert tile_overhead("inprocess", 0.0)["tile_overhead_s"] == pytest.approx(0.005)
    assert tile_overhead("elsewhere", 0.0)["tile_overhead_s"] == pytest.approx(0.022)
    assert tile_overhead("inprocess", -1.0)["tile_overhead_s"] == pytest.approx(0.005)
    # the plan's figure: configured, else measured, else 20 ms
    assert overhead_s({"tile_overhead_s": 0.005}, None) == 0.005
    assert overhead_s({"tile_overhead_s": 0.005}, 0.0) == 0.0
    assert overhead_s({}, None) == 0.02


def test_the_probe_times_a_tiles_writes_where_the_run_writes(tmp_path):
    took = measure_tile_io(str(tmp_path), reps=4)
    assert 0.0 < took < 1.0
    assert os.listdir(tmp_path) == []                 # its file is gone
    assert measure_tile_io(str(tmp_path / "missing")) == 0.0


def test_a_runs_tile_costs_hand_case():
    """Two actors: 3 tiles in 1.0 s with tiles under way, 1 tile in 0.6 s; 1.0 s comparing
    and 0.2 s postprocessing between them: 1.6 s over 4 tiles is 0.4 s a tile, of which
    (1.6 - 1.2) / 4 = 0.1 s no compare; 0.1 s writing and 0.04 s journaling per 4 tiles."""
    actors = {"a": {"tiles": 3, "busy_s": 1.0}, "b": {"tiles": 1, "busy_s": 0.6}}
    stages = {"compare": 1.0, "postprocess": 0.2, "write": 0.1, "load": 5.0}
    got = run_tile_costs(actors, stages, 0.005, journal_s=0.04)
    assert got["tiles"] == 4
    assert got["tile_seconds"] == pytest.approx(0.4)
    assert got["per_tile_overhead_s"] == pytest.approx(0.1)
    assert got["overhead_share"] == pytest.approx(0.25)
    assert got["modelled_overhead_s"] == 0.005
    assert got["write_s_per_tile"] == pytest.approx(0.025)
    assert got["journal_s_per_tile"] == pytest.approx(0.01)
    # compares longer than the busy time (validation's recomputes): no negative overhead
    assert run_tile_costs(actors, {"compare": 2.0}, None)["per_tile_overhead_s"] == 0.0
    assert run_tile_costs({}, stages, 0.02)["per_tile_overhead_s"] is None


def test_the_leaf_follows_the_executors_fixed_cost():
    """Triangle(200) on two CPU actors, a host tier of every item: an actor's share is
    W = (200 x 0.044 + 19,900 x 0.001) / 2 = 14.35 s, a tile is aimed at sqrt(2 o W).
    In process (o = 5 ms): t* = 0.379 s, side ceil(sqrt(379)) = 20, 10 blocks, 55 tiles.
    Ray (22 ms): t* = 0.795 s, side ceil(sqrt(795)) = 29, 7 blocks of 29, 28 tiles.
    Nothing measured: 20 ms, t* = 0.758 s, side 28, evened to 7 blocks of 29.
    Configured 0: t* = target_tile_s = 0.05 s, side ceil(sqrt(50)) = 8, 25 blocks."""
    base = {"t_pair": 0.001, "t_parse": 0.044, "item_bytes": 100.0}
    cfg = AllPairsConfig(host_cache_items=200)

    def plan(measured, config=cfg):
        return plan_run(measured, Triangle(200), None, [NODE], config,
                        items=ItemMap.shared(200))
    inproc = plan({**base, **tile_overhead("inprocess")})
    assert (inproc.leaf, len(inproc.tiles), inproc.tile_overhead_s) == (20, 55, 0.005)
    ray = plan({**base, **tile_overhead("ray")})
    assert (ray.leaf, len(ray.tiles), ray.tile_overhead_s) == (29, 28, 0.022)
    assert plan(base).leaf == 29 and plan(base).tile_overhead_s == 0.02
    forced = plan({**base, **tile_overhead("ray")},
                  AllPairsConfig(host_cache_items=200, tile_overhead_s=0.0))
    assert (forced.leaf, forced.tile_overhead_s) == (8, 0.0)


def test_a_packed_run_under_a_small_host_tier_groups_the_stripe_rules_leaves():
    """Issue 58's run: 241 loci in packs, a host tier of 24 items, in process. The stripe
    rule gives 24 // 4 = 6 (860 tiles: 41 blocks a side, the last one row, whose diagonal
    block holds no pair); a tile of 2 x 2 of them, 12 a side, fills the host tier (230
    tiles). Each timed by hand from its simulated R, every tile paying 5 ms:
    (R x 241 x 5.4e-5 + 28,920 x 1.3e-4 + tiles x 0.005) / 2 + leaf^2 x 1.3e-4 / 2.
    Packed or not, the same search and the same leaf: packs are cut once it is chosen."""
    node = dict(NODE, object_store=2**31)  # L1s that hold a tile's items by their bytes
    measured = {"t_pair": 1.3e-4, "t_parse": 5.4e-5, "item_bytes": 2.3e5,
                **tile_overhead("inprocess")}
    cfg = AllPairsConfig(host_cache_items=24)
    rows = plan_run(measured, Triangle(241), None, [node], cfg, items=ItemMap.shared(241))
    packed = plan_run(measured, Triangle(241), None, [node], cfg, items=ItemMap.shared(241),
                      packable=True)
    searched = packed.choice["leaf_search"]
    assert searched == rows.choice["leaf_search"] and set(searched) == {"6", "12"}
    for leaf, tiles in ((6, 860), (12, 230)):
        r = searched[str(leaf)]["R"]
        assert searched[str(leaf)]["modelled_s"] == pytest.approx(
            (r * 241 * 5.4e-5 + 28_920 * 1.3e-4 + tiles * 0.005) / 2 + leaf ** 2 * 1.3e-4 / 2,
            abs=1e-3)
    assert packed.leaf == rows.leaf == 12 and len(packed.tiles) == 230
    assert packed.pack_rows == 12 and packed.l2_items == 24 // 12


def test_an_in_process_run_charges_and_reports_its_tiles_fixed_cost(tmp_path):
    """A run in process: the probe charges each tile the in-process fixed cost (5 ms) plus
    its measured writes, the plan uses that figure, and summary.json reports the run's own
    per-tile costs beside it (a part of the actors' time per tile, over every tile)."""
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs
    res = allpairs(app=SyntheticApp(30), runs_root=str(tmp_path), progress=False, wait=True,
                   num_cpus=2, object_store_mb=256, executor="inprocess", leaf_items=5)
    s = res.summary
    assert s["executor"] == "inprocess"
    costs = s["measured"]["tile_costs"]
    assert costs["executor"] == "inprocess" and costs["dispatch_s"] == 0.005
    assert s["measured"]["tile_overhead_s"] == pytest.approx(0.005 + costs["io_s"])
    got = s["tile_costs"]
    assert got["modelled_overhead_s"] == s["measured"]["tile_overhead_s"]
    assert got["tiles"] == s["tiles_total"] == 21      # 6 blocks of 5 a side, a triangle
    assert 0 <= got["per_tile_overhead_s"] <= got["tile_seconds"]
    assert got["overhead_share"] == pytest.approx(got["per_tile_overhead_s"] /
                                                  got["tile_seconds"])
