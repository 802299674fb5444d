"""L3 when a node is lost mid-run (issue 57, part 4), on a real ``ray.cluster_utils.Cluster``:
a 0-CPU head and three one-CPU worker nodes, ``cache.l3=true``, a host tier well below n. After a
third of the tiles one worker node is removed. The run finishes exact (a brute force), every tile
journaled once; the live nodes learn of the loss from a failed directory call, move its shard
to a stand-in and send it their holdings again (``l3.rebuilt`` > 0), and keep taking items from
each other after it (hits on the live nodes)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from tests.integration.test_cluster import REPO

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
N_ITEMS, ITEM_BYTES = 36, 20_000

DRIVER = textwrap.dedent("""
    import json, os, time
    import numpy as np, ray
    from ray.cluster_utils import Cluster
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    from tests.parse_count import CountedBytes
    PATHS, COUNT, RUNS = {paths!r}, {count!r}, {runs!r}
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    workers = [cluster.add_node(num_cpus=1, **node) for _ in range(3)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    h = allpairs(app=CountedBytes(PATHS, COUNT), sinks=[DenseMatrix()], runs_root=RUNS,
                 leaf_items=2, host_cache_items=8, l3=True, progress=False)
    total = json.load(open(os.path.join(h.run_dir, "meta.json")))["tiles_total"]
    while h.progress()["done"] < total // 3:
        time.sleep(0.05)
    cluster.remove_node(workers[1])
    res = h.result(timeout=600)
    s = res.summary
    tiles = [json.loads(l) for l in open(os.path.join(res.run_dir, "journal.jsonl"))]
    np.save(os.path.join(RUNS, "m.npy"), res.matrix("dot"))
    print(json.dumps({{"once": sorted(t["tile"] for t in tiles if "tile" in t) == list(range(total)),
                      "l3": s["l3"], "lost": s["lost_actors"],
                      "caches": [sorted(c) for c in s["node_caches"]]}}))
    ray.shutdown()
    cluster.shutdown()
""")


def test_a_node_lost_mid_run_leaves_a_rebuilt_directory_and_an_exact_result(tmp_path):
    rng = np.random.default_rng(57)
    paths = []
    (tmp_path / "items").mkdir()
    for i in range(N_ITEMS):
        path = tmp_path / "items" / f"item{i:03d}.bin"
        path.write_bytes(rng.integers(0, 256, ITEM_BYTES, dtype=np.uint8).tobytes())
        paths.append(str(path))
    vectors = np.stack([np.frombuffer(open(p, "rb").read(), np.uint8).astype(np.int64)
                        for p in paths])
    brute = vectors @ vectors.T  # the oracle
    runs = tmp_path / "runs"
    runs.mkdir()
    (tmp_path / "driver.py").write_text(DRIVER.format(
        paths=paths, count=str(tmp_path / "parsed.txt"), runs=str(runs)))
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=REPO,
                   TMPDIR=scratch)
        out = subprocess.run([sys.executable, str(tmp_path / "driver.py")], capture_output=True,
                             text=True, env=env, timeout=900, cwd=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-6000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    iu = np.triu_indices(N_ITEMS, 1)
    assert np.array_equal(np.load(runs / "m.npy")[iu], brute[iu])
    assert got["once"], got
    assert got["lost"] and all(not a["node_alive"] for a in got["lost"]), got["lost"]
    l3 = got["l3"]
    live = l3["nodes"]  # the lost node's cache is gone with its counters
    assert len(live) == 2, got["caches"]
    # each live node learnt of the loss from a failed call, and sent the stand-in its holdings
    lost = {tuple(part["lost_peers"]) for part in live.values()}
    assert len(lost) == 1 and len(next(iter(lost))) == 1, live
    assert l3["rebuilt"] > 0 and l3["hits"] > 0, l3
    print(json.dumps({k: l3[k] for k in ("hits", "misses", "failed", "rebuilt")}))
