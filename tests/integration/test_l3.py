"""L3 on a real Ray cluster (``ray.cluster_utils.Cluster``: a head with no CPU, four worker nodes
of one CPU each, small object stores, a host tier of 12 items of 48 in leaves of 2): results
equal a brute force and a single-node run; with ``cache.l3=true`` fewer items are loaded from
storage than with it off at the same per-node cache, and fewer per item than on one node,
counted by the run (``loads``, ``l3``) and independently (every parse call appended to a file
by the process that made it: ``tests/parse_count.py``)."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap

import numpy as np
import pytest

from tests.integration.test_cluster import run_on_cluster
from tests.parse_count import CountedBytes, parsed

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
N_ITEMS, ITEM_BYTES, LEAF, HOST_ITEMS, WORKERS = 48, 100_000, 2, 12, 4
PROBE = 2  # items the driver parses to time the stages before the run (loading.measure_stages)

DRIVER = textwrap.dedent("""
    import json, os
    import numpy as np, ray
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    from pairflow.engine.pairs.workers.warm import WARM
    from tests.parse_count import CountedBytes, parsed
    PATHS, COUNT, RUNS = {paths!r}, {count!r}, {runs!r}
    ray.init(address=os.environ["PAIRFLOW_TEST_ADDRESS"])
    out = {{}}
    for name, l3 in (("off", False), ("on", True)):
        taken = WARM.taken
        res = allpairs(app=CountedBytes(PATHS, COUNT), sinks=[DenseMatrix()], runs_root=RUNS,
                       leaf_items={leaf}, host_cache_items={host}, l3=l3, progress=False,
                       wait=True)
        np.save(os.path.join(RUNS, name + ".npy"), res.matrix("dot"))
        s = res.summary
        gets = sum(c.get("io", {{}}).get("file", {{}}).get("gets", 0)
                   for c in s["node_caches"])
        out[name] = {{"loads": s["loads"], "R": s["R"], "l3": s["l3"], "gets": gets,
                     "actors": s["n_actors"], "parsed": parsed(COUNT),
                     "run_dir": res.run_dir, "reused": WARM.taken - taken,
                     "kept": WARM.size()}}
    print(json.dumps(out))
""")


def test_l3_loads_less_from_storage_and_the_results_are_exact(tmp_path):
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    rng = np.random.default_rng(7)
    data = tmp_path / "items"
    data.mkdir()
    paths = []
    for i in range(N_ITEMS):
        path = data / f"item{i:03d}.bin"
        path.write_bytes(rng.integers(0, 256, ITEM_BYTES, dtype=np.uint8).tobytes())
        paths.append(str(path))
    vectors = np.stack([np.frombuffer(open(p, "rb").read(), np.uint8).astype(np.int64)
                        for p in paths])
    brute = vectors @ vectors.T  # the oracle
    iu = np.triu_indices(N_ITEMS, 1)

    # one node, the same per-node host tier (no Ray: threads of this process, one CPU)
    count = str(tmp_path / "parsed-single.txt")
    single = allpairs(app=CountedBytes(paths, count), sinks=[DenseMatrix()],
                      runs_root=str(tmp_path / "runs"), leaf_items=LEAF,
                      host_cache_items=HOST_ITEMS, executor="inprocess", num_cpus=1,
                      progress=False, wait=True)
    assert np.array_equal(single.matrix("dot")[iu], brute[iu])
    # in-process, the probe's two parses are the run's loads of those items (handed over)
    single_loads = len(parsed(count))
    assert single_loads == single.summary["loads"]

    runs = tmp_path / "cluster-runs"
    runs.mkdir()
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        got = run_on_cluster(tmp_path, DRIVER.format(
            paths=paths, count=str(tmp_path / "parsed-cluster.txt"), runs=str(runs), leaf=LEAF,
            host=HOST_ITEMS), head_cpus=0, workers=WORKERS, private=False, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    off, on = got["off"], got["on"]
    for name in ("off", "on"):  # exact, whatever tier each item came through
        assert np.array_equal(np.load(runs / f"{name}.npy")[iu], brute[iu]), name
        assert got[name]["actors"] == WORKERS
        # the run's count of storage loads is the parse calls counted outside the engine,
        # and the GETs its nodes' fetches made
        assert got[name]["loads"] == len(got[name]["parsed"]) - PROBE == got[name]["gets"], \
            got[name]
    # the first run's actors wait for the second, which starts none: the coordinator, and on
    # each worker node its cache, its frontier and its device actor
    assert off["reused"] == 0 and off["kept"] == on["reused"] == 1 + 3 * WORKERS, (off, on)
    assert not off["l3"]["enabled"] and off["l3"]["hits"] == 0
    l3 = on["l3"]
    assert l3["enabled"] and l3["hops"] == 1 and len(l3["hits_per_hop"]) == 1
    assert l3["hits"] > 0 and l3["hits"] == sum(l3["hits_per_hop"])
    # every item is loaded at least once somewhere; every L2 miss is a hit or a storage load
    assert len(set(on["parsed"])) == N_ITEMS
    assert on["loads"] == l3["misses"]
    # batched: fewer directory calls than items looked up
    assert l3["lookup_calls"] < l3["hits"] + l3["misses"]
    # the point of L3: fewer loads from storage than without it, at the same per-node tier,
    # and fewer per item than one node with that tier (the nodes' tiers act as one: the run is
    # dealt to them in stripes as wide as all of them), while without L3 they rise above it
    assert on["loads"] < off["loads"], (on["loads"], off["loads"])
    assert on["R"] < single_loads / N_ITEMS < off["R"], (on["R"], single_loads, off["R"])
    print(json.dumps({"single_R": single_loads / N_ITEMS, "off_R": off["R"], "on_R": on["R"],
                      "l3": {k: l3[k] for k in ("hits_per_hop", "misses", "failed", "stale")}}))
    summary = json.load(open(os.path.join(on["run_dir"], "summary.json")))
    assert summary["l3"]["hits_per_hop"] == l3["hits_per_hop"]
    assert summary["R"] == on["R"] and summary["scheduling"]["hierarchical"]
    sched = summary["scheduling"]  # every steal counted is logged, between two of the nodes
    assert sched["steals"] == len(sched["steal_log"]) == \
        sum(n["steals"] for n in sched["per_node"].values())
    assert all(s["thief"] != s["victim"] and {s["thief"], s["victim"]} <= set(sched["per_node"])
               and s["tiles"] >= 1 for s in sched["steal_log"]), sched["steal_log"]
