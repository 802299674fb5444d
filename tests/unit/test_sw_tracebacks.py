"""Tracebacks of many pairs at once (``sw_tracebacks``) and their batch re-score
(``rescore_many``), on drawn cases, against oracles written here: the score from the numpy Gotoh
reference (``sw_reference``), a column-by-column re-score in plain Python, and the CIGAR, counts
and coordinates read back from the aligned strings. Batches mix empty alignments, gaps at the
edges of neighbouring alignments and runs too long for the CIGAR token table."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.scoring import Scoring
from pairflow.kernels.smith_waterman import (rescore, rescore_many, sw_reference, sw_traceback,
                                             sw_tracebacks)

AMINO = "ARNDCQEGHILKMFPSTWYV"
SCHEMES = [("blosum62", 11, 1, "standard"), ("blosum62", 6, 6, "standard"),
           ("pam30", 9, 1, "standard"), ("blosum62", 10, 2, "blast"),
           ("match:2,mismatch:-3", 5, 2, "standard")]


def _pair_score(scoring: Scoring, a: str, b: str) -> int:
    m = re.fullmatch(r"match:(-?\d+),mismatch:(-?\d+)", scoring.matrix)
    if m:
        return int(m.group(1)) if a == b else int(m.group(2))
    from Bio.Align import substitution_matrices
    return int(substitution_matrices.load(scoring.matrix.upper())[a][b])


def _plain_rescore(qa: str, ta: str, scoring: Scoring) -> int:
    """Column by column: letter pairs from the matrix, each maximal run of '-' in one row costs
    gap_open + (L - 1) * gap_extend (+ 1 extend in the BLAST convention)."""
    extra = scoring.gap_extend if scoring.convention == "blast" else 0
    score, i = 0, 0
    while i < len(qa):
        for row in (qa, ta):
            if row[i] == "-":
                j = i
                while j < len(row) and row[j] == "-":
                    j += 1
                score -= scoring.gap_open + extra + (j - i - 1) * scoring.gap_extend
                break
        else:
            score += _pair_score(scoring, qa[i], ta[i])
            i += 1
            continue
        i = j
    return score


def _check(aln, q: str, t: str, scoring: Scoring) -> None:
    assert aln.score == sw_reference(q, t, scoring)
    assert aln.score == _plain_rescore(aln.query_aligned, aln.target_aligned, scoring)
    if aln.score == 0:
        assert (aln.qstart, aln.qend, aln.sstart, aln.send, aln.cigar, aln.length) == \
            (0, 0, 0, 0, "", 0)
        return
    assert q[aln.qstart - 1:aln.qend] == aln.query_aligned.replace("-", "")
    assert t[aln.sstart - 1:aln.send] == aln.target_aligned.replace("-", "")
    want = "".join("I" if b == "-" else "D" if a == "-" else "=" if a == b else "X"
                   for a, b in zip(aln.query_aligned, aln.target_aligned))
    got = "".join(op * int(n) for n, op in re.findall(r"(\d+)([=XID])", aln.cigar))
    assert re.fullmatch(r"(\d+[=XID])+", aln.cigar) and got == want
    assert not re.search(r"(\D)\d+\1", aln.cigar)  # runs are maximal
    assert aln.matches == want.count("=") and aln.length == len(want)
    assert aln.identity == aln.matches / aln.length


def _related(rng, n: int, alphabet: str, mutation: float) -> tuple[str, str]:
    a = "".join(rng.choice(list(alphabet), n))
    b = []
    for c in a:
        r = rng.random()
        if r < mutation / 3:
            continue  # deletion
        if r < 2 * mutation / 3:
            b.append(rng.choice(list(alphabet)))  # insertion before it
        b.append(c if rng.random() > mutation else rng.choice(list(alphabet)))
    return a, "".join(b) or alphabet[0]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8), scheme=st.sampled_from(SCHEMES))
def test_batch_tracebacks_match_oracles(seed, n, scheme):
    rng = np.random.default_rng(seed)
    matrix, go, ge, conv = scheme
    sc = Scoring.create(matrix, go, ge, convention=conv)
    alphabet = "ACGT" if matrix.startswith("match") else AMINO
    qs, ts = [], []
    for _ in range(n):
        kind = rng.integers(3)
        if kind == 0:  # related, with indels
            q, t = _related(rng, int(rng.integers(1, 120)), alphabet, float(rng.uniform(0, 0.5)))
        elif kind == 1:  # unrelated
            q = "".join(rng.choice(list(alphabet), int(rng.integers(1, 80))))
            t = "".join(rng.choice(list(alphabet), int(rng.integers(1, 80))))
        else:  # nothing to align: letters that only score below 0 against each other
            q, t = ("W" * int(rng.integers(1, 5)), "P" * int(rng.integers(1, 5))) \
                if alphabet == AMINO else ("A" * 3, "C" * 4)
        if rng.random() < 0.5:
            q, t = t, q
        qs.append(q)
        ts.append(t)
    batch = sw_tracebacks(qs, ts, sc)
    assert len(batch) == n
    for q, t, aln in zip(qs, ts, batch):
        _check(aln, q, t, sc)
        assert aln == sw_traceback(q, t, sc)  # one at a time: the same record
    again = rescore_many([a.query_aligned for a in batch], [a.target_aligned for a in batch], sc)
    assert again.tolist() == [a.score for a in batch]


def test_runs_longer_than_the_token_table():
    sc = Scoring.create("blosum62", 11, 1)
    rng = np.random.default_rng(7)
    core = "".join(rng.choice(list(AMINO), 2100))
    q, t = core, core[:1050] + "WWW" + core[1050:]
    alns = sw_tracebacks([q, "W", core[:1030]], [t, "P", core[:1030]], sc)
    assert alns[0].cigar == "1050=3D1050=" and alns[2].cigar == "1030="
    assert alns[1].score == 0
    for (a, b), aln in zip([(q, t), ("W", "P"), (core[:1030],) * 2], alns):
        _check(aln, a, b, sc)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.tuples(st.sampled_from("AC-"), st.sampled_from("AG-"))
                                .filter(lambda c: c != ("-", "-")), max_size=12), max_size=6),
       conv=st.sampled_from(["standard", "blast"]))
def test_rescore_many_is_each_alignment_alone(rows, conv):
    """Any aligned rows, gaps at either edge included (a gap run never continues into the next
    alignment of the batch): the batch gives each one's plain column-by-column score."""
    sc = Scoring.create("match:3,mismatch:-2", 4, 1, convention=conv)
    qa = ["".join(a for a, _ in r) for r in rows]
    ta = ["".join(b for _, b in r) for r in rows]
    assert rescore_many(qa, ta, sc).tolist() == [_plain_rescore(a, b, sc) for a, b in zip(qa, ta)]


def test_rescore_rejects_what_is_not_an_alignment():
    sc = Scoring.create("blosum62", 11, 1)
    with pytest.raises(ValueError, match="differ in length"):
        rescore_many(["AC", "A"], ["AC", "AC"], sc)
    with pytest.raises(ValueError, match="gap on both sides"):
        rescore_many(["AC", "A-"], ["AC", "A-"], sc)
    with pytest.raises(ValueError, match="pairs go by index"):
        sw_tracebacks(["AC"], [], sc)
    aln = sw_traceback("MKVLAAGIW", "MKVLGIW", sc)
    assert rescore(aln, sc) == aln.score == sw_reference("MKVLAAGIW", "MKVLGIW", sc)
