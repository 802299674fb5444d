"""Tracebacks of the reported hits: coordinates, CIGAR and aligned strings, each checked to
re-score to the score the search reported.

Why apart from the search: the all-pairs run keeps scores only (a direction per cell for every
pair would not fit); only the few hits reported are traced, after the run, in a window bounded
from the score when the pair is long, and as Ray tasks when there is a lot to trace.
"""
from __future__ import annotations

import dataclasses
import os

from pairflow.engine import PairflowError, map_chunks, ray_is_up
from pairflow.kernels.scoring import Scoring
from pairflow.kernels.smith_waterman import (EMPTY_ALIGNMENT, Alignment, rescore_many,
                                             sw_tracebacks)

# Tracebacks keep a direction per cell: pairs above this many cells are traced in the window the
# alignment occupies, found first by two score-only passes (linear memory, SIMD); a window above
# the second bound is refused. Below the first bound a direct traceback is cheaper than the passes.
TRACE_DIRECT_CELLS = 250_000
TRACE_MAX_CELLS = 400_000_000
# A profile of a sequence this long is kept for the next pair of it (a few targets of a
# hundred thousand letters are the top hits of many queries).
PROFILE_KEEP_LEN = 5_000
# Above this many traceback cells in all, tracebacks fan out as Ray tasks (when Ray is up).
TRACE_FANOUT_CELLS = 200_000_000
# Above this much estimated work (seconds, ``_cost``), an in-process run traces on every core.
TRACE_THREADS_S = 0.05
_FIELDS = [f.name for f in dataclasses.fields(Alignment)]


def traceback_hit(q: str, t: str, scoring: Scoring, score: int,
                  profiles: dict | None = None) -> Alignment:
    """The alignment behind a reported score, checked to re-score to it.

    Pairs above ``TRACE_DIRECT_CELLS`` are traced in the window of one optimal alignment
    (``_locate``): a forward score-only pass finds its end cell, a second one over
    the reversed prefixes (within the span bound below) finds its start, and only that window is
    traced. Should the passes disagree with the score (they never have), the pair is traced in
    the span-bounded window instead.
    """
    return _traced([(q, t, score)], scoring, profiles)[0]


def _traced(jobs: list[tuple[str, str, int]], scoring: Scoring,
            profiles: dict | None = None) -> list[Alignment]:
    """``traceback_hit`` of each job. Every pair's window (the whole pair when direct, else the
    located one) is traced in ONE ``sw_tracebacks`` call (its decoding is one numpy pass over
    all; per call it costs ~45 us more than a pair's), then all are checked by one
    ``rescore_many``."""
    windows, bounded = [], {}  # per job the window to trace; the windowed ones' fall-back
    for i, (q, t, score) in enumerate(jobs):
        if len(q) * len(t) <= TRACE_DIRECT_CELLS:
            windows.append((0, len(q), 0, len(t)))
        else:
            located, bounded[i] = _locate(q, t, scoring, score, profiles)
            windows.append(located or bounded[i])
    alns = _trace_windows(jobs, windows, scoring)
    for i, fallback in bounded.items():
        # the located window traced to another score (never seen): the span-bounded one
        if fallback is not None and alns[i].score != jobs[i][2] and windows[i] != fallback:
            alns[i] = _trace_windows([jobs[i]], [fallback], scoring)[0]
    again = rescore_many([a.query_aligned for a in alns], [a.target_aligned for a in alns],
                         scoring).tolist()
    for (q, t, score), aln, re_scored in zip(jobs, alns, again):
        if aln.score != score or re_scored != score:
            raise PairflowError(f"traceback of a {len(q)} x {len(t)} pair scores {aln.score} "
                                f"(re-scored {re_scored}) but the search reported {score}")
    return alns


def _best_cell(q: str, t: str, scoring: Scoring, profiles: dict | None = None):
    """(score, end in q, end in t) of the best local alignment, 0-based end cells, score-only
    in linear memory (striped; scan for linear gaps, which parasail's striped mis-scores).

    The longer sequence is the profile side (the other is streamed through it: about twice the
    cells per second on a long target), 8 bits first, redone at 16 when it saturates; a profile
    of a long sequence is kept in ``profiles`` for the next pair that has it."""
    import parasail
    method = "scan" if scoring.open == scoring.extend else "striped"
    matrix = scoring.parasail_matrix()
    swap = len(t) > len(q)
    a, b = (t, q) if swap else (q, t)
    prof = profiles.get(a) if profiles is not None else None
    if prof is None:
        prof = parasail.profile_create_sat(a, matrix)
        if profiles is not None and len(a) >= PROFILE_KEEP_LEN:
            profiles[a] = prof
    r = getattr(parasail, f"sw_{method}_profile_sat")(prof, b, scoring.open, scoring.extend)
    for w in (32, 64):
        if not r.saturated:
            break
        r = getattr(parasail, f"sw_{method}_{w}")(a, b, scoring.open, scoring.extend, matrix)
    ea, eb = int(r.end_query), int(r.end_ref)
    return int(r.score), *((eb, ea) if swap else (ea, eb))


