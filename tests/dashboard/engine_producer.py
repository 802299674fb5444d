"""REAL runs for the dashboard tests, on a local Ray, in a subprocess so that the test process
never imports Ray.

    python tests/dashboard/engine_producer.py allpairs RUN_DIR [N_RECORDS] [LEAF_ITEMS] [HOLD]
    python tests/dashboard/engine_producer.py suite OUT_DIR
    python tests/dashboard/engine_producer.py cluster OUT_DIR

``allpairs``: exact Jaccard of the Klebsiella capsule loci (kaptive-data, unpacked by
scripts/setup.sh), the live run the browser test watches (held live while the file HOLD
exists). ``suite``: one Ray session writing the
finished runs the dashboard tests read, under OUT_DIR: ``allpairs`` (Jaccard of 24 loci),
``pipeline`` (a filter pipeline that reorders its operators) and ``failed`` (an all-pairs run
whose compare raises on one pair after other tiles finished). ``cluster``: two runs on one
``ray.cluster_utils.Cluster`` (a head with no CPU, two worker nodes of one CPU), under OUT_DIR:
``l3`` (the L3 directory on) and ``stealing`` (one node slow, so the other steals).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAILING_PAIR = ("k3", "k9")


# while the hold file of a live run exists, each of its tiles takes at least this long more: the
# 120 tiles of the live results test's 60 records stay live ~15 s on 2 workers (at 0.05 s, 3 s:
# in clean-clone CI its 4x-throttled page saw 0 tiles, then all 120, never a part done)
HOLD_S = 0.25


def _held(app, hold_file: str):
    """``app`` whose tiles each take ``HOLD_S`` longer while ``hold_file`` exists: a live run
    that stays live until the test watching it is done, however fast this machine is (the run
    otherwise ended while the dashboard's views were screenshot), and then finishes at its own
    pace. Its results are the app's, unchanged."""
    import time

    class Held(type(app)):
        def compare(self, left, right, mask, device):
            if os.path.exists(hold_file):
                time.sleep(HOLD_S)
            return super().compare(left, right, mask, device)

    app.__class__ = Held
    return app


def jaccard_run(run_dir: str, n_records: int = 0, leaf_items: int = 8, hold_file: str = ""):
    from tests.oracles import KLEBSIELLA, read_sequences

    recs = read_sequences(KLEBSIELLA, "genbank")
    if n_records:
        recs = recs[:n_records]
    fasta = Path(run_dir).parent / (Path(run_dir).name + "-input.fa")
    fasta.parent.mkdir(parents=True, exist_ok=True)
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in recs))

    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix
    from pairflow.engine import allpairs

    app = JaccardApp([str(fasta)], k=21, item="record")
    return allpairs(app=_held(app, hold_file) if hold_file else app,
                    sink=DenseMatrix(diagonal={"similarity": 1.0}), run_dir=run_dir, wait=True,
                    progress=False, leaf_items=leaf_items)


def _compare_failing_on_one_pair(a, b):
    if {f"k{a}", f"k{b}"} == set(FAILING_PAIR):
        raise ValueError(f"cannot compare k{a} with k{b}: record is corrupt")
    return a * 100 + b


def failed_run(run_dir: str) -> None:
    from pairflow.engine import PairflowError
    from pairflow.engine import FunctionApp
    from pairflow.engine import allpairs

    app = FunctionApp([f"k{i}" for i in range(16)], load=lambda k: int(k[1:]),
                      compare=_compare_failing_on_one_pair)
    try:
        allpairs(app=app, run_dir=run_dir, leaf_items=2, max_retries=0, progress=False,
                 wait=True)
    except PairflowError as err:
        print(f"failed as intended: {str(err)[:200]}")
    else:
        raise SystemExit("the failing run finished")


