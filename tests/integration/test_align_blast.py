"""app=align on two real proteomes (Prodigal on the ragout genomes), checked like BLAST users
would check it, against oracles that do not import the app:

* every query's top-k equals a sort of the exhaustive parasail score matrix (parasail called
  directly, one pair at a time) under the stated tie rule;
* ``mode=rbh``'s ortholog pairs equal a brute-force reciprocal-best-hit search over that matrix;
* E-values and bit scores equal blastp's (Debian ncbi-blast+, no composition adjustment, no SEG)
  for every hit where blastp's raw score is the exact Smith-Waterman score;
* ``align.evalue`` keeps exactly the top-k hits at or under the cut-off.
"""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from tests.blast_oracle import bitscore_matches, evalue_matches, run_blastp
from tests.conftest import need, need_module
from tests.oracles import PROTEOMES

pytestmark = [pytest.mark.ray, pytest.mark.slow]
N_QUERIES, N_TARGETS, TOP_K = 100, 150, 5


def _proteome(path, n, prefix):
    SeqIO = need_module("Bio.SeqIO")
    recs = SeqIO.parse(str(need(os.path.join(PROTEOMES, path))), "fasta")
    return [(f"{prefix}{i}", str(r.seq)) for i, r in zip(range(n), recs)]


def _write(path, recs):
    with open(path, "w") as fh:
        for name, seq in recs:
            fh.write(f">{name}\n{seq}\n")
    return str(path)


@pytest.fixture(scope="module")
def proteomes(tmp_path_factory):
    """S. aureus N315 x E. coli K-12 (the first proteins of each) and their exhaustive SW score
    matrix under BLAST's 11/1 (a gap of length L costs 11 + L: parasail's open 12, extend 1)."""
    parasail = need_module("parasail")
    tmp = tmp_path_factory.mktemp("proteomes")
    q = _proteome(os.path.join("S.Aureus", "N315.faa"), N_QUERIES, "sa")
    t = _proteome(os.path.join("E.Coli", "MG1655-K12.faa"), N_TARGETS, "ec")
    scores = np.zeros((len(q), len(t)), np.int64)
    for i, (_, qs) in enumerate(q):
        for j, (_, ts) in enumerate(t):
            r = parasail.sw_striped_16(qs, ts, 12, 1, parasail.blosum62)
            if r.saturated:
                r = parasail.sw_striped_32(qs, ts, 12, 1, parasail.blosum62)
            scores[i, j] = r.score
    return _write(tmp / "q.fa", q), _write(tmp / "t.fa", t), q, t, scores, tmp


def _ranked(row, partners):
    """Partner indices best first: score descending, then the shorter partner, then input
    order (the app's stated tie rule)."""
    return sorted(range(len(row)), key=lambda j: (-row[j], len(partners[j][1]), j))


@pytest.fixture(scope="module")
def rbh_run(ray_local, proteomes, tmp_path_factory):
    from pairflow.apps.align import align
    qf, tf, *_ = proteomes
    runs = str(tmp_path_factory.mktemp("runs"))
    return align([qf], [tf], top_k=TOP_K, matrix="blosum62", gap_open=11, gap_extend=1,
                 convention="blast", mode="rbh", runs_root=runs, progress=False)


def test_topk_equals_exhaustive_parasail_for_every_query(rbh_run, proteomes):
    _, _, q, t, scores, _ = proteomes
    hits = rbh_run.hits
    assert sorted(set(hits.qseqid)) == sorted(n for n, _ in q)
    for i, (name, _) in enumerate(q):
        want = _ranked(scores[i], t)[:TOP_K]
        mine = hits[hits.qseqid == name]
        assert list(mine.score) == [scores[i, j] for j in want], name
        assert list(mine.sseqid) == [t[j][0] for j in want], name


def test_rbh_equals_brute_force_over_the_full_matrix(rbh_run, proteomes):
    _, _, q, t, scores, _ = proteomes
    want = sorted((q[i][0], t[j][0]) for i, j in _brute_rbh(q, t, scores))
    got = rbh_run.orthologs
    assert sorted(zip(got.qseqid, got.sseqid)) == want
    assert len(want) >= 5  # S. aureus and E. coli share conserved genes among the first ones
    tsv = pd.read_csv(rbh_run.align["outputs"]["orthologs"], sep="\t")
    assert sorted(zip(tsv.qseqid, tsv.sseqid)) == want
    assert rbh_run.align["orthologs"] == len(want)


