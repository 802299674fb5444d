"""Tracebacks of the reported hits: coordinates, CIGAR and aligned strings, each checked to
re-score to the score the search reported.

Why apart from the search: the all-pairs run keeps scores only (a direction per cell for every
pair would not fit); only the few hits reported are traced, after the run, in a window bounded
from the score when the pair is long, and as Ray tasks when there is a lot to trace.
"""
from __future__ import annotations

import dataclasses

from pairflow.engine import PairflowError, map_chunks
from pairflow.kernels.scoring import Scoring
from pairflow.kernels.smith_waterman import Alignment, rescore, sw_traceback

# Tracebacks keep a direction per cell: pairs above this many cells are traced in a window around
# the best cell (bounded from the score), and a window above the second bound is refused.
TRACE_DIRECT_CELLS = 20_000_000
TRACE_MAX_CELLS = 400_000_000
# Above this many traceback cells in all, tracebacks fan out as Ray tasks.
TRACE_FANOUT_CELLS = 200_000_000


def traceback_hit(q: str, t: str, scoring: Scoring, score: int) -> Alignment:
    """The alignment behind a reported score, checked to re-score to it.

    Pairs above ``TRACE_DIRECT_CELLS`` are traced in a window ending at the best cell: an
    alignment of score S ending at (qe, te) has at most m = min(qe, te) aligned letter pairs and
    at most (m * max_substitution - S) / extend gap letters, so neither of its spans is longer
    than their sum. (With extend = 0 there is no such bound and the whole pair is traced.)
    """
    if len(q) * len(t) <= TRACE_DIRECT_CELLS:
        aln = sw_traceback(q, t, scoring, validate=False)
    else:
        aln = _windowed_traceback(q, t, scoring, score)
    if aln.score != score or rescore(aln, scoring) != score:
        raise PairflowError(f"traceback of a {len(q)} x {len(t)} pair scores {aln.score} "
                            f"(re-scored {rescore(aln, scoring)}) but the search reported {score}")
    return aln


def _windowed_traceback(q: str, t: str, scoring: Scoring, score: int) -> Alignment:
    import parasail
    matrix = scoring.parasail_matrix()
    for w in (16, 32, 64):
        r = getattr(parasail, f"sw_scan_{w}")(q, t, scoring.open, scoring.extend, matrix)
        if not r.saturated:
            break
    if int(r.score) != score:
        raise PairflowError(f"re-scoring a {len(q)} x {len(t)} pair gave {r.score}, "
                            f"the search reported {score}")
    if score <= 0:
        return Alignment(0, 0, 0, 0, 0, "", "", "", 0, 0)
    qe, te = int(r.end_query) + 1, int(r.end_ref) + 1
    m = min(qe, te)
    if scoring.extend > 0:
        span = m + max(0, m * scoring.max_score - score) // scoring.extend
    else:
        span = max(qe, te)
    q0, t0 = max(0, qe - span), max(0, te - span)
    if (qe - q0) * (te - t0) > TRACE_MAX_CELLS:
        raise PairflowError(f"the traceback of a {len(q)} x {len(t)} pair needs "
                            f"{(qe - q0) * (te - t0):,} cells even in its window (limit "
                            f"{TRACE_MAX_CELLS:,}); lower top_k or split the long sequence")
    sub = sw_traceback(q[q0:qe], t[t0:te], scoring, validate=False)
    return dataclasses.replace(sub, qstart=sub.qstart + q0, qend=sub.qend + q0,
                               sstart=sub.sstart + t0, send=sub.send + t0)


def _trace_many(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    return [dataclasses.asdict(traceback_hit(q, t, scoring, s)) for q, t, s in jobs]


def trace_hits(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    """Tracebacks of ``(query, target, score)`` jobs: here, or as Ray tasks when there is a lot
    to trace and Ray is up (the run just used it)."""
    cost = [min(len(q) * len(t), TRACE_DIRECT_CELLS) for q, t, _ in jobs]
    if sum(cost) <= TRACE_FANOUT_CELLS:
        return _trace_many(jobs, scoring)
    return map_chunks(_trace_many, jobs, scoring, weights=cost)
