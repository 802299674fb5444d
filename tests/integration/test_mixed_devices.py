"""GPU actors and CPU actors side by side on one node (``devices="cuda,cpu"``).

One node with three CPUs and two logical GPUs (Ray resources only: no GPU here, so a GPU
actor's array backend falls back as it does today; what is tested is placement and results):
two GPU actors, each asking for one GPU and seeing its own ``CUDA_VISIBLE_DEVICES``, and one
CPU actor (the third CPU slot), in one run. The compare tags every value with the device that
computed it; without the tag every value must equal the formula.
"""
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

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPU_TAG = 7

DRIVER = textwrap.dedent("""
    import json, os, sys
    import numpy as np, ray
    from ray.cluster_utils import Cluster
    from pairflow.engine.pairs.app import BasePairApp
    from pairflow.engine.pairs.driver import allpairs
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=3, num_gpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
        node_ip_address="127.0.0.1"))
    ray.init(address=cluster.address)

    class Devices(BasePairApp):
        name = "devices"
        def keys(self):
            return [f"k{i}" for i in range(30)]
        def parse(self, key, raw):
            return int(key[1:])
        def compare(self, left, right, mask, device):
            seen = os.environ.get("CUDA_VISIBLE_DEVICES", "")
            if device == "cuda":
                assert seen != "" and "," not in seen, seen  # one GPU, its own
                tag = int(seen)
            else:
                assert device == "cpu", device
                tag = %(cpu_tag)d
            li, ri = np.array(left)[:, None], np.array(right)[None, :]
            return (tag * 10**6 + li * 1000 + ri).astype(float)

    res = allpairs(app=Devices(), devices="cuda,cpu", runs_root=sys.argv[1], leaf_items=2,
                   progress=False, wait=True, executor="ray")
    m = res.matrix()
    iu = np.triu_indices(30, 1)
    meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
    print(json.dumps({"values": m[iu].tolist(), "rows": iu[0].tolist(), "cols": iu[1].tolist(),
                      "devices": [a["device"] for a in meta["actors"]],
                      "nodes": sorted({a["node_id"] for a in meta["actors"]}),
                      "journaled": res.summary["tiles_journaled"],
                      "tiles": res.summary["tiles_total"]}))
    ray.shutdown()
    cluster.shutdown()
""") % {"cpu_tag": CPU_TAG}


def test_gpu_and_cpu_actors_side_by_side_on_one_node(tmp_path):
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")  # short: Ray's socket paths
    try:
        (tmp_path / "driver.py").write_text(DRIVER)
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", TMPDIR=scratch,
                   PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("RAY_ADDRESS", None)
        out = subprocess.run([sys.executable, str(tmp_path / "driver.py"),
                              str(tmp_path / "runs")], cwd=scratch, env=env,
                             capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-6000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["devices"] == ["cuda", "cuda", "cpu"]
    assert len(result["nodes"]) == 1
    assert result["journaled"] == result["tiles"]
    values = np.array(result["values"])
    rows, cols = np.array(result["rows"]), np.array(result["cols"])
    tag = values // 10**6
    assert np.array_equal(values - tag * 10**6, rows * 1000 + cols)  # exact otherwise
    assert set(tag.tolist()) == {0, 1, CPU_TAG}, "each GPU and the CPU actor computed tiles"
