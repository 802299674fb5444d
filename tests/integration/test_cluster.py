"""Runs on a Ray cluster of several nodes (``ray.cluster_utils.Cluster`` on this machine).

* A head node with no CPU (``ray start --head --num-cpus=0``, the usual production setup) runs
  no device actor and no load task, and the run is exact.
* Nothing shared: the driver runs in a mount namespace of its own (``unshare -m``) with a tmpfs
  mounted over its private directory, where it keeps its run directory and copies of the inputs.
  The cluster's nodes were started outside that namespace, so no worker process can see those
  files: inputs must travel through the object store and results back to the driver, or the run
  fails. Every worker process also records, through a Python audit hook installed at its start
  (``worker_process_setup_hook``), each file it opens, renames or removes: none may be outside
  the cluster's scratch directory (its temp dir, Ray's session, numba's cache), and the private
  directory seen from outside the namespace stays empty. Jaccard and align results must equal a
  single-node run's.

The tests that leave the cluster's membership alone (0-CPU head, nothing shared, S3) share one
cluster of the module (``shared_cluster``: a 0-CPU head and three one-CPU nodes, started once,
with a moto S3 server's address in its nodes' environment), and the 0-CPU head and S3 tests' runs
are made by one driver (``shared_runs``); the ones that need other nodes (two logical GPUs) or
remove and add nodes start their own.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from tests.conftest import need, need_module, need_program
from tests.unit.conftest import SHARE

pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
O_LOCUS = SHARE / "kaptive" / "reference_database" / "Klebsiella_o_locus_primary_reference.gbk"
GLOBINS = SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"

# Starts a Cluster (head with HEAD_CPUS, then WORKERS nodes of one CPU each), runs the driver
# script given as argv[1] with the cluster's address in PAIRFLOW_TEST_ADDRESS (inside a mount
# namespace of its own when argv[2] == "private"), relays its output and stops the cluster.
CLUSTER = textwrap.dedent("""
    import json, os, subprocess, sys
    from ray.cluster_utils import Cluster
    head_cpus, workers, driver, mode = int(sys.argv[3]), int(sys.argv[4]), sys.argv[1], sys.argv[2]
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=head_cpus, include_dashboard=False, **node))
    for _ in range(workers):
        cluster.add_node(num_cpus=1, **node)
    if os.environ.get("PAIRFLOW_TEST_GPU_NODE"):  # two logical GPUs (Ray resources only)
        cluster.add_node(num_cpus=2, num_gpus=2, **node)
    cluster.wait_for_nodes()
    env = dict(os.environ, PAIRFLOW_TEST_ADDRESS=cluster.address)
    cmd = [sys.executable, driver]
    if mode == "private":
        cmd = ["unshare", "--mount", "--propagation", "private"] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    cluster.shutdown()
    sys.stderr.write(out.stderr[-6000:])
    print(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "")
    sys.exit(out.returncode)
