"""Jaccard on many short reads, through the engine: the 10,000 lambda reads of bowtie2's examples
at k = 5 and 7 (the bad ones skipped and counted), checked against plain Python sets; TopK and
Threshold against a sort of the full matrix; the bitset and merge kernels through the engine."""
from __future__ import annotations

import os
import random
import re

import numpy as np
import pandas as pd
import pytest

from tests.conftest import need
from tests.oracles import READS, jaccard, kmer_set, read_fastq

pytestmark = pytest.mark.ray

T = 0.3  # the Threshold sink's cut: some 10^5 pairs of overlapping reads pass


def _path(name="reads_1"):
    return str(need(os.path.join(READS, f"{name}.fq.gz")))


@pytest.fixture(scope="module")
def reads():
    return read_fastq(_path())


def _run(app, runs, sinks, **opts):
    from pairflow.engine import allpairs
    opts.setdefault("progress", False)
    return allpairs(app=app, sinks=sinks, runs_root=runs, wait=True, **opts)


@pytest.mark.parametrize("k", [5, 7])
def test_all_reads_at_k_equal_python_sets(ray_local, runs, reads, k):
    from pairflow.apps.jaccard import SKIPPED_FILE, JaccardApp
    from pairflow.engine import Threshold, TopK
    app = JaccardApp([_path()], k=k, item="record")
    res = _run(app, runs, [TopK(10, field="similarity"), Threshold(T, field="similarity")])
    # skipped and counted: an independent count of reads with no window of k ACGT letters
    window = re.compile(f"[ACGT]{{{k}}}")
    bad = [n for n, s in reads if not window.search(s.upper())]
    assert len(reads) == 10_000 and bad
    s = res.summary
    assert s["app_info"]["skipped_records"] == len(bad) and s["app_info"]["kernel"] == "bitset"
    assert s["n_items"] == 10_000 - len(bad)
    assert s["pairs_total"] == s["n_items"] * (s["n_items"] - 1) // 2
    listed = open(os.path.join(res.run_dir, SKIPPED_FILE)).read().splitlines()[1:]
    assert [line.split("\t")[2] for line in listed] == bad

    seqs = dict(reads)
    names = [key.split("/", 1)[1] for key in app.keys()]
    sets = [kmer_set(seqs[n], k) for n in names]
    edges = pd.read_parquet(res.outputs["threshold"])
    got = {(int(i), int(j)): v for i, j, v in zip(edges.i, edges.j, edges.value)}
    rng = random.Random(k)
    n = len(names)
    # a random sample of all pairs: those at or above T are edges with the oracle's value,
    # the others are not edges
    for _ in range(10_000):
        i, j = sorted(rng.sample(range(n), 2))
        want = jaccard(sets[i], sets[j])
        if want >= T:
            assert got[(i, j)] == pytest.approx(want, abs=1e-12), (names[i], names[j])
        else:
            assert (i, j) not in got, (names[i], names[j], want)
    # a random sample of the edges: the oracle's value
    assert len(got) > 10_000
    for (i, j) in rng.sample(sorted(got), 10_000):
        assert i < j and got[(i, j)] == pytest.approx(jaccard(sets[i], sets[j]), abs=1e-12)
    # top 10 of some queries against all the others (ties: lower index first)
    top = pd.read_parquet(res.outputs["topk"])
    assert len(top) == 10 * n
    for q in rng.sample(range(n), 25):
        scores = sorted(((-jaccard(sets[q], sets[t]), t) for t in range(n) if t != q))[:10]
        mine = top[top.qi == q].sort_values("rank")
        assert mine.ti.tolist() == [t for _, t in scores]
        np.testing.assert_allclose(mine.score, [-v for v, _ in scores], atol=1e-12)