def test_evalues_and_bit_scores_equal_blastps(rbh_run, proteomes):
    _, _, q, t, scores, tmp = proteomes
    blast = run_blastp(str(tmp / "q.fa"), str(tmp / "t.fa"), tmp, max_targets=N_TARGETS)
    checked = 0
    for row in rbh_run.hits.itertuples():
        b = blast.get((row.qseqid, row.sseqid))
        if b is None or b[2] != row.score:
            continue  # blastp missed the pair or found less than the exact SW score
        assert evalue_matches(row.evalue, b[0]), (row.qseqid, row.sseqid, row.evalue, b)
        assert bitscore_matches(row.bitscore, b[1]), (row.qseqid, row.sseqid, row.bitscore, b)
        checked += 1
    assert checked >= 200, checked
    summary = rbh_run.align["statistics"]
    assert summary["db_length"] == sum(len(s) for _, s in t)
    assert summary["db_sequences"] == len(t)


def _brute_rbh(q, t, scores):
    best_t = {i: _ranked(scores[i], t)[0] for i in range(len(q)) if scores[i].max() > 0}
    best_q = {j: _ranked(scores[:, j], q)[0] for j in range(len(t)) if scores[:, j].max() > 0}
    return sorted((i, j) for i, j in best_t.items() if best_q.get(j) == i)


def test_evalue_cutoff_keeps_the_topk_hits_under_it(ray_local, proteomes, runs):
    from pairflow.apps.align import align
    from pairflow.kernels import karlin
    qf, tf, q, t, scores, _ = proteomes
    cut = 1e-3
    res = align([qf], [tf], top_k=TOP_K, matrix="blosum62", gap_open=11, gap_extend=1,
                convention="blast", evalue=cut, mode="rbh", runs_root=runs, progress=False)
    p = karlin.lookup("blosum62", 11, 1)
    db = sum(len(s) for _, s in t)
    want = []
    for i, (name, qs) in enumerate(q):
        for j in _ranked(scores[i], t)[:TOP_K]:
            e = karlin.evalues_spouge([scores[i, j]], [len(qs)], [len(t[j][1])], db, p)[0]
            if e <= cut:
                want.append((name, t[j][0], scores[i, j]))
    got = list(zip(res.hits.qseqid, res.hits.sseqid, res.hits.score))
    assert got == want
    assert 0 < len(want) < N_QUERIES * TOP_K
    assert (res.hits.evalue <= cut).all()
    tsv = pd.read_csv(res.align["outputs"]["tsv"], sep="\t")
    assert list(tsv.columns) == ["qseqid", "sseqid", "pident", "length", "mismatch", "gapopen",
                                 "qstart", "qend", "sstart", "send", "evalue", "bitscore",
                                 "score", "cigar"]
    assert len(tsv) == len(want)
    # ortholog pairs: the brute-force RBH pairs whose E-value passes the cut-off
    rbh = [(q[i][0], t[j][0]) for i, j in _brute_rbh(q, t, scores)
           if karlin.evalues_spouge([scores[i, j]], [len(q[i][1])], [len(t[j][1])], db, p)[0]
           <= cut]
    assert sorted(zip(res.orthologs.qseqid, res.orthologs.sseqid)) == sorted(rbh)
    assert 0 < len(rbh) < len(_brute_rbh(q, t, scores))


def test_rbh_all_vs_all_of_one_set(ray_local, runs):
    """One set against itself (HMMER's 45 globins): each mutual best pair once, the first in
    input order; the brute force excludes self pairs as the all-vs-all triangle does."""
    from pairflow.apps.align import align
    from tests.unit.conftest import SHARE
    parasail = need_module("parasail")
    SeqIO = need_module("Bio.SeqIO")
    path = str(need(SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"))
    recs = [(r.id, str(r.seq)) for r in SeqIO.parse(path, "fasta")]
    n = len(recs)
    scores = np.full((n, n), -1, np.int64)
    for i in range(n):
        for j in range(n):
            if i != j:
                scores[i, j] = parasail.sw_striped_16(recs[i][1], recs[j][1], 12, 1,
                                                      parasail.blosum62).score
    best = {i: _ranked(scores[i], recs)[0] for i in range(n)}  # self scores -1: never best
    want = sorted((recs[i][0], recs[j][0]) for i, j in best.items() if best[j] == i and i < j)
    res = align([path], top_k=3, matrix="blosum62", gap_open=12, gap_extend=1, mode="rbh",
                runs_root=runs, progress=False)
    assert sorted(zip(res.orthologs.qseqid, res.orthologs.sseqid)) == want
    assert len(want) >= 5
