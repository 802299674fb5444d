"""Bit scores and E-values (kernels/karlin.py) against BLAST.

Oracles: hand arithmetic on BLAST's published lambda/K; a brute-force search for the length
adjustment (the largest integer l below the fixed point, by trying every integer); and blastp
itself (Debian ncbi-blast+) on real proteomes: wherever blastp's raw score equals the exact
Smith-Waterman score (parasail, called directly), its printed E-value and bit score must be ours.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from pairflow.kernels import karlin
from tests.blast_oracle import bitscore_matches, evalue_matches, run_blastp
from tests.conftest import need, need_module
from tests.oracles import PROTEOMES


def test_bit_score_is_blasts_formula_by_hand():
    p = karlin.lookup("blosum62", 11, 1)
    assert (p.lam, p.K) == (0.267, 0.041)  # BLAST's printed "Gapped Lambda K" for 11/1
    for s in (0, 46, 383, 1000):
        assert karlin.bit_scores([s], p)[0] == pytest.approx((0.267 * s - math.log(0.041))
                                                             / math.log(2), rel=1e-12)
    # 46 raw -> 22.3 bits, as blastp prints it for BLOSUM62 11/1
    assert round(float(karlin.bit_scores(46, p)), 1) == 22.3


def _brute_length_adjustment(p, m, n, N):
    """The largest integer l with l <= f(l) and K (m - l)(n - N l) > max(m, n), by trial."""
    best = 0
    for ell in range(0, m):
        space = (m - ell) * (n - N * ell)
        if space <= 0 or p.K * space <= max(m, n):
            break
        f = p.beta + (p.alpha / p.lam) * (math.log(p.K) + math.log(space))
        if ell <= f:
            best = ell
    return best


@pytest.mark.parametrize("matrix,go,ge", [("blosum62", 11, 1), ("blosum62", 10, 1),
                                          ("blosum45", 14, 2), ("pam30", 9, 1),
                                          ("blosum80", 10, 1)])
def test_length_adjustment_equals_brute_force(matrix, go, ge):
    p = karlin.lookup(matrix, go, ge)
    rng = np.random.default_rng(7)
    for _ in range(60):
        m = int(rng.integers(30, 3000))
        N = int(rng.integers(1, 5000))
        n = N * int(rng.integers(50, 800))
        assert karlin.length_adjustment(p, m, n, N) == _brute_length_adjustment(p, m, n, N), \
            (m, n, N)


def test_classic_evalue_by_hand():
    p = karlin.lookup("blosum62", 11, 1)
    m, n, N, s = 453, 70_000, 200, 46
    ell = _brute_length_adjustment(p, m, n, N)
    want = 0.041 * (m - ell) * (n - N * ell) * math.exp(-0.267 * s)
    assert karlin.evalues_karlin([s], [m], n, N, p)[0] == pytest.approx(want, rel=1e-12)


def test_unknown_matrix_or_gap_pair_is_refused():
    with pytest.raises(ValueError, match="BLAST's table has"):
        karlin.lookup("blosum62", 5, 5)
    with pytest.raises(ValueError, match="no Karlin-Altschul parameters for matrix"):
        karlin.lookup("nuc44", 5, 2)
    from pairflow.kernels.scoring import Scoring
    # standard 12/1 is BLAST's 11/1 (a gap of length 1 costs 12 either way)
    assert karlin.for_scoring(Scoring.create("blosum62", 12, 1)) == karlin.lookup("blosum62", 11, 1)
    assert karlin.for_scoring(Scoring.create("blosum62", 11, 1, "blast")) == \
        karlin.lookup("blosum62", 11, 1)


def _write(path, recs):
    with open(path, "w") as fh:
        for name, seq in recs:
            fh.write(f">{name}\n{seq}\n")


@pytest.fixture(scope="module")
def blastp_hits(tmp_path_factory):
    """blastp of 120 S. aureus against 160 E. coli proteins, with each hit's exact SW score
    from parasail (BLAST's 11/1 is parasail's open 12, extend 1)."""
    Bio = need_module("Bio.SeqIO")
    parasail = need_module("parasail")
    tmp = tmp_path_factory.mktemp("blastp")
    q = [(f"q{i}", str(r.seq)) for i, r in zip(range(120), Bio.parse(
        str(need(os.path.join(PROTEOMES, "S.Aureus", "N315.faa"))), "fasta"))]
    t = [(f"t{i}", str(r.seq)) for i, r in zip(range(160), Bio.parse(
        str(need(os.path.join(PROTEOMES, "E.Coli", "MG1655-K12.faa"))), "fasta"))]
    _write(tmp / "q.fa", q)
    _write(tmp / "t.fa", t)
    blast = run_blastp(str(tmp / "q.fa"), str(tmp / "t.fa"), tmp)
    qs, ts = dict(q), dict(t)
    rows = []
    for (qid, sid), (ev, bits, score) in blast.items():
        sw = parasail.sw_striped_16(qs[qid], ts[sid], 12, 1, parasail.blosum62).score
        rows.append((len(qs[qid]), len(ts[sid]), score, sw, ev, bits))
    return rows, sum(len(s) for _, s in t), len(t)


def test_spouge_evalues_and_bit_scores_match_blastp(blastp_hits):
    rows, db_len, db_n = blastp_hits
    p = karlin.lookup("blosum62", 11, 1)
    same = [r for r in rows if r[2] == r[3]]
    assert len(same) >= 200, f"only {len(same)} of {len(rows)} blastp hits have the SW score"
    m, n, s = (np.array([r[i] for r in same]) for i in range(3))
    ev = karlin.evalues_spouge(s, m, n, db_len, p)
    bits = karlin.bit_scores(s, p)
    bad = [(r, e, b) for r, e, b in zip(same, ev, bits)
           if not (evalue_matches(e, r[4]) and bitscore_matches(b, r[5]))]
    assert not bad, bad[:5]
