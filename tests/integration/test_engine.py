"""The engine on a local Ray: REPL form, sinks, invariance to leaf size and cache budget,
Triangle vs Rectangle, the torch backend, the Hydra CLI, and bad input failing before compute."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import need_module
from tests.oracles import KLEBSIELLA, canonical_kmers, jaccard_matrix, read_sequences

pytestmark = pytest.mark.ray
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def loci(tmp_path_factory):
    """24 real Klebsiella capsule loci as one FASTA, and their brute-force Jaccard matrix."""
    recs = read_sequences(KLEBSIELLA, "genbank")[:24]
    path = tmp_path_factory.mktemp("loci") / "loci.fa"
    path.write_text("".join(f">{n}\n{s}\n" for n, s in recs))
    sim, _ = jaccard_matrix([canonical_kmers([s], 21) for _, s in recs])
    return str(path), sim


def jaccard(path, runs, **opts):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    opts.setdefault("progress", False)
    app = opts.pop("app", None) or JaccardApp([path], k=21, item="record")
    return allpairs(app=app, sink=DenseMatrix(diagonal={"similarity": 1.0}), runs_root=runs,
                    wait=True, **opts)


def test_repl_form_with_topk_and_threshold(ray_local, runs):
    from pairflow.engine import allpairs
    rng = np.random.default_rng(3)
    data = {f"v{i}": rng.random(20) for i in range(25)}
    handle = allpairs(list(data), load=lambda k: data[k], compare=lambda a, b: float(a @ b),
                      sinks=["dense", {"type": "topk", "k": 4}, {"type": "threshold", "t": 5.5}],
                      runs_root=runs, leaf_items=4, progress=False)
    res = handle.result()
    x = np.stack(list(data.values()))
    ref = x @ x.T
    iu = np.triu_indices(25, 1)
    m = res.matrix()
    np.testing.assert_allclose(m[iu], ref[iu], rtol=1e-12)
    np.testing.assert_allclose(m.T[iu], ref[iu], rtol=1e-12)
    np.testing.assert_allclose(res.dask().compute()[iu], ref[iu], rtol=1e-12)
    top = res.topk
    for q in range(25):
        order = sorted((t for t in range(25) if t != q), key=lambda t: (-ref[q, t], t))[:4]
        assert list(top[top.qi == q].ti) == order
    edges = res.edges
    want = sorted((i, j) for i, j in zip(*iu) if ref[i, j] >= 5.5)
    assert list(zip(edges.i, edges.j)) == want
    assert handle.progress()["done"] == res.summary["tiles_total"]
    assert res.summary["tiles_journaled"] == res.summary["tiles_total"]


def test_rectangle_queries_by_targets(ray_local, runs):
    from pairflow.engine import allpairs
    q = [str(i) for i in range(7)]
    t = [str(100 + i) for i in range(11)]
    res = allpairs(q, targets=t, load=lambda k: int(k), compare=lambda a, b: a * 1000 + b,
                   runs_root=runs, leaf_items=3, progress=False, wait=True)
    expected = np.array([[int(a) * 1000 + int(b) for b in t] for a in q], float)
    assert np.array_equal(res.matrix(), expected)


@pytest.mark.parametrize("leaf,host", [(1, 2), (7, 2), (64, None), (7, 5), (1, 24), (7, 24)])
def test_same_matrix_for_leaf_sizes_and_cache_budgets(ray_local, runs, loci, leaf, host):
    path, sim = loci
    res = jaccard(path, runs, leaf_items=leaf, host_cache_items=host)
    np.testing.assert_allclose(res.matrix("similarity"), sim, atol=1e-12)
    s = res.summary
    units = s["packs"] or s["n_items"]  # what the caches hold and R counts: packs or items
    assert res.R == s["loads"] / units and s["loads"] >= units  # each loaded at least once
    if host and host < 24:
        # every item passes through a host tier smaller than the set, so it must evict
        assert s["tiers"]["L2"]["evictions"] > 0
        # A run that loads each unit once holds every one of them at once (when the last is
        # loaded, each earlier one still has its pair with it to come), in the host tier or an
        # actor's L1: when they cannot hold as many together, some unit is loaded again.
        # (Where they can, R = 1 does come out: the actors' L1s may keep every pack.)
        from pairflow.engine.pairs.cache.tiers import device_cache_items
        in_flight = json.load(open(os.path.join(res.run_dir, "meta.json")))["in_flight"]
        host_units, l1_units = (max(1, host // leaf), device_cache_items(1, in_flight)) \
            if s["packs"] else (host, device_cache_items(leaf, in_flight))
        if host_units + s["n_actors"] * l1_units < units:
            assert res.R > 1.0, (res.R, host_units, l1_units, units)


def test_zorder_lru_baseline_gives_the_same_matrix(ray_local, runs, loci):
    path, sim = loci
    res = jaccard(path, runs, leaf_items=2, host_cache_items=6, plan="zorder", eviction="lru")
    np.testing.assert_allclose(res.matrix("similarity"), sim, atol=1e-12)


def test_triangle_equals_upper_half_of_rectangle(ray_local, runs, loci):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import Rectangle
    path, sim = loci

    class Square(JaccardApp):
        def space(self):
            return Rectangle(len(self.keys()), len(self.keys()))

    tri = jaccard(path, runs, leaf_items=5).matrix("similarity")
    sq = jaccard(path, runs, leaf_items=5, app=Square([path], 21, "record")).matrix("similarity")
    iu = np.triu_indices(24, 1)
    assert np.array_equal(tri[iu], sq[iu])
    np.testing.assert_allclose(np.diag(sq), 1.0)  # a set against itself: computed, not filled


def test_torch_backend_on_cpu_matches_numpy(ray_local, runs, loci):
    need_module("torch")
    path, sim = loci
    res = jaccard(path, runs, leaf_items=6, devices="torch-cpu")
    assert {a["device"] for a in json.load(open(os.path.join(res.run_dir, "meta.json")))["actors"]} \
        == {"torch-cpu"}
    np.testing.assert_allclose(res.matrix("similarity"), sim, atol=1e-12)


def test_run_directory_is_complete(ray_local, runs, loci):
    path, _ = loci
    res = jaccard(path, runs, leaf_items=4)
    d = res.run_dir
    for name in ("config.yaml", "meta.json", "tiles.json", "status.json", "metrics.jsonl",
                 "tiles.jsonl", "trace.jsonl", "trace.parquet", "journal.jsonl", "summary.json"):
        assert os.path.exists(os.path.join(d, name)), name
    assert json.load(open(os.path.join(d, "status.json")))["state"] == "finished"
    last = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))][-1]
    assert last["tiles_done"] == last["tiles_total"] == res.summary["tiles_total"]
    assert last["R"] == pytest.approx(res.R)
    assert not any(n.endswith(".partial") for n in os.listdir(os.path.join(d, "result")))
    trace = pd.read_parquet(os.path.join(d, "trace.parquet"))
    assert {"load", "parse", "preprocess", "compare", "write"} <= set(trace.stage)


# ---- bad input fails before compute, naming file / record / problem -------------------------

def failing_run(tmp_path, runs, files, k=21, item="file", match=()):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.errors import InputError
    with pytest.raises((InputError, ValueError)) as err:
        app = JaccardApp([str(f) for f in files], k=k, item=item)
        allpairs(app=app, runs_root=runs, wait=True, progress=False)
    msg = str(err.value)
    for m in match:
        assert m in msg, (m, msg)
    for root, _, names in os.walk(runs):
        if "journal.jsonl" in names:
            assert os.path.getsize(os.path.join(root, "journal.jsonl")) == 0, "no tile computed"
        if "status.json" in names:
            assert json.load(open(os.path.join(root, "status.json")))["state"] == "failed"
    return msg


def good(tmp_path, name="good.fa"):
    p = tmp_path / name
    p.write_text(">g\n" + "ACGTTGCAAGCTTAGC" * 20 + "\n")
    return p


def test_missing_file(ray_local, tmp_path, runs):
    failing_run(tmp_path, runs, [good(tmp_path), tmp_path / "absent.fa"],
                match=("absent.fa", "not found"))


def test_empty_file(ray_local, tmp_path, runs):
    empty = tmp_path / "empty.fa"
    empty.write_text("")
    failing_run(tmp_path, runs, [good(tmp_path), empty], match=("empty.fa", "empty"))


def test_not_fasta(ray_local, tmp_path, runs):
    junk = tmp_path / "junk.fa"
    junk.write_bytes(bytes(range(256)) * 10)
    failing_run(tmp_path, runs, [good(tmp_path), junk], match=("junk.fa",))


def test_no_valid_kmer(ray_local, tmp_path, runs):
    bad = tmp_path / "ns.fa"
    bad.write_text(">allN\n" + "N" * 500 + "\n>short\nACGT\n")
    msg = failing_run(tmp_path, runs, [good(tmp_path), bad], item="record",
                      match=("ns.fa", "allN", "no valid 21-mer"))
    assert "short" not in msg.split("allN")[0]


@pytest.mark.parametrize("k", [0, 32, -3])
def test_k_out_of_range(tmp_path, k):
    from pairflow.apps.jaccard import JaccardApp
    with pytest.raises(ValueError, match="k must be"):
        JaccardApp([str(good(tmp_path))], k=k)


def test_hydra_cli_run_and_bad_k(tmp_path, loci):
    """The real console script, as a user runs it (its own local Ray)."""
    path, sim = loci
    exe = os.path.join(os.path.dirname(sys.executable), "pairflow")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = subprocess.run([exe, "app=jaccard", f"data.inputs={path}", "data.item=record",
                          "data.k=21", "sink=dense", f"runs_root={tmp_path}/runs",
                          "cluster.num_cpus=2", "cluster.object_store_mb=512"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "n=24 k=21 pairs=276" in out.stdout and "R = " in out.stdout
    run_dir = [l.split(": ", 1)[1] for l in out.stdout.splitlines() if l.startswith("dense: ")][0]
    import zarr
    got = zarr.open_group(run_dir, mode="r")["similarity"][...]
    np.testing.assert_allclose(got, sim, atol=1e-12)
    bad = subprocess.run([exe, f"data.inputs={path}", "data.k=40", f"runs_root={tmp_path}/r2"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "k must be an integer from 1 to 31" in bad.stderr


def test_load_task_returns_its_items_as_one_object(ray_local):
    """``one_object``: a load task's items come back as one object, each item a part of it."""
    import asyncio
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine.pairs.workers.actors import NodeCacheSpec, _LoadTasks
    from pairflow.engine.pairs.cache.loading import BatchPart, resolve
    app = SyntheticApp(6, item_floats=20_000)  # 160 KB items: above the 64 KiB kept by value
    spec = dict(node="node-0", node_id=None, app=app, item_keys=app.keys(), budget_bytes=None,
                budget_items=None, eviction="lru", preprocess_on="cpu")
    handles, infos = _LoadTasks(NodeCacheSpec(**spec, one_object=True))([0, 2, 5])
    assert all(isinstance(h, BatchPart) for h in handles)
    assert len({h.ref for h in handles}) == 1
    got = asyncio.run(resolve(dict(zip([0, 2, 5], handles))))
    for i in (0, 2, 5):  # item i is 20,000 copies of i
        assert np.array_equal(got[i], np.full(20_000, float(i)))
    assert [info["nbytes"] for info in asyncio.run(_await(infos))] == [160_000] * 3
    apart, _ = _LoadTasks(NodeCacheSpec(**spec))([1, 4])  # the default: one object per item
    assert not any(isinstance(h, BatchPart) for h in apart) and apart[0] != apart[1]


async def _await(ref):
    return await ref


@pytest.mark.parametrize("host", [None, 4])
def test_large_items_give_the_right_matrix_whether_loaded_as_one_object_or_apart(
        ray_local, runs, host):
    """Items above the inline size: one object per load task when the host tier holds them
    all (host None), one per item when it must evict (4 of 12); the matrix is the hand formula
    either way."""
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine.pairs.driver import allpairs
    app = SyntheticApp(12, item_floats=20_000)
    res = allpairs(app=app, runs_root=runs, leaf_items=3, load_batch=3, host_cache_items=host,
                   progress=False, wait=True)
    expected = np.array([[SyntheticApp.expected(i, j) if i < j else np.nan for j in range(12)]
                         for i in range(12)])
    got = res.matrix()
    upper = np.triu(np.ones((12, 12), bool), 1)
    np.testing.assert_array_equal(got[upper], expected[upper])
    # which load path ran (sizing.one_object_loads: one node, a tier holding every item)
    assert ("holds every item" in res.summary["plan_choice"]["note"]) == (host is None)
    if host:
        assert res.summary["tiers"]["L2"]["evictions"] > 0
