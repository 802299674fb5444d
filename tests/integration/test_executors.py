"""The in-process executor (threads, no Ray) and the Ray executor give identical results on the
synthetic, Jaccard and align apps, each also checked against an independent oracle; the in-process
path imports no Ray, picks itself for small runs, and its journal resumes and repairs."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.dense_layout import cell_span
from tests.oracles import KLEBSIELLA, canonical_kmers, jaccard_matrix, read_sequences

pytestmark = pytest.mark.ray
EXECUTORS = ("inprocess", "ray")


def _dense(res, field):
    import zarr
    return zarr.open_group(res.outputs["dense"], mode="r")[field][...]


def test_synthetic_identical_on_both_executors_and_equal_to_the_formula(ray_local, runs):
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs
    n = 37
    got = {}
    for ex in EXECUTORS:
        res = allpairs(app=SyntheticApp(n), sink="dense", runs_root=runs, progress=False,
                       wait=True, leaf_items=5, executor=ex)
        assert res.summary["executor"] == ex
        assert res.summary["tiles_journaled"] == res.summary["tiles_total"]
        got[ex] = res.matrix()
    assert np.array_equal(got["inprocess"], got["ray"], equal_nan=True)
    iu = np.triu_indices(n, 1)
    assert np.array_equal(got["inprocess"][iu], (iu[0] * 7919 + iu[1]) % 1000)


@pytest.fixture(scope="module")
def klebsiella():
    records = read_sequences(KLEBSIELLA, "genbank")[:40]
    sim, inter = jaccard_matrix([canonical_kmers([s], 21) for _, s in records])
    return [n for n, _ in records], sim, inter


def test_jaccard_identical_on_both_executors_and_equal_to_brute_force(ray_local, runs,
                                                                     klebsiella, tmp_path):
    """40 Klebsiella loci as records of one FASTA, k = 21, dense and top-k sinks."""
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix, TopK, allpairs
    names, sim, inter = klebsiella
    fasta = tmp_path / "loci.fa"
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in read_sequences(KLEBSIELLA, "genbank")
                             [:40]))
    got = {}
    for ex in EXECUTORS:
        app = JaccardApp([str(fasta)], k=21, item="record")
        res = allpairs(app=app, sinks=[DenseMatrix(diagonal={"similarity": 1.0}),
                                       TopK(3, field="similarity")],
                       runs_root=runs, progress=False, wait=True, leaf_items=6, executor=ex)
        assert res.summary["executor"] == ex
        assert [k.split("/", 1)[1] for k in app.keys()] == names
        got[ex] = (_dense(res, "similarity"), _dense(res, "intersection"), res.topk)
    a, b = got["inprocess"], got["ray"]
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert a[2].equals(b[2])
    np.testing.assert_allclose(a[0], sim, rtol=0, atol=1e-12)
    iu = np.triu_indices(40, 1)
    assert np.array_equal(a[1][iu], inter[iu])


def test_align_identical_on_both_executors_and_equal_to_biopython(ray_local, runs):
    """globins45 all-vs-all, weighted tiles (Z-order, tail split): hits and tracebacks equal
    across executors, scores equal Biopython's local aligner."""
    from tests.conftest import need
    from tests.unit.conftest import SHARE
    from pairflow.apps.align import align
    from pairflow.kernels.scoring import Scoring
    from Bio import SeqIO
    path = str(need(SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"))
    recs = {r.name: str(r.seq) for r in SeqIO.parse(path, "fasta")}
    aligner = Scoring.create("blosum62", 11, 1).biopython_aligner()
    hits = {}
    for ex in EXECUTORS:
        res = align(path, top_k=3, matrix="blosum62", gap_open=11, gap_extend=1,
                    runs_root=runs, progress=False, executor=ex)
        assert res.summary["executor"] == ex
        hits[ex] = res.hits.drop(columns=[c for c in res.hits.columns if "time" in c])
    assert hits["inprocess"].equals(hits["ray"])
    assert len(hits["ray"]) == 45 * 3
    for row in hits["ray"].itertuples():
        assert row.score == int(aligner.score(recs[row.qseqid], recs[row.sseqid]))


def test_inprocess_run_imports_no_ray_and_is_chosen_for_small_work(tmp_path):
    """In a fresh interpreter with nothing named: a small run goes in-process and Ray is never
    imported; ``inprocess_max_s=0`` sends the same run to Ray."""
    script = textwrap.dedent(f"""
        import json, sys
        from pairflow.apps.synthetic import SyntheticApp
        from pairflow.engine import allpairs
        res = allpairs(app=SyntheticApp(12), runs_root={str(tmp_path)!r}, progress=False,
                       wait=True, num_cpus=2, object_store_mb=256, inprocess_max_s=float(sys.argv[1]))
        print(json.dumps({{"executor": res.summary["executor"], "ray": "ray" in sys.modules}}))
    """)
    out = {}
    for limit in ("20", "0"):
        proc = subprocess.run([sys.executable, "-c", script, limit], capture_output=True,
                              text=True, timeout=300, cwd=str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[limit] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["20"] == {"executor": "inprocess", "ray": False}
    assert out["0"] == {"executor": "ray", "ray": True}


def _journal(run_dir):
    with open(os.path.join(run_dir, "journal.jsonl")) as fh:
        return fh.readlines()


def test_inprocess_resume_recomputes_what_the_journal_lacks_and_repairs_corruption(runs):
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs
    n = 30
    opts = dict(sink="dense", progress=False, wait=True, leaf_items=4, executor="inprocess")
    res = allpairs(app=SyntheticApp(n), runs_root=runs, **opts)
    good = res.matrix()
    total = res.summary["tiles_total"]
    lines = _journal(res.run_dir)
    assert len(lines) == total
    # a run killed after half its tiles: the journal holds only those
    with open(os.path.join(res.run_dir, "journal.jsonl"), "w") as fh:
        fh.writelines(lines[:total // 2])
    # and a cell of one of the kept tiles was damaged on disk, in the chunk that holds it
    r0, _, _, c1 = json.loads(lines[0])["region"]
    path, start, _ = cell_span(os.path.join(res.run_dir, "result", "matrix.zarr", "value"),
                               r0, c1 - 1)
    raw = bytearray(open(path, "rb").read())
    raw[start] ^= 0xFF
    open(path, "wb").write(bytes(raw))
    again = allpairs(app=SyntheticApp(n), run_dir=res.run_dir, resume=True, **opts)
    rep = again.summary["resumed"]
    assert again.summary["executor"] == "inprocess"
    assert rep["reused"] == total // 2 - 1 and rep["repaired"] == 1, rep
    assert rep["recomputed"] == total - total // 2, rep
    assert np.array_equal(again.matrix(), good, equal_nan=True)


def test_a_session_keeps_one_ray_across_runs(tmp_path):
    """In a fresh interpreter: three runs (two apps) in one session share one Ray (``ray.init``
    is called once, by the session, and the later runs wait for no start of it) and the warm
    actor processes of the finished runs; each result equals its formula or brute force;
    leaving the session stops that Ray."""
    script = textwrap.dedent(f"""
        import json, sys, time
        import numpy as np
        import ray
        inits = []
        ray_init = ray.init
        def counted_init(*args, **kwargs):
            inits.append(1)
            return ray_init(*args, **kwargs)
        ray.init = counted_init
        from pairflow import engine
        from pairflow.apps.synthetic import SyntheticApp
        out = []
        with engine.session(num_cpus=2, object_store_mb=256, progress=False) as s:
            for n in (10, 14, 12):
                res = s.allpairs(app=SyntheticApp(n), runs_root={str(tmp_path)!r}, wait=True,
                                 leaf_items=3)
                m = res.matrix()
                iu = np.triu_indices(n, 1)
                meta = json.load(open(res.run_dir + "/meta.json"))
                out.append({{"executor": res.summary["executor"],
                            "ok": bool(np.array_equal(m[iu], (iu[0] * 7919 + iu[1]) % 1000)),
                            "pids": sorted(a["pid"] for a in meta["actors"]),
                            "node": ray.get_runtime_context().get_node_id(),
                            "ray_init_s": res.summary["phases"]["ray_init_s"]}})
        out.append({{"ray_up_after": ray.is_initialized(), "inits": len(inits)}})
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second, third, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first["executor"] == second["executor"] == third["executor"] == "ray"
    assert first["ok"] and second["ok"] and third["ok"]
    assert first["node"] == second["node"] == third["node"], "a run started a Ray of its own"
    assert first["pids"] == second["pids"] == third["pids"], "the warm actors were not reused"
    # Ray started once, in the session; its start is charged to the first run that waited for
    # it (if any did) and to no later one
    assert after == {"ray_up_after": False, "inits": 1}
    assert second["ray_init_s"] == third["ray_init_s"] == 0.0


def test_a_later_run_on_the_same_ray_takes_the_warm_actors_of_the_one_before(ray_local, runs):
    """Without a session: a run on a Ray that stays up takes the idle device actors of the run
    before it (the same processes); one killed while idle is replaced by a new one, the run
    losing nothing; every result equals the formula."""
    import signal

    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs

    def run(n):
        res = allpairs(app=SyntheticApp(n), runs_root=runs, wait=True, progress=False,
                       leaf_items=3, executor="ray")
        m = res.matrix()
        iu = np.triu_indices(n, 1)
        assert np.array_equal(m[iu], (iu[0] * 7919 + iu[1]) % 1000)
        meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
        return sorted(a["pid"] for a in meta["actors"]), res

    first, _ = run(10)
    second, _ = run(14)
    assert len(first) == 2 and first == second, "the warm actors were not reused"
    os.kill(second[0], signal.SIGKILL)
    third, res = run(12)
    assert second[0] not in third and second[1] in third, (second, third)
    assert res.summary["lost_actors"] == []
