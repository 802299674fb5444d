"""Tracebacks of long pairs located by two score-only passes (``apps.align.tracebacks``), on drawn
pairs, against Biopython's local aligner: the score, and the alignment re-scored here from its
aligned strings alone, with coordinates that cut those strings out of the sequences."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import need_module

from pairflow.apps.align import tracebacks
from pairflow.kernels.scoring import Scoring

AA = np.array(list("ARNDCQEGHILKMFPSTWYV"))
GAPS = [(11, 1), (10, 2), (6, 6)]  # (open, extend); the last is linear


def _bio_score(q, t, go, ge):
    need_module("Bio")
    from Bio.Align import PairwiseAligner, substitution_matrices
    al = PairwiseAligner(mode="local", substitution_matrix=substitution_matrices.load("BLOSUM62"),
                         open_gap_score=-go, extend_gap_score=-ge)
    return int(al.score(q, t))


def _rescore(qa, ta, go, ge):
    """Score of two aligned strings: BLOSUM62 per column, a gap run of L costs go + (L-1)*ge."""
    from Bio.Align import substitution_matrices
    m = substitution_matrices.load("BLOSUM62")
    score, run = 0, None
    for a, b in zip(qa, ta):
        kind = "q" if a == "-" else "t" if b == "-" else None
        if kind is None:
            score += int(m[a][b])
        else:
            score -= ge if run == kind else go
        run = kind
    return score


def _pair(rng, q_len, core_len, t_len, where, mutation):
    """A query and a long target that holds a mutated copy (with an insertion) of the query's
    middle at ``where`` (a fraction of the target)."""
    core = "".join(rng.choice(AA, core_len))
    q = "".join(rng.choice(AA, q_len)) + core + "".join(rng.choice(AA, q_len))
    copy = "".join(c if rng.random() > mutation else rng.choice(AA) for c in core)
    cut = core_len // 2
    copy = copy[:cut] + "".join(rng.choice(AA, int(rng.integers(0, 4)))) + copy[cut:]
    pos = int(where * t_len)
    t = "".join(rng.choice(AA, pos)) + copy + "".join(rng.choice(AA, t_len - pos))
    return q, t


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), q_len=st.integers(0, 60), core_len=st.integers(5, 120),
       t_len=st.integers(200, 4000), where=st.floats(0, 1), mutation=st.floats(0, 0.6),
       gaps=st.sampled_from(GAPS), flip=st.booleans())
def test_located_traceback_matches_biopython(seed, q_len, core_len, t_len, where,
                                             mutation, gaps, flip):
    need_module("Bio")
    rng = np.random.default_rng(seed)
    q, t = _pair(rng, q_len, core_len, t_len, where, mutation)
    if flip:  # the long sequence as the query
        q, t = t, q
    go, ge = gaps
    sc = Scoring.create("blosum62", go, ge)
    want = _bio_score(q, t, go, ge)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tracebacks, "TRACE_DIRECT_CELLS", 0)  # every pair located, then traced
        windows = []
        trace_windows = tracebacks._trace_windows
        mp.setattr(tracebacks, "_trace_windows",
                   lambda jobs, wins, sc: windows.extend(wins) or trace_windows(jobs, wins, sc))
        aln = tracebacks.traceback_hit(q, t, sc, want)
        with pytest.raises(Exception, match="search reported"):
            tracebacks.traceback_hit(q, t, sc, want + 1)
    assert aln.score == want == _rescore(aln.query_aligned, aln.target_aligned, go, ge)
    if want > 0:
        # one window traced (the located one: no fall-back), and it holds the alignment
        (qs, qe, ts, te), = windows
        assert qs < aln.qstart <= aln.qend <= qe and ts < aln.sstart <= aln.send <= te
        assert q[aln.qstart - 1:aln.qend] == aln.query_aligned.replace("-", "")
        assert t[aln.sstart - 1:aln.send] == aln.target_aligned.replace("-", "")


def test_threaded_tracebacks_equal_serial(monkeypatch):
    """Enough work to trace on threads, long targets shared by several queries (their profiles
    kept and reused): the same alignments as one by one, in the jobs' order, each at Biopython's
    score."""
    need_module("Bio")
    rng = np.random.default_rng(3)
    sc = Scoring.create("blosum62", 11, 1)
    jobs = []
    for i in range(4):
        core = "".join(rng.choice(AA, 60 + 20 * i))
        t = "".join(rng.choice(AA, 1500 + 400 * i)) + core + "".join(rng.choice(AA, 900))
        for j in range(6):
            q = "".join(rng.choice(AA, 10 * j)) + "".join(
                c if rng.random() > 0.1 * j else rng.choice(AA) for c in core)
            jobs.append((q, t, _bio_score(q, t, 11, 1)))
    monkeypatch.setattr(tracebacks, "TRACE_THREADS_S", 0.0)
    monkeypatch.setattr(tracebacks, "PROFILE_KEEP_LEN", 1000)
    monkeypatch.setattr(tracebacks, "_threads", lambda: 2)
    threaded = tracebacks.trace_hits(jobs, sc)
    serial = [dataclasses.asdict(tracebacks.traceback_hit(q, t, sc, s)) for q, t, s in jobs]
    assert threaded == serial
    assert [a["score"] for a in threaded] == [s for _, _, s in jobs]
    for (q, t, _), a in zip(jobs, threaded):
        assert a["score"] == _rescore(a["query_aligned"], a["target_aligned"], 11, 1)


def test_fall_back_to_the_span_bounded_window(monkeypatch):
    """A located window that does not hold an alignment of the score (never seen from the
    passes; forced here) is traced again in the span-bounded window, which must hold one; a
    window over TRACE_MAX_CELLS is refused."""
    need_module("Bio")
    rng = np.random.default_rng(11)
    q, t = _pair(rng, 20, 80, 3000, 0.4, 0.2)
    sc = Scoring.create("blosum62", 11, 1)
    want = _bio_score(q, t, 11, 1)
    monkeypatch.setattr(tracebacks, "TRACE_DIRECT_CELLS", 0)
    locate = tracebacks._locate

    def too_small(*a):
        (q0, qe, t0, te), bounded = locate(*a)
        return (qe - 2, qe, te - 2, te), bounded  # two letters: less than the score

    monkeypatch.setattr(tracebacks, "_locate", too_small)
    traced = []
    trace_windows = tracebacks._trace_windows
    monkeypatch.setattr(tracebacks, "_trace_windows",
                        lambda jobs, wins, s: traced.extend(wins) or trace_windows(jobs, wins, s))
    aln = tracebacks.traceback_hit(q, t, sc, want)
    assert aln.score == want == _rescore(aln.query_aligned, aln.target_aligned, 11, 1)
    assert len(traced) == 2 and traced[1] == locate(q, t, sc, want)[1]
    assert q[aln.qstart - 1:aln.qend] == aln.query_aligned.replace("-", "")
    assert t[aln.sstart - 1:aln.send] == aln.target_aligned.replace("-", "")
    monkeypatch.setattr(tracebacks, "TRACE_MAX_CELLS", 3)
    with pytest.raises(Exception, match="even in its window"):
        tracebacks.traceback_hit(q, t, sc, want)