""")


def run_on_cluster(tmp_path, driver: str, head_cpus: int, workers: int, private: bool,
                   scratch: str, **env_vars) -> dict:
    """Run ``driver`` (a script's text) against a fresh Cluster; its last stdout line (JSON)."""
    (tmp_path / "driver.py").write_text(driver)
    (tmp_path / "cluster.py").write_text(CLUSTER)
    # every process of the cluster has its temporary files, Ray's session and numba's cache
    # under `scratch` (short: Ray's socket paths must stay under the Unix limit)
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=REPO,
               TMPDIR=scratch, NUMBA_CACHE_DIR=os.path.join(scratch, "numba"),
               PAIRFLOW_AUDIT_DIR=os.path.join(scratch, "audit"), **env_vars)
    os.makedirs(env["PAIRFLOW_AUDIT_DIR"])
    out = subprocess.run([sys.executable, str(tmp_path / "cluster.py"), str(tmp_path / "driver.py"),
                          "private" if private else "plain", str(head_cpus), str(workers)],
                         capture_output=True, text=True, env=env, timeout=1200, cwd=scratch)
    assert out.returncode == 0, out.stderr[-6000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


WORKERS = 3  # the shared cluster's one-CPU nodes, besides its 0-CPU head

# A Cluster until its stdin closes (argv: head CPUs, worker nodes); its address on the first line
# of stdout.
SERVE_CLUSTER = textwrap.dedent("""
    import os, sys
    from ray.cluster_utils import Cluster
    head_cpus, workers = int(sys.argv[1]), int(sys.argv[2])
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=head_cpus, include_dashboard=False, **node))
    for _ in range(workers):
        cluster.add_node(num_cpus=1, **node)
    cluster.wait_for_nodes()
    print(cluster.address, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nobody reads stdout from here on
    sys.stdin.read()
    cluster.shutdown()
""")


class Shared:
    """The module's cluster: its address, its scratch directory and its nodes' environment."""

    def __init__(self, address: str, scratch: str, env: dict):
        self.address, self.scratch, self.env = address, scratch, env


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """A moto S3 server on 127.0.0.1; the environment that points boto/s3fs at it."""
    moto_server = need_module("moto.server")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield dict(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="testing",
               AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server.stop()


@pytest.fixture(scope="module")
def shared_cluster(s3_server, tmp_path_factory):
    """A 0-CPU head and WORKERS one-CPU nodes for the tests that do not change its membership
    (starting 4 raylets on this machine's 2 cores is most of such a test's time). Every process
    of the cluster, and every driver run against it, has its temporary files, Ray's session and
    numba's cache under the cluster's scratch (short: Ray's socket paths must stay under the Unix
    limit), and the S3 server's address in its environment."""
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=REPO,
               TMPDIR=scratch, NUMBA_CACHE_DIR=os.path.join(scratch, "numba"),
               PAIRFLOW_AUDIT_DIR=os.path.join(scratch, "audit"), **s3_server)
    env.pop("RAY_ADDRESS", None)
    os.makedirs(env["PAIRFLOW_AUDIT_DIR"])
    here = tmp_path_factory.mktemp("shared-cluster")
    (here / "cluster.py").write_text(SERVE_CLUSTER)
    proc = subprocess.Popen([sys.executable, str(here / "cluster.py"), "0", str(WORKERS)],
                            cwd=scratch, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(here / "cluster.err", "w"), text=True,
                            start_new_session=True)
    try:
        address = proc.stdout.readline().strip()
        assert address, (here / "cluster.err").read_text()[-4000:]
        yield Shared(address, scratch, env)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(scratch, ignore_errors=True)


def start_driver(tmp_path, driver: str, cluster: Shared, private: bool = False):
    """Start ``driver`` (a script's text) against the shared cluster (inside a mount namespace
    of its own when ``private``); ``driver_result`` waits for it."""
    (tmp_path / "driver.py").write_text(driver)
    cmd = [sys.executable, str(tmp_path / "driver.py")]
    if private:
        cmd = ["unshare", "--mount", "--propagation", "private"] + cmd
    # its output to files: nobody reads a pipe while the test does something else meanwhile
    with open(tmp_path / "driver.out", "w") as out, open(tmp_path / "driver.err", "w") as err:
        proc = subprocess.Popen(cmd, env=dict(cluster.env, PAIRFLOW_TEST_ADDRESS=cluster.address),
                                stdout=out, stderr=err, cwd=cluster.scratch)
    proc.outputs = (tmp_path / "driver.out", tmp_path / "driver.err")
    return proc


def driver_result(proc) -> dict:
    """The driver's last stdout line (JSON), once it has ended well."""
    try:
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stdout, stderr = (p.read_text() for p in proc.outputs)
    assert proc.returncode == 0, stderr[-6000:]
    return json.loads(stdout.strip().splitlines()[-1])


def run_driver(tmp_path, driver: str, cluster: Shared, private: bool = False) -> dict:
    """Run ``driver`` against the shared cluster; its last stdout line (JSON)."""
    return driver_result(start_driver(tmp_path, driver, cluster, private))


# The driver of the runs that leave the shared cluster alone and keep nothing private: one
# process, so that each run after the first takes the actors of the one before (warm.py). First
# a formula app (pair (i, j) -> i * 1000 + j) of 24 items; then the O-locus records as files,
# read locally and over s3:// URLs.
SHARED_RUNS = textwrap.dedent("""
    import json, os
    import numpy as np, ray, zarr
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine.pairs.app import FunctionApp
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    RUNS, FILES = {runs!r}, {files!r}
    ray.init(address=os.environ["PAIRFLOW_TEST_ADDRESS"])
    head = [n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"]]
    app = FunctionApp([f"k{{i}}" for i in range(24)], load=lambda k: int(k[1:]),
                      compare=lambda a, b: a * 1000 + b)
    res = allpairs(app=app, runs_root=RUNS, leaf_items=3, progress=False, wait=True)
    m = res.matrix()
    iu = np.triu_indices(24, 1)
    meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
    out = {{"head": {{"exact": bool(np.array_equal(m[iu], iu[0] * 1000 + iu[1])),
                     "head": head, "actor_nodes": [a["node_id"] for a in meta["actors"]],
                     "journaled": res.summary["tiles_journaled"],
                     "tiles": res.summary["tiles_total"]}}}}
    for name, urls, shared in (("local", FILES, True),
                               ("s3", ["s3://inputs/" + os.path.basename(f) for f in FILES],
                                False)):
        res = allpairs(app=JaccardApp(urls, k=21, item="file"),
                       sink=DenseMatrix(diagonal={{"similarity": 1.0, "distance": 0.0}}),
                       runs_root=RUNS, leaf_items=4, progress=False, wait=True,
                       shared_fs=shared)
        g = zarr.open_group(res.outputs["dense"], mode="r")
        out[name] = {{"keys": list(g.attrs["row_keys"]),
                     "similarity": g["similarity"][...].tolist(),
                     "summary": json.load(open(os.path.join(res.run_dir, "summary.json")))}}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def shared_runs(shared_cluster, s3_server, tmp_path_factory) -> dict:
    """SHARED_RUNS's results, and ``files``: each record of the O-locus file as a FASTA file of
    its own (file items: one GET per load), also uploaded to the moto S3 server."""
    need_module("s3fs")
    from Bio import SeqIO
    tmp_path = tmp_path_factory.mktemp("shared-runs")
    files = []
    for rec in SeqIO.parse(str(need(O_LOCUS)), "genbank"):
        path = tmp_path / "inputs" / f"{rec.name}.fa"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f">{rec.name}\n{rec.seq}\n")
        files.append(str(path))
    import s3fs
    fs = s3fs.S3FileSystem(key="testing", secret="testing",
                           client_kwargs={"endpoint_url": s3_server["AWS_ENDPOINT_URL"]})
    fs.makedirs("inputs", exist_ok=True)
    for f in files:
        fs.put(f, f"inputs/{os.path.basename(f)}")
    result = run_driver(tmp_path, SHARED_RUNS.format(runs=str(tmp_path / "runs"), files=files),
                        shared_cluster)
    return dict(result, files=files)


def test_a_head_without_cpus_runs_no_device_actor_and_the_run_is_exact(shared_runs):
    """Load tasks pinned to a 0-CPU head could never be scheduled (TaskUnschedulableError)."""
    result = shared_runs["head"]
    assert result["exact"], result
    assert len(result["actor_nodes"]) == WORKERS and result["head"][0] not in result["actor_nodes"]
    assert result["journaled"] == result["tiles"]


def test_s3_inputs_through_moto_equal_local_files_and_reads_are_counted(shared_runs):
    """A moto S3 server on 127.0.0.1; the run over s3:// URLs on the cluster with nothing
    shared equals the run over the local files, and every node reports its GETs and bytes,
    which add up to whole objects. A node whose actors took every item from their peers' host
    tiers (L3) loaded nothing and read nothing: it happened to the local run once (CI,
    2026-11-28)."""
    local, s3, files = shared_runs["local"], shared_runs["s3"], shared_runs["files"]
    assert s3["keys"] == local["keys"]
    assert np.array_equal(np.array(s3["similarity"], float), np.array(local["similarity"], float),
                          equal_nan=True)
    sizes = {os.path.splitext(os.path.basename(f))[0]: os.path.getsize(f) for f in files}
    caches = s3["summary"]["node_caches"]
    assert len(caches) == WORKERS, caches
    for cache in caches:  # file items: every load is one GET of one whole object
        io = cache["io"]
        assert set(io) == ({"s3"} if cache["loads"] else set()), (io, cache["loads"])
        gets = io.get("s3", {}).get("gets", 0)
        assert gets == cache["loads"]
        assert min(sizes.values()) * gets <= io.get("s3", {}).get("bytes", 0) \
            <= max(sizes.values()) * gets
    assert sum(c["io"].get("s3", {}).get("gets", 0) for c in caches) \
        == s3["summary"]["loads"] >= len(files)
    for cache in local["summary"]["node_caches"]:
        assert set(cache["io"]) == ({"file"} if cache["loads"] else set()), cache
        assert cache["io"].get("file", {}).get("gets", 0) == cache["loads"]




# The driver of the nothing-shared test: a tmpfs over PRIVATE (seen by this process only), the
# inputs copied there, the audit hook in every worker, Jaccard and align runs, results copied
# out to EXPORT when the runs are over.
SHARED_NOTHING = textwrap.dedent("""
    import json, os, shutil, subprocess, sys
    PRIVATE, EXPORT, INPUTS = {private!r}, {export!r}, {inputs!r}
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", PRIVATE], check=True)
    local = []
    os.makedirs(os.path.join(PRIVATE, "inputs"))
    for path in INPUTS:
        local.append(shutil.copy(path, os.path.join(PRIVATE, "inputs")))

    def audit():  # in every worker process, at its start
        import os, sys
        log = open(os.path.join(os.environ["PAIRFLOW_AUDIT_DIR"], f"{{os.getpid()}}.log"), "a",
                   buffering=1)
        changes = {{"os.rename", "os.replace", "os.remove", "os.rmdir", "os.mkdir",
                   "shutil.rmtree", "os.truncate", "os.symlink", "os.link"}}
        def hook(event, args):
            if event == "open":
                name, mode, flags = args
                if name is None or isinstance(name, int):
                    return
                writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \\
                    (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
                log.write(("w" if writes else "r") + "\\t" + os.fsdecode(name) + "\\n")
            elif event in changes and args and not isinstance(args[0], int):
                log.write("w\\t" + os.fsdecode(args[0]) + "\\n")
        sys.addaudithook(hook)

    import ray
    ray.init(address=os.environ["PAIRFLOW_TEST_ADDRESS"],
             runtime_env={{"worker_process_setup_hook": audit}})
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.apps.align import align
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    runs = os.path.join(PRIVATE, "runs")
    jac = allpairs(app=JaccardApp([local[0]], k=21, item="record"),
                   sinks=[DenseMatrix(diagonal={{"similarity": 1.0, "distance": 0.0}}),
                          {{"type": "topk", "k": 3, "field": "similarity"}}],
                   runs_root=runs, leaf_items=4, progress=False, wait=True, shared_fs=False)
    aln = align(local[1], top_k=3, runs_root=runs, progress=False, leaf_items=6,
                weighted=False, shared_fs=False,
                extra_sinks=[DenseMatrix(fields=["score"], fill=-1)])
    out = {{}}
    for name, res in (("jaccard", jac), ("align", aln)):
        shutil.copytree(res.run_dir, os.path.join(EXPORT, name))
        out[name] = {{"summary": res.summary, "outputs": {{k: os.path.relpath(v, res.run_dir)
                                                          for k, v in res.outputs.items()}}}}
    print(json.dumps(out, default=str))
""")


def _reference(tmp_path):
    """The same two runs on a single-node local Ray, reading the inputs where they are."""
    from pairflow.apps.align import align
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    runs = str(tmp_path / "reference")
    jac = allpairs(app=JaccardApp([str(O_LOCUS)], k=21, item="record"),
                   sinks=[DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0}),
                          {"type": "topk", "k": 3, "field": "similarity"}],
                   runs_root=runs, leaf_items=4, progress=False, wait=True)
    aln = align(str(GLOBINS), top_k=3, runs_root=runs, progress=False, leaf_items=6,
                weighted=False, extra_sinks=[DenseMatrix(fields=["score"], fill=-1)])
    return jac, aln


def _audit(scratch: str) -> dict[int, list[tuple[str, str]]]:
    logs = {}
    audit_dir = os.path.join(scratch, "audit")
    for name in os.listdir(audit_dir):
        with open(os.path.join(audit_dir, name)) as fh:
            logs[int(name.split(".")[0])] = [tuple(l.rstrip("\n").split("\t", 1)) for l in fh]
    return logs


def test_nothing_shared_four_nodes_equal_a_single_node_run(ray_local, shared_cluster, tmp_path):
    import pandas as pd
    import zarr
    need_program("unshare")
    need_program("mount")
    inputs = [str(need(O_LOCUS)), str(need(GLOBINS))]
    private, export = tmp_path / "driver_only", tmp_path / "export"
    private.mkdir()
    scratch = shared_cluster.scratch
    audit_dir = os.path.join(scratch, "audit")
    for name in os.listdir(audit_dir):  # only this test's workers log (its runtime_env's hook)
        os.remove(os.path.join(audit_dir, name))
    driver = start_driver(
        tmp_path, SHARED_NOTHING.format(private=str(private), export=str(export), inputs=inputs),
        shared_cluster, private=True)
    try:  # the single-node reference meanwhile, on this process's own Ray
        jac_ref, aln_ref = _reference(tmp_path)
    except BaseException:
        driver.kill()
        driver.wait()
        raise
    result = driver_result(driver)
    logs = _audit(scratch)

    # no worker wrote where the driver's files are, or read or wrote outside the scratch
    assert os.listdir(private) == [], "a worker wrote under the driver's private directory"
    assert len(logs) >= 4, f"the audit hook ran in too few workers: {sorted(logs)}"
    allowed = (scratch + os.sep, "/dev/", "/proc/", "/sys/")
    writes = sorted({p for lines in logs.values() for kind, p in lines
                     if kind == "w" and not os.path.abspath(p).startswith(allowed)})
    assert writes == [], f"workers wrote outside their scratch: {writes[:20]}"
    touched = sorted({p for lines in logs.values() for _, p in lines
                      if os.path.abspath(p).startswith((str(private), str(export)))})
    assert touched == [], f"workers opened the driver's files: {touched[:20]}"

    # Jaccard: the dense matrices and the top-k lists equal the single-node run's
    jac = result["jaccard"]
    assert jac["summary"]["shared_fs"] is False
    assert jac["summary"]["shipped"]["input_files"] == 1
    assert jac["summary"]["tiles_journaled"] == jac["summary"]["tiles_total"]
    got = zarr.open_group(str(export / "jaccard" / jac["outputs"]["dense"]), mode="r")
    want = zarr.open_group(jac_ref.outputs["dense"], mode="r")
    assert list(got.attrs["row_keys"]) == list(want.attrs["row_keys"])
    for field in ("similarity", "distance"):
        assert np.array_equal(got[field][...], want[field][...], equal_nan=True), field
    assert pd.read_parquet(str(export / "jaccard" / jac["outputs"]["topk"])).equals(
        pd.read_parquet(jac_ref.outputs["topk"]))

    # align: the score matrix and the hits (with their tracebacks) equal the single-node run's
    aln = result["align"]
    assert aln["summary"]["shared_fs"] is False
    got = zarr.open_group(str(export / "align" / aln["outputs"]["dense"]), mode="r")
    want = zarr.open_group(aln_ref.outputs["dense"], mode="r")
    assert np.array_equal(got["score"][...], want["score"][...])
    assert pd.read_parquet(str(export / "align" / aln["outputs"]["topk"])).equals(
        pd.read_parquet(aln_ref.outputs["topk"]))


def test_memory_urls_fail_before_compute_naming_the_url(ray_local, tmp_path):
    import fsspec
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import InputError
    from pairflow.engine.pairs.driver import allpairs
    with fsspec.open("memory://pf/a.fa", "wb") as fh:
        fh.write(b">a\nACGTACGTACGTACGTACGTACGTACGT\n")
    with fsspec.open("memory://pf/b.fa", "wb") as fh:
        fh.write(b">b\nACGTACGTACGTACGTACGTACGTACGA\n")
    with pytest.raises(InputError, match="memory://pf/a.fa.*driver's process only"):
        allpairs(app=JaccardApp(["memory://pf/a.fa", "memory://pf/b.fa"], k=5),
                 runs_root=str(tmp_path), progress=False, wait=True)


def test_each_gpu_actor_gets_a_device_of_its_own(tmp_path):
    """A node with two (logical) GPUs runs two GPU actors, each with num_gpus=1: Ray gives each
    its own CUDA_VISIBLE_DEVICES. The compare encodes the device it saw into every value."""
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        result = run_on_cluster(tmp_path, textwrap.dedent(f"""
            import json, os
            import numpy as np, ray
            from ray.util.state import list_actors
            from pairflow.engine.pairs.app import BasePairApp
            from pairflow.engine.pairs.driver import allpairs
            from ray.cluster_utils import Cluster
            ray.init(address=os.environ["PAIRFLOW_TEST_ADDRESS"])

            class Devices(BasePairApp):
                name = "devices"
                def keys(self):
                    return [f"k{{i}}" for i in range(24)]
                def parse(self, key, raw):
                    return int(key[1:])
                def compare(self, left, right, mask, device):
                    assert device == "cuda", device
                    seen = os.environ.get("CUDA_VISIBLE_DEVICES", "")
                    assert "," not in seen and seen != "", seen  # one device, its own
                    li, ri = np.array(left)[:, None], np.array(right)[None, :]
                    return (int(seen) * 10**6 + li * 1000 + ri).astype(float)

            res = allpairs(app=Devices(), runs_root={str(tmp_path / "runs")!r}, leaf_items=2,
                           progress=False, wait=True)
            m = res.matrix()
            iu = np.triu_indices(24, 1)
            tiles = [json.loads(l) for l in open(os.path.join(res.run_dir, "tiles.jsonl"))]
            print(json.dumps({{"values": m[iu].tolist(), "rows": iu[0].tolist(),
                              "cols": iu[1].tolist(), "actors": res.summary["n_actors"],
                              "devices": [a["device"] for a in json.load(open(
                                  os.path.join(res.run_dir, "meta.json")))["actors"]]}}))
        """), head_cpus=0, workers=0, private=False, scratch=scratch,
            PAIRFLOW_TEST_GPU_NODE="1")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    values = np.array(result["values"])
    rows, cols = np.array(result["rows"]), np.array(result["cols"])
    device = values // 10**6
    assert np.array_equal(values - device * 10**6, rows * 1000 + cols)  # exact otherwise
    assert result["devices"] == ["cuda", "cuda"]
    assert set(device.tolist()) == {0, 1}, "both GPUs computed tiles, each actor on its own"


def test_a_node_removed_and_a_node_added_mid_run(tmp_path):
    """Nothing shared, a 0-CPU head: the run's only worker node leaves after a quarter of the
    tiles and a new node joins; the new node runs tiles, each tile is journaled once, and the
    result is exact."""
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        (tmp_path / "driver.py").write_text(textwrap.dedent(f"""
            import json, os, time
            import numpy as np, ray
            from ray.cluster_utils import Cluster
            from pairflow.engine.pairs.app import FunctionApp
            from pairflow.engine.pairs.driver import allpairs
            node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
            cluster = Cluster(initialize_head=True, head_node_args=dict(
                num_cpus=0, include_dashboard=False, **node))
            first = cluster.add_node(num_cpus=1, **node)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address)

            def compare(a, b):
                time.sleep(0.02)
                return a * 1000 + b
            app = FunctionApp([f"k{{i}}" for i in range(30)], load=lambda k: int(k[1:]),
                              compare=compare)
            h = allpairs(app=app, runs_root={str(tmp_path / "runs")!r}, leaf_items=2,
                         progress=False, shared_fs=False)
            total = json.load(open(os.path.join(h.run_dir, "meta.json")))["tiles_total"]
            while h.progress()["done"] < total // 4:
                time.sleep(0.05)
            cluster.add_node(num_cpus=1, **node)
            while h.progress()["done"] < total // 3:
                time.sleep(0.05)
            cluster.remove_node(first)
            res = h.result(timeout=600)
            m = res.matrix()
            iu = np.triu_indices(30, 1)
            tiles = [json.loads(l) for l in open(os.path.join(res.run_dir, "journal.jsonl"))]
            ran = [json.loads(l)["actor"] for l in open(os.path.join(res.run_dir, "tiles.jsonl"))]
            print(json.dumps({{"exact": bool(np.array_equal(m[iu], iu[0] * 1000 + iu[1])),
                              "once": sorted(t["tile"] for t in tiles) == list(range(total)),
                              "new_node_tiles": sum(a.startswith("node-1/") for a in ran),
                              "lost": res.summary["lost_actors"]}}))
            ray.shutdown()
            cluster.shutdown()
        """))
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=REPO,
                   TMPDIR=scratch)
        out = subprocess.run([sys.executable, str(tmp_path / "driver.py")], capture_output=True,
                             text=True, env=env, timeout=900, cwd=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-6000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["exact"] and result["once"], result
    assert result["new_node_tiles"] > 0, result
    assert result["lost"] and all(not a["node_alive"] for a in result["lost"]), result
