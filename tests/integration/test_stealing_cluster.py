"""Hierarchical scheduling with work stealing on a 4-node ``ray.cluster_utils.Cluster``.

A head with no CPU and four worker nodes of one CPU each, small object stores and a host tier of
12 items per node (below n = 72). One node's device is slow (the synthetic app sleeps there), so
the other nodes finish their shares first and must steal. The oracle is the app's own formula
(pair (i, j) compares to i * 1000 + j), computed here without the engine, and the journal's tile
ids (each tile journaled exactly once). A second run removes a node and adds another mid-run; until the added node has run a tile the
first four go slowly (a gate file they all see: the nodes share this machine), so the check that
it received work does not depend on how fast its processes start.

Both runs are made by one driver on one cluster (starting five raylets on this machine's two
cores is much of their time), the plain run first: the cluster's membership changes only during
the second, which is the last thing done on it. Each test checks its own run's results.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DRIVER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np, ray
    from ray.cluster_utils import Cluster
    from pairflow.engine.pairs.app import FunctionApp
    from pairflow.engine.pairs.driver import allpairs
    ROOT, MODES = sys.argv[1], sys.argv[2].split(",")
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    workers = [cluster.add_node(num_cpus=1, **node) for _ in range(4)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    N = 72
    GATE = os.path.join(ROOT, "until-the-new-node-runs")
    FIRST = tuple(f"node-{i}/" for i in range(4))

    def compare(lefts, rights):
        actor = os.environ.get("PAIRFLOW_ACTOR_ID", "")
        # one node's device is slow: the others must steal its share
        if actor.startswith("node-1/"):
            time.sleep(0.08)
        # Until the node that joined runs its first tile, the first nodes go slowly, so work
        # is left for it however long its processes take to start on a loaded machine.
        if os.path.exists(GATE):
            if actor.startswith(FIRST):
                time.sleep(0.2)
            else:
                try:
                    os.remove(GATE)
                except FileNotFoundError:
                    pass
        return np.add.outer(np.array(lefts) * 1000, np.array(rights)).astype(np.float64)

    app = FunctionApp([f"k{i}" for i in range(N)], load=lambda k: int(k[1:]), compare=compare,
                      tile=True)
    out = {}
    for mode in MODES:  # "churn" last: it changes the cluster's membership
        h = allpairs(app=app, runs_root=os.path.join(ROOT, mode), leaf_items=2, progress=False,
                     host_cache_items=12, hierarchical="auto")
        total = json.load(open(os.path.join(h.run_dir, "meta.json")))["tiles_total"]
        if mode == "churn":
            while h.progress()["done"] < total // 4:
                time.sleep(0.05)
            open(GATE, "w").close()
            cluster.add_node(num_cpus=1, **node)
            while h.progress()["done"] < total // 3:
                time.sleep(0.05)
            cluster.remove_node(workers[2])
        res = h.result(timeout=600)
        m = res.matrix()
        journal = [json.loads(l)["tile"]
                   for l in open(os.path.join(res.run_dir, "journal.jsonl"))]
        ran = [json.loads(l)["actor"] for l in open(os.path.join(res.run_dir, "tiles.jsonl"))]
        meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
        joined = sorted({a["node"] for a in meta["actors"] if "joined" in a})
        out[mode] = {"matrix": m.tolist(), "journal": journal, "total": total, "joined": joined,
                     "ran_on": sorted(set(a.split("/")[0] for a in ran)),
                     "scheduling": res.summary["scheduling"],
                     "lost": res.summary["lost_actors"]}
    print(json.dumps(out))
    ray.shutdown()
    cluster.shutdown()
""")


@pytest.fixture(scope="module")
def stealing_runs(tmp_path_factory) -> dict:
    """The plain run's and the churn run's results (one driver, one cluster, in that order)."""
    where = tmp_path_factory.mktemp("stealing")
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        (where / "driver.py").write_text(DRIVER)
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=REPO,
                   TMPDIR=scratch)
        out = subprocess.run([sys.executable, str(where / "driver.py"), str(where / "runs"),
                              "plain,churn"], capture_output=True, text=True, env=env,
                             timeout=1200, cwd=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-6000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _expected(n: int):
    import numpy as np
    iu = np.triu_indices(n, 1)
    return iu, iu[0] * 1000 + iu[1]


def test_four_nodes_one_slow_steal_and_the_result_is_exact(stealing_runs):
    import numpy as np
    r = stealing_runs["plain"]
    iu, want = _expected(72)
    assert np.array_equal(np.array(r["matrix"])[iu], want)
    assert sorted(r["journal"]) == list(range(r["total"]))  # each tile journaled once
    s = r["scheduling"]
    assert s["hierarchical"] and s["steals"] > 0, s
    assert s["local_handouts"] >= r["total"]
    # round trips to the head: batches (steal_batch), so far fewer than one per tile
    assert s["head_round_trips"] * 10 <= r["total"], s
    assert len(r["ran_on"]) == 4, r["ran_on"]


def test_a_node_removed_and_one_added_mid_run_with_stealing(stealing_runs):
    import numpy as np
    r = stealing_runs["churn"]
    iu, want = _expected(72)
    assert np.array_equal(np.array(r["matrix"])[iu], want)
    assert sorted(r["journal"]) == list(range(r["total"]))
    assert r["lost"] and all(not a["node_alive"] for a in r["lost"]), r["lost"]
    assert len(r["joined"]) == 1, r["joined"]
    new = r["joined"][0]
    assert new in r["ran_on"], r["ran_on"]  # the node that joined received work
    assert r["scheduling"]["per_node"][new]["granted"] > 0, r["scheduling"]
