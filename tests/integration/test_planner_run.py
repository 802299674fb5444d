"""The planner on a real run: 16 genomes and a host tier of 4 items (issue 19). The default
stripe plan loaded more here (R = 2.56, 2.50) than the Z-order/LRU baseline (2.25, 2.19).
Oracles: an independent replay of the cache rules (tests/cache_oracle.py) for every simulated
R, and the run's own measured R."""
import glob
import json
import os

import pytest

from tests.cache_oracle import replay, tile_item_lists
from tests.conftest import need
from tests.oracles import RAGOUT

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_sixteen_genomes_with_four_in_the_host_tier_never_lose_to_the_baseline(
        ray_local, runs, capfd):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.items import ItemMap
    from pairflow.engine.pairs.plan.policy import make_plan
    from pairflow.engine.pairs.space import Triangle, leaves
    need(RAGOUT)
    paths = sorted(glob.glob(os.path.join(RAGOUT, "*/references/*.fasta.gz")))
    assert len(paths) == 16
    res = allpairs(app=JaccardApp(paths, k=21), sink=DenseMatrix(), runs_root=runs, wait=True,
                   host_cache_items=4, progress=True)
    s = res.summary
    choice = s["plan_choice"]
    assert (s["plan"], s["eviction"]) == (choice["plan"], choice["eviction"])
    assert set(choice["simulated_R"]) == {f"{p}/{e}" for p in ("stripe", "hilbert", "zorder")
                                          for e in ("next_use", "lru")}
    # every candidate's simulated R is the oracle's replay (tests/cache_oracle.py) of the same
    # run: the leaf, host tier, L1 (fewer of these large items than its item budget: its
    # bytes), actors and window the simulation was given
    given = choice["simulated_with"]
    assert "grid" not in given and given["host_items"] == 4 and given["nodes"] == 1
    tiles = leaves(Triangle(16), given["leaf"])
    items = ItemMap.shared(16)
    for name, r in choice["simulated_R"].items():
        plan, eviction = name.split("/")
        order = make_plan(plan, 4, given["actors_per_node"] * given["in_flight"]).order(tiles,
                                                                                     items)
        loads, _, _ = replay(tile_item_lists(tiles, items.row_items, items.col_items),
                             [t.pairs for t in tiles], order, l1_items=given["l1_items"],
                             l2_items=4, eviction=eviction, actors=given["actors_per_node"],
                             in_flight=given["in_flight"], window=given["window"])
        assert r == round(loads / 16, 4), (name, r, loads)
    chosen = choice["simulated_R"][f"{s['plan']}/{s['eviction']}"]
    assert chosen == min(choice["simulated_R"].values())
    # the run as measured: no more loads than the baseline's simulation, and at most 20 %
    # above its own plan's (the actors' timing decides which actor asks first, where the
    # simulation takes turns; measured: 2.06 against 2.0625, 2.31 against 2.1875, 2.56 against
    # 2.4375 in benchmarks/RESULTS.md's planner (b); below it too, by chance of timing: 2.125
    # and, in a loaded CI run, 1.94 against 2.4375 here on 2026-12-05); more than once per
    # item, since the host tier holds 4 of the 16
    assert s["R"] <= choice["simulated_R"]["zorder/lru"], (s["R"], choice["line"])
    assert 1.0 < s["R"] <= 1.2 * chosen, (s["R"], chosen, choice["line"])
    # reported: on the console, in summary.json and meta.json
    assert f"[pairflow] plan: {s['plan']} with {s['eviction']} eviction" in capfd.readouterr().err
    with open(os.path.join(res.run_dir, "summary.json")) as f:
        assert json.load(f)["plan_choice"] == choice
    with open(os.path.join(res.run_dir, "meta.json")) as f:
        assert json.load(f)["plan"] == s["plan"]