def _span(qe: int, te: int, scoring: Scoring, score: int) -> tuple[int, int]:
    """Where an alignment of ``score`` ending at (qe, te) (exclusive ends) can start at the
    earliest: it has at most m = min(qe, te) aligned letter pairs and at most
    (m * max_substitution - score) / extend gap letters, so neither of its spans is longer than
    their sum (with extend = 0 there is no such bound: the whole prefixes)."""
    m = min(qe, te)
    if scoring.extend > 0:
        span = m + max(0, m * scoring.max_score - score) // scoring.extend
    else:
        span = max(qe, te)
    return max(0, qe - span), max(0, te - span)


def _locate(q: str, t: str, scoring: Scoring, score: int, profiles: dict | None = None):
    """(the window of one optimal alignment or None, the span-bounded window), each
    ``(q0, qe, t0, te)`` 0-based, ends exclusive; both None when nothing scores above 0."""
    best, eq, et = _best_cell(q, t, scoring, profiles)
    if best != score:
        raise PairflowError(f"re-scoring a {len(q)} x {len(t)} pair gave {best}, "
                            f"the search reported {score}")
    if score <= 0:
        return None, None
    qe, te = eq + 1, et + 1
    q0, t0 = _span(qe, te, scoring, score)
    # The reversed prefixes hold the reverse of every alignment ending by (qe, te); their best
    # (score S: none inside scores more than the pair's best) ends, reversed, where one optimal
    # alignment starts, and lies wholly inside [start, qe) x [start, te).
    back, rq, rt = _best_cell(q[q0:qe][::-1], t[t0:te][::-1], scoring)
    located = (qe - 1 - rq, qe, te - 1 - rt, te) if back == score else None
    return located, (q0, qe, t0, te)


def _trace_windows(jobs, windows, scoring) -> list[Alignment]:
    """The alignment in each job's window ``(q0, qe, t0, te)`` (None: nothing to align), in
    the pair's coordinates, all windows in one ``sw_tracebacks`` call."""
    for (q, t, _), w in zip(jobs, windows):
        if w is not None and (w[1] - w[0]) * (w[3] - w[2]) > TRACE_MAX_CELLS:
            raise PairflowError(f"the traceback of a {len(q)} x {len(t)} pair needs "
                                f"{(w[1] - w[0]) * (w[3] - w[2]):,} cells even in its window "
                                f"(limit {TRACE_MAX_CELLS:,}); lower top_k or split the long "
                                f"sequence")
    todo = [i for i, w in enumerate(windows) if w is not None]
    found = sw_tracebacks([jobs[i][0][windows[i][0]:windows[i][1]] for i in todo],
                          [jobs[i][1][windows[i][2]:windows[i][3]] for i in todo], scoring,
                          validate=False)
    out = [EMPTY_ALIGNMENT] * len(jobs)
    for i, sub in zip(todo, found):
        q0, _, t0, _ = windows[i]
        out[i] = sub if not (q0 or t0) or not sub.score else dataclasses.replace(
            sub, qstart=sub.qstart + q0, qend=sub.qend + q0, sstart=sub.sstart + t0,
            send=sub.send + t0)
    return out


def _trace_many(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    """Tracebacks as ``dataclasses.asdict`` would give them (its deep copy per field was a third
    of the Python time per hit; the fields are ints, strings and a float)."""
    profiles: dict = {}  # long sequences' profiles, for this chunk's pairs
    return [{f: getattr(a, f) for f in _FIELDS} for a in _traced(jobs, scoring, profiles)]


def _cost(q: str, t: str) -> float:
    """Estimated seconds to trace one pair: a direct traceback at ~1 Gcells/s, or the two
    score-only passes at ~10 Gcells/s (the window traced after them is small)."""
    n = len(q) * len(t)
    return n / 1e9 if n <= TRACE_DIRECT_CELLS else n / 1e10


def _threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def trace_hits(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    """Tracebacks of ``(query, target, score)`` jobs: as Ray tasks when there is a lot to trace
    and Ray is up (the run just used it), else here, on a thread per core when there is more
    than ``TRACE_THREADS_S`` of work (parasail's C calls release the GIL; they are most of it)."""
    cost = [_cost(q, t) for q, t, _ in jobs]
    if sum(min(len(q) * len(t), TRACE_DIRECT_CELLS) for q, t, _ in jobs) > TRACE_FANOUT_CELLS \
            and ray_is_up():
        return map_chunks(_trace_many, jobs, scoring, weights=cost)
    threads = min(_threads(), len(jobs))
    if threads < 2 or sum(cost) < TRACE_THREADS_S:
        return _trace_many(jobs, scoring)
    from concurrent.futures import ThreadPoolExecutor
    # the heaviest first, dealt round-robin: chunks of very uneven pairs still cost about the same
    order = sorted(range(len(jobs)), key=lambda i: -cost[i])
    chunks = [order[c::4 * threads] for c in range(min(len(jobs), 4 * threads))]
    with ThreadPoolExecutor(threads) as pool:
        outs = list(pool.map(lambda c: _trace_many([jobs[i] for i in c], scoring), chunks))
    results: list = [None] * len(jobs)
    for chunk, out in zip(chunks, outs):
        for i, r in zip(chunk, out):
            results[i] = r
    return results
