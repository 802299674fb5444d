"""A Hydra sweep on a Ray cluster (``pairflow -m data.k=15,21,31 hydra/launcher=pairflow``).

A ``ray.cluster_utils.Cluster`` on 127.0.0.1 (a head with no CPU and one worker node with two)
runs in a process of its own; the sweep is launched from another process, in another working
directory, with relative paths for the inputs and the runs (the launcher runs each job in its
own working directory). Each job's matrix must equal the same job run alone (in-process, without
Ray: the three as one multirun of Hydra's basic launcher, which runs its jobs one after another
in its own process, started alongside the sweep) and the brute-force Jaccard of Python sets
(tests/oracles.py).
"""
from __future__ import annotations

import glob
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

from tests.oracles import canonical_kmers, jaccard_matrix

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KS = (15, 21, 31)

# a Cluster until its stdin closes; its address on the first line of stdout
CLUSTER = textwrap.dedent("""
    import sys
    from ray.cluster_utils import Cluster
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    cluster.add_node(num_cpus=2, **node)
    cluster.wait_for_nodes()
    print(cluster.address, flush=True)
    sys.stdin.read()
    cluster.shutdown()
""")


def _genomes(where: str, n: int = 5, length: int = 3000) -> list[str]:
    """n related sequences (a common ancestor, each with its own point mutations)."""
    rng = random.Random(7)
    base = [rng.choice("ACGT") for _ in range(length)]
    os.makedirs(where)
    paths = []
    for i in range(n):
        seq = list(base)
        for _ in range(40 * (i + 1)):
            seq[rng.randrange(length)] = rng.choice("ACGT")
        path = os.path.join(where, f"g{i}.fa")
        with open(path, "w") as fh:
            fh.write(f">g{i}\n{''.join(seq)}\n")
        paths.append(path)
    return paths


def _similarity(run_dir: str) -> tuple[list[str], np.ndarray]:
    import zarr
    group = zarr.open_group(os.path.join(run_dir, "result", "matrix.zarr"), mode="r")
    return list(group.attrs["row_keys"]), group["similarity"][...]