@pytest.mark.parametrize("kernel", ["bitset", "merge"])
def test_topk_threshold_and_dense_equal_the_full_matrix(ray_local, runs, reads, tmp_path,
                                                        kernel, capfd):
    """A few hundred reads (two files, one of them FASTA with a bad read kept out by skip): the
    dense matrix equals the Python-set matrix for both kernels, and TopK and Threshold equal a
    sort of that matrix."""
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix, Threshold, TopK
    pick = reads[:150]
    fq = tmp_path / "a.fq"
    fq.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in pick))
    fa = tmp_path / "b.fa"
    more = reads[5000:5150]
    fa.write_text("".join(f">{n}\n{s}\n" for n, s in more) + ">allN\nNNNNNNNNNN\n")
    k, top_k, t = 5, 4, 0.35
    app = JaccardApp([str(fq), str(fa)], k=k, item="record", kernel=kernel,
                     on_bad_record="skip")
    assert app.kernel == kernel and [s[2] for s in app.skipped] == ["allN"]
    res = _run(app, runs, [DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0}),
                           TopK(top_k, field="similarity"), Threshold(t, field="similarity")],
               leaf_items=64, progress=True)
    # the progress line (no terminal here: one line every few seconds and the last) keeps
    # the pairs compared per second
    last = [line for line in capfd.readouterr().err.splitlines() if "[pairflow] tiles" in line]
    assert last and re.search(r"pairs/s=[\d,]+", last[-1]), last[-1:]
    seqs = [s for _, s in pick + more]
    sets = [kmer_set(s, k) for s in seqs]
    n = len(sets)
    full = np.array([[jaccard(a, b) if i != j else 1.0 for j, b in enumerate(sets)]
                     for i, a in enumerate(sets)])
    np.testing.assert_allclose(res.matrix("similarity"), full, rtol=0, atol=1e-12)
    np.testing.assert_allclose(res.matrix("distance"), 1 - full, rtol=0, atol=1e-12)
    top = pd.read_parquet(res.outputs["topk"])
    for q in range(n):
        order = sorted((-full[q, c], c) for c in range(n) if c != q)[:top_k]
        mine = top[top.qi == q].sort_values("rank")
        assert mine.ti.tolist() == [c for _, c in order], q
        np.testing.assert_allclose(mine.score, [-v for v, _ in order], atol=1e-12)
    edges = pd.read_parquet(res.outputs["threshold"])
    want = [(i, j) for i in range(n) for j in range(i + 1, n) if full[i, j] >= t]
    assert list(zip(edges.i.tolist(), edges.j.tolist())) == want
    np.testing.assert_allclose(edges.value, [full[i, j] for i, j in want], atol=1e-12)


@pytest.mark.parametrize("executor", ["inprocess", "ray"])
def test_sinks_kept_in_the_kernel_equal_the_full_matrix(ray_local, runs, reads, tmp_path,
                                                        executor):
    """TopK (largest and smallest) and Threshold alone: every tile goes through the kernel's
    reduction (``compare_reduced``, no postprocess span in the trace) and the outputs equal a
    sort of the Python-set matrix. The reads are cached in packs of a tile side (70), on Ray
    through the object store (no pack travels inline)."""
    import json

    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import Threshold, TopK
    pick = reads[200:520]
    fq = tmp_path / "r.fq"
    fq.write_text("".join(f"@{n}\n{s}\n+\n{'I' * len(s)}\n" for n, s in pick))
    k, top_k, t = 5, 3, 0.3
    app = JaccardApp([str(fq)], k=k, item="record", kernel="bitset")
    res = _run(app, runs, [TopK(top_k, field="similarity"),
                           TopK(2, field="similarity", largest=False, per="col"),
                           Threshold(t, field="similarity")], leaf_items=70,
               executor=executor, inline_item_bytes=0)
    assert res.summary["executor"] == executor
    assert res.summary["packs"] == -(-res.summary["n_items"] // 70)
    with open(os.path.join(res.run_dir, "trace.jsonl")) as fh:
        stages = {json.loads(line).get("stage") for line in fh}
    assert "compare" in stages and "postprocess" not in stages
    sets = [kmer_set(s, k) for _, s in pick]
    sets = [s for s in sets if s]  # reads without a valid k-mer are skipped
    n = len(sets)
    assert n == res.summary["n_items"]
    full = np.array([[jaccard(a, b) for b in sets] for a in sets])
    for name, sign, kk in (("topk", -1, top_k), ("topk_cols", 1, 2)):
        top = pd.read_parquet(res.outputs[name])
        for q in range(n):
            order = sorted((sign * full[q, c], c) for c in range(n) if c != q)[:kk]
            mine = top[top.qi == q].sort_values("rank")
            assert mine.ti.tolist() == [c for _, c in order], (name, q)
            assert mine.score.tolist() == [full[q, c] for _, c in order]
    edges = pd.read_parquet(res.outputs["threshold"])
    want = [(i, j) for i in range(n) for j in range(i + 1, n) if full[i, j] >= t]
    assert list(zip(edges.i.tolist(), edges.j.tolist())) == want
    assert edges.value.tolist() == [full[i, j] for i, j in want]