def pipeline_run(run_dir: str) -> None:
    import numpy as np

    from pairflow.engine.pipeline import Filter, Map, Pipeline
    from pairflow.operators.arrays import as_source

    rng = np.random.default_rng(0)
    n = 40_000
    data = {"id": np.arange(n), "x": rng.normal(size=n), "y": rng.uniform(size=n)}

    def costly(b):
        v = np.asarray(b["y"], float)
        for _ in range(30):
            v = np.sqrt(v * v + 1.0) - 0.5
        return v > -1e9

    ops = [Filter("costly", costly), Map("x2", lambda b: np.asarray(b["x"]) ** 2),
           Filter("far", lambda b: b["x2"] > 1.0, after=["x2"]),
           Filter("low", lambda b: b["y"] < 0.25)]
    Pipeline(as_source(data, batch_size=2_000), ops).run(run_dir=run_dir, progress=False,
                                                         replan_every=1, slots=2)


def l3_run(run_dir: str) -> None:
    """Jaccard of 24 loci with L3 on and a host tier of 6 items per node: a finished run whose
    summary.json holds real L3 hits per hop."""
    from tests.oracles import KLEBSIELLA, read_sequences
    recs = read_sequences(KLEBSIELLA, "genbank")[:24]
    fasta = Path(run_dir).parent / (Path(run_dir).name + "-input.fa")
    fasta.parent.mkdir(parents=True, exist_ok=True)
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in recs))
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix, allpairs
    res = allpairs(app=JaccardApp([str(fasta)], k=21, item="record"),
                   sink=DenseMatrix(diagonal={"similarity": 1.0}), run_dir=run_dir,
                   wait=True, progress=False, leaf_items=3, host_cache_items=6, l3=True)
    print(f"finished: L3 hits per hop {res.summary['l3']['hits_per_hop']}")


def stealing_run(run_dir: str) -> None:
    """32 items whose tiles take 80 ms longer on node-1: the other node runs out of its share
    first and steals (summary.json's "scheduling")."""
    import time

    import numpy as np

    from pairflow.engine.pairs.app import FunctionApp
    from pairflow.engine.pairs.driver import allpairs

    def compare(lefts, rights):
        if os.environ.get("PAIRFLOW_ACTOR_ID", "").startswith("node-1/"):
            time.sleep(0.08)
        return np.add.outer(np.array(lefts) * 1000, np.array(rights)).astype(np.float64)

    app = FunctionApp([f"k{i}" for i in range(32)], load=lambda k: int(k[1:]), compare=compare,
                      tile=True)
    res = allpairs(app=app, run_dir=run_dir, leaf_items=2, progress=False, wait=True,
                   steal_batch=8)
    print(f"finished: {res.summary['scheduling']['steals']} steals")


def cluster_runs(out: str) -> None:
    """``l3`` and ``stealing`` under ``out``, on one cluster (a head with no CPU, two worker
    nodes of one CPU): the second run takes the first one's actors."""
    import ray
    from ray.cluster_utils import Cluster

    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, **node)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)
        l3_run(str(Path(out) / "l3"))
        stealing_run(str(Path(out) / "stealing"))
    finally:
        ray.shutdown()
        cluster.shutdown()


def _start_ray(init_ray, attempts: int = 3) -> None:
    """Ray waits a fixed 30 s for its node to register and gives up; on a 2-core machine shared
    with other test runs that wait can run out. The runs made here are the dashboard's input,
    not what is tested, so a start that timed out is tried again."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            init_ray(num_cpus=2, object_store_mb=512)
            return
        except Exception as err:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(err) or attempt == attempts:
                raise
            print(f"Ray start timed out (attempt {attempt}); retrying", flush=True)
            ray.shutdown()


def main(argv: list[str]) -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray.cloudpickle

    from pairflow.engine.run.runtime import init_ray

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    kind, target = argv[0], argv[1]
    if kind == "cluster":  # a cluster of its own, not the local Ray
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        cluster_runs(target)
        return
    _start_ray(init_ray)
    if kind == "allpairs":
        res = jaccard_run(target, *(int(a) for a in argv[2:4]), *argv[4:5])
        print(f"finished: {res.summary['tiles_total']} tiles, R={res.summary['R']:.3f}")
    elif kind == "suite":
        out = Path(target)
        jaccard_run(str(out / "allpairs"), n_records=24, leaf_items=4)
        pipeline_run(str(out / "pipeline"))
        failed_run(str(out / "failed"))
        print("suite written")
    else:
        raise SystemExit(f"unknown kind {kind!r}: allpairs, suite or cluster")


if __name__ == "__main__":
    main(sys.argv[1:])
