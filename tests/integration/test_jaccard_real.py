"""Exact Jaccard on real genomes equals a brute-force reference, and on the Klebsiella loci
also agrees with mash."""
import glob
import os

import numpy as np
import pytest

from tests.oracles import (KLEBSIELLA, LAMBDA, RAGOUT, canonical_kmer_codes, canonical_kmers,
                           jaccard_matrix, jaccard_matrix_of_codes, mash_jaccard,
                           read_sequences)

pytestmark = pytest.mark.ray


def run_jaccard(urls, runs, k=21, item="file", **opts):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    app = JaccardApp(urls, k=k, item=item)
    sink = DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0})
    opts.setdefault("progress", False)
    return app, allpairs(app=app, sink=sink, runs_root=runs, wait=True, **opts)


@pytest.fixture(scope="module")
def klebsiella_oracle():
    """The 162 loci's k-mer sets as 2-bit codes, every pair's intersection from one sparse
    product (the string sets' 13,041 pairwise intersections took most of this test's time;
    the two oracles are checked equal in tests/unit/test_oracles.py)."""
    records = read_sequences(KLEBSIELLA, "genbank")
    sim, inter = jaccard_matrix_of_codes([canonical_kmer_codes([s], 21) for _, s in records])
    return [n for n, _ in records], sim, inter


def test_klebsiella_loci_equal_bruteforce_and_mash(ray_local, runs, klebsiella_oracle, tmp_path):
    names, sim, inter = klebsiella_oracle
    assert len(names) == 162
    app, res = run_jaccard([KLEBSIELLA], runs, item="record")
    assert [k.split("/", 1)[1] for k in app.keys()] == names
    got = res.matrix("similarity")
    np.testing.assert_allclose(got, sim, rtol=0, atol=1e-12)
    assert np.array_equal(res.matrix("intersection")[np.triu_indices(162, 1)],
                          inter[np.triu_indices(162, 1)])
    np.testing.assert_allclose(res.matrix("distance"), 1 - sim, atol=1e-12)
    # mash, one record per sketch, a sketch larger than any union: exact up to hash collisions
    fasta = tmp_path / "loci.fa"
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in read_sequences(KLEBSIELLA, "genbank")))
    mash = mash_jaccard([str(fasta)], 21, str(tmp_path), individual=True)
    idx = {n: i for i, n in enumerate(names)}
    diffs = [abs(v - got[idx[a], idx[b]]) for (a, b), v in mash.items()]
    assert len(diffs) == 162 * 162
    assert max(diffs) <= 1e-6
    # the run reports what it did
    s = res.summary
    assert s["tiles_journaled"] == s["tiles_total"] and s["R"] >= 1.0
    assert os.path.exists(os.path.join(res.run_dir, "metrics.jsonl"))


@pytest.mark.slow
def test_ragout_genomes_equal_bruteforce(ray_local, runs):
    """The 16 genomes against the brute-force oracle. Mash, the peer tool, is checked on the
    162 loci above; on these genomes its exact sketches took 32 s of this test's 50, and
    benchmarks/allpairs.py compares the two tools on them side by side."""
    paths = sorted(glob.glob(os.path.join(RAGOUT, "*/references/*.fasta.gz")))
    assert len(paths) == 16
    app, res = run_jaccard(paths, runs)
    got = res.matrix("similarity")
    # the string-set oracle's sets as 2-bit codes (numpy: seconds, not minutes; the two are
    # checked equal in tests/unit/test_oracles.py)
    sim, inter = jaccard_matrix_of_codes(
        [canonical_kmer_codes([s for _, s in read_sequences(p)], 21) for p in paths])
    np.testing.assert_allclose(got, sim, rtol=0, atol=1e-12)
    assert np.array_equal(np.triu(res.matrix("intersection"), 1), np.triu(inter, 1))


def test_lambda_phage_records_and_k_edges(ray_local, runs, tmp_path):
    """k = 1 and k = 31 on lambda phage pieces (records of one file as items)."""
    (_, seq), = read_sequences(LAMBDA)
    pieces = [seq[i:i + 4000] for i in range(0, 40000, 4000)]
    pieces[3] = pieces[3][:1500] + "N" * 40 + pieces[3][1500:].lower()
    fasta = tmp_path / "pieces.fa"
    fasta.write_text("".join(f">p{i}\n{p}\n" for i, p in enumerate(pieces)))
    for k in (1, 31):
        sets = [canonical_kmers([p], k) for p in pieces]
        sim, _ = jaccard_matrix(sets)
        _, res = run_jaccard([str(fasta)], runs, k=k, item="record", leaf_items=3)
        np.testing.assert_allclose(res.matrix("similarity"), sim, atol=1e-12)