def test_a_three_job_sweep_on_the_cluster_equals_each_job_alone(tmp_path):
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")  # short: Ray's socket paths
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", TMPDIR=scratch,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("RAY_ADDRESS", None)
    work = tmp_path / "work"  # the sweep's working directory: relative paths start here
    paths = _genomes(str(work / "inputs"))
    (tmp_path / "cluster.py").write_text(CLUSTER)
    cluster = subprocess.Popen([sys.executable, str(tmp_path / "cluster.py")], cwd=scratch,
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    # the same three jobs alone: in-process, without Ray (no launcher of Ray's), meanwhile
    solo_root = str(tmp_path / "solo")
    solo = subprocess.Popen(
        [sys.executable, "-m", "pairflow.apps.cli", "-m", f"data.k={','.join(map(str, KS))}",
         "data.inputs=inputs/*.fa", f"runs_root={solo_root}", "cluster=inprocess",
         "progress=false"],
        cwd=str(work), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        address = cluster.stdout.readline().strip()
        assert address, cluster.stderr.read()[-4000:] if cluster.poll() is not None else "no address"
        t0 = time.time()
        sweep = subprocess.run(
            [sys.executable, "-m", "pairflow.apps.cli", "-m", f"data.k={','.join(map(str, KS))}",
             "hydra/launcher=pairflow", "cluster=ray", f"cluster.ray_address={address}",
             "data.inputs=inputs/*.fa", "runs_root=runs", "progress=false"],
            cwd=str(work), env=env, capture_output=True, text=True, timeout=900)
        sweep_s = time.time() - t0
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=120)
        except subprocess.TimeoutExpired:
            cluster.kill()
        try:
            _, solo_err = solo.communicate(timeout=600)
        finally:
            if solo.poll() is None:
                solo.kill()
    assert sweep.returncode == 0, sweep.stderr[-6000:] + sweep.stdout[-2000:]
    assert solo.returncode == 0, solo_err[-4000:]
    solo_jobs = sorted(glob.glob(os.path.join(solo_root, "jaccard", "multirun-*", "*")))
    solo_jobs = [j for j in solo_jobs if os.path.basename(j).isdigit()]
    assert [os.path.basename(j) for j in solo_jobs] == ["0", "1", "2"], solo_jobs

    jobs = sorted(glob.glob(str(work / "runs" / "jaccard" / "multirun-*" / "*")))
    jobs = [j for j in jobs if os.path.basename(j).isdigit()]
    assert [os.path.basename(j) for j in jobs] == ["0", "1", "2"], (jobs, sweep_s)
    import json
    import yaml
    assert "Ray launcher: 3 jobs" in sweep.stderr + sweep.stdout
    for i, (job, solo_dir, k) in enumerate(zip(jobs, solo_jobs, KS)):
        overrides = yaml.safe_load(open(os.path.join(job, ".hydra", "overrides.yaml")))
        assert f"data.k={k}" in overrides
        hydra = yaml.safe_load(open(os.path.join(job, ".hydra", "hydra.yaml")))["hydra"]
        assert hydra["job"]["id"] == f"ray_{i}"  # launched as a Ray task, not in-process
        meta = json.load(open(os.path.join(job, "meta.json")))
        assert meta["executor"] == "ray" and meta["actors"], meta["actors"]
        # the runs' actors are on the worker node (its two CPUs): the head has none
        assert len(meta["actors"]) == 2 and len({a["node_id"] for a in meta["actors"]}) == 1
        assert json.load(open(os.path.join(job, "status.json")))["state"] == "finished"

        assert f"data.k={k}" in yaml.safe_load(
            open(os.path.join(solo_dir, ".hydra", "overrides.yaml")))
        assert json.load(open(os.path.join(solo_dir, "meta.json")))["executor"] == "inprocess"
        keys, got = _similarity(job)
        solo_keys, want = _similarity(solo_dir)
        assert keys == solo_keys
        assert np.array_equal(got, want, equal_nan=True), k

        names = [os.path.splitext(os.path.basename(p))[0] for p in paths]
        sets = {name: canonical_kmers([open(p).read().split("\n", 1)[1].replace("\n", "")], k)
                for name, p in zip(names, paths)}
        oracle, _ = jaccard_matrix([sets[key] for key in keys])
        off = ~np.eye(len(keys), dtype=bool)
        assert np.allclose(got[off], oracle[off], rtol=0, atol=1e-12), k


def _failing_sweep(tmp_path, *launcher: str) -> tuple[subprocess.CompletedProcess, str]:
    """``pairflow -m data.k=15,0`` on 3 small genomes: k=0 is refused, so job #1's run fails;
    the completed command and its working directory."""
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", TMPDIR=scratch,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("RAY_ADDRESS", None)
    work = tmp_path / "work"
    _genomes(str(work / "inputs"), n=3, length=500)
    out = subprocess.run(
        [sys.executable, "-m", "pairflow.apps.cli", "-m", "data.k=15,0", *launcher,
         "data.inputs=inputs/*.fa", "runs_root=runs", "progress=false"],
        cwd=str(work), env=env, capture_output=True, text=True, timeout=900)
    return out, str(work)


def _check_failed_sweep(out: subprocess.CompletedProcess, work: str) -> None:
    """The sweep failed, naming job #1 (its number, its overrides, its exit code) after the
    job's own error; job #0's run finished."""
    import json
    both = out.stdout + out.stderr
    assert out.returncode != 0, both[-4000:]
    assert "k must be an integer" in out.stderr, both[-4000:]
    assert "Error executing job with overrides: ['data.k=0', " in out.stderr, both[-4000:]
    assert "job #1 of the sweep failed with exit code 2" in out.stderr, both[-4000:]
    (first,) = glob.glob(os.path.join(work, "runs", "jaccard", "multirun-*", "0"))
    assert json.load(open(os.path.join(first, "status.json")))["state"] == "finished"


def test_a_failed_job_fails_the_sweep_naming_it(tmp_path):
    """Without a cluster address the launcher starts a local Ray; one job at a time
    (max_concurrent=1). A job whose run fails (k=0 is refused) raises (Hydra's contract): the
    sweep fails, naming it, and the launcher's log names every failed job, while the other
    job's run finishes."""
    out, work = _failing_sweep(tmp_path, "hydra/launcher=pairflow",
                               "hydra.launcher.max_concurrent=1", "cluster.num_cpus=2",
                               "cluster.object_store_mb=256")
    _check_failed_sweep(out, work)
    assert "Ray launcher: 2 jobs" in out.stdout, out.stdout[-4000:]
    assert "1 of 2 jobs of the sweep failed: #1 (data.k=0 " in out.stdout, out.stdout[-4000:]


def test_a_failed_job_fails_a_sweep_of_the_basic_launcher_too(tmp_path):
    """The same sweep with Hydra's basic launcher (in-process runs, no Ray): the job's raised
    error fails it just the same."""
    out, work = _failing_sweep(tmp_path, "cluster=inprocess")
    _check_failed_sweep(out, work)
    assert "Launching 2 jobs locally" in out.stdout, out.stdout[-4000:]
