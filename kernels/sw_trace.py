"""Smith-Waterman tracebacks of the pairs a caller keeps, and the independent re-score that checks
them (:func:`kernels.smith_waterman.sw_traceback` and ``rescore`` are these).

Why many at once (:func:`sw_tracebacks`): per pair, parasail's traceback of a 300 x 300 protein
pair takes ~45 us of C, and turning its two aligned strings into ops, a CIGAR and counts took
as long again in Python (a list per column, a regex per run, a numpy pass per rescore). Here the
C calls stay one per pair, and the decoding runs once over the concatenated strings of all pairs
(numpy per column, Python only per CIGAR run); :func:`rescore_many` likewise. Results are those
of the pair-at-a-time code, field for field.

Pure: no I/O, nothing shared is written.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from .scoring import Scoring
from .sw_common import EMPTY_ALIGNMENT, Alignment, _check_method, _prepare

_OPS = "=XID"  # CIGAR ops by code: identical, different, query letter vs gap, target letter vs gap
_TOKEN_CAP = 1024  # CIGAR tokens ("12X") of runs shorter than this come from a table
_GAP = ord("-")


@functools.cache
def _tokens() -> list[str]:
    return [f"{n}{op}" for op in _OPS for n in range(_TOKEN_CAP)]


@functools.cache
def _trace_fns(method: str):
    """``trace(q, t, open, extend, matrix) -> (score, end_query, end_ref, query_aligned,
    target_aligned)`` for ``method``, from 16 bits up (a saturated width is redone one up), the
    aligned strings empty when the score is not positive.

    parasail's C functions are called directly where its ctypes library is reachable (the Python
    wrapper's Result and Traceback objects, re-encoding both sequences twice, cost ~5 us a pair,
    all of it holding the GIL); else its public API."""
    import parasail
    try:
        from parasail import bindings_v2 as pb
        lib = pb._lib
        fns = [getattr(lib, f"parasail_sw_trace_{method}_{w}") for w in (16, 32, 64)]
        get_tb, tb_free = lib.parasail_result_get_traceback, lib.parasail_traceback_free
        free, is_sat = lib.parasail_result_free, lib.parasail_result_is_saturated
        if (any(f.restype is not pb.c_result_p for f in fns)
                or get_tb.restype is not pb.c_traceback_p):
            raise LookupError("parasail's ctypes declarations are not the ones expected")
    except Exception:  # pragma: no cover - other parasail layouts: the public API
        public = [getattr(parasail, f"sw_trace_{method}_{w}") for w in (16, 32, 64)]

        def trace(q, t, go, ge, matrix):
            for fn in public:
                r = fn(q, t, go, ge, matrix)
                if not r.saturated:
                    if r.score <= 0:
                        return r.score, 0, 0, "", ""
                    tb = r.get_traceback()
                    return r.score, r.end_query, r.end_ref, tb.query, tb.ref
            raise OverflowError("traceback score overflows 64 bits")
        return trace

    def trace(q, t, go, ge, matrix):
        qb, tb_ = q.encode("latin-1"), t.encode("latin-1")
        for fn in fns:
            r = fn(qb, len(qb), tb_, len(tb_), go, ge, matrix)
            if not r:
                raise MemoryError("parasail returned no result")  # pragma: no cover
            try:
                if is_sat(r):
                    continue
                c = r[0]
                if c.score <= 0:
                    return c.score, 0, 0, "", ""
                tb = get_tb(r, qb, len(qb), tb_, len(tb_), matrix, b"|", b":", b".")
                try:
                    x = tb[0]
                    return (c.score, c.end_query, c.end_ref, x.query.decode("latin-1"),
                            x.ref.decode("latin-1"))
                finally:
                    tb_free(tb)
            finally:
                free(r)
        raise OverflowError("traceback score overflows 64 bits")  # pragma: no cover
    return trace


def sw_traceback(q: str, t: str, scoring: Scoring, *, method: str = "scan",
                 validate: bool = True) -> Alignment:
    """Full local alignment of one pair, for reported hits only.

    A traceback keeps a direction per cell (O(len q * len t) memory and several times the time of
    a score), which is why :func:`sw_scores` never does it.  Like the scores, it starts at 16 bits
    and widens on saturation.

    Scan is the default: it was ~15-40% faster than striped for tracebacks here, and parasail
    1.3.4's striped traceback reports INT_MIN (-32768 at 16 bits) instead of 0 when no cell scores
    above zero.  A pair with nothing to align gets the empty alignment (score 0, coordinates 0).
    """
    return sw_tracebacks([q], [t], scoring, method=method, validate=validate)[0]


def sw_tracebacks(queries: Sequence[str], targets: Sequence[str], scoring: Scoring, *,
                  method: str = "scan", validate: bool = True) -> list[Alignment]:
    """:func:`sw_traceback` of each ``(queries[i], targets[i])`` pair, in order."""
    _check_method(method)
    if len(queries) != len(targets):
        raise ValueError(f"{len(queries)} queries but {len(targets)} targets: pairs go by index")
    qs = _prepare(queries, scoring, "query", validate)
    ts = _prepare(targets, scoring, "target", validate)
    if scoring.open == scoring.extend:
        method = "scan"  # as in sw_scores: striped is not trusted with linear gaps
    trace = _trace_fns(method)
    matrix, go, ge = scoring.parasail_matrix(), scoring.open, scoring.extend
    raw = []  # (pair index, score, qend, send, query_aligned, target_aligned), positive scores
    for i, (q, t) in enumerate(zip(qs, ts)):
        score, eq, et, qa, ta = trace(q, t, go, ge, matrix)
        if score > 0:  # else nothing aligns: the empty alignment, not an arbitrary cell
            raw.append((i, score, eq + 1, et + 1, qa, ta))
    out = [EMPTY_ALIGNMENT] * len(qs)
    for i, aln in zip([x[0] for x in raw], _decode(raw, qs, ts, method)):
        out[i] = aln
    return out


def _decode(raw, qs, ts, method) -> list[Alignment]:
    """Alignments from parasail's aligned strings and end cells, all pairs in one numpy pass.

    Coordinates and CIGAR are rebuilt from the aligned strings and the end cell.  parasail
    1.3.4's own CIGAR is wrong whenever the alignment starts in the first target column: it
    keeps walking up that column and prepends bogus insertions (e.g. "4I1=" for GYDLA x A, with
    beg_query 0), which shifts qstart.  The strings and end positions were right in every case
    tested."""
    if not raw:
        return []
    qa_all = [x[4] for x in raw]
    ta_all = [x[5] for x in raw]
    lens = np.fromiter(map(len, qa_all), np.int64, len(raw))
    if lens.tolist() != list(map(len, ta_all)) or not lens.all():  # pragma: no cover - not seen
        raise RuntimeError("parasail returned empty aligned strings, or of different lengths")
    q = np.frombuffer("".join(qa_all).encode("latin-1"), np.uint8)
    t = np.frombuffer("".join(ta_all).encode("latin-1"), np.uint8)
    gq, gt = q == _GAP, t == _GAP
    code = np.where(gt, 2, np.where(gq, 3, (q != t).astype(np.int64)))
    ends = np.cumsum(lens)
    starts = ends - lens
    matches = _per_pair(code == 0, starts, ends)
    qend = np.array([x[2] for x in raw], np.int64)
    send = np.array([x[3] for x in raw], np.int64)
    qstart = qend - (lens - _per_pair(gq, starts, ends)) + 1
    sstart = send - (lens - _per_pair(gt, starts, ends)) + 1
    edge_gap = gq[starts] | gt[starts] | gq[ends - 1] | gt[ends - 1]
    # CIGAR runs: a run starts where the op changes or a pair's alignment starts
    new = np.ones(len(code), bool)
    new[1:] = code[1:] != code[:-1]
    new[starts] = True
    run_at = np.flatnonzero(new)
    run_len = np.diff(np.append(run_at, len(code)))
    key = code[run_at] * _TOKEN_CAP + np.minimum(run_len, _TOKEN_CAP - 1)
    table = _tokens()
    toks = [table[k] for k in key.tolist()]
    for r in np.flatnonzero(run_len >= _TOKEN_CAP).tolist():
        toks[r] = f"{run_len[r]}{_OPS[code[run_at[r]]]}"
    first_run = np.searchsorted(run_at, starts).tolist() + [len(run_at)]
    out = []
    for k, (i, score, qe, se, qa, ta) in enumerate(raw):
        qs0, ss0 = int(qstart[k]), int(sstart[k])
        if (qs0 < 1 or ss0 < 1 or edge_gap[k] or qs[i][qs0 - 1:qe] != qa.replace("-", "")
                or ts[i][ss0 - 1:se] != ta.replace("-", "")):
            raise RuntimeError(  # pragma: no cover - a parasail traceback bug not seen so far
                f"parasail returned an inconsistent {method} traceback (score {score}, ends "
                f"{qe}/{se}): {qa!r} / {ta!r}")
        out.append(Alignment(score, qs0, qe, ss0, se,
                             "".join(toks[first_run[k]:first_run[k + 1]]), qa, ta,
                             int(matches[k]), len(qa)))
    return out


def _per_pair(flags: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sum of ``flags`` (or values) over each pair's columns ``[starts, ends)``; empty pairs 0."""
    out = np.zeros(len(starts), np.int64)
    some = ends > starts
    if some.any():
        out[some] = np.add.reduceat(flags, starts[some], dtype=np.int64)
    return out


def rescore(alignment: Alignment, scoring: Scoring) -> int:
    """Score of an alignment recomputed from its aligned strings alone (:func:`rescore_many`)."""
    return int(rescore_many([alignment.query_aligned], [alignment.target_aligned], scoring)[0])


def rescore_many(query_aligned: Sequence[str], target_aligned: Sequence[str],
                 scoring: Scoring) -> np.ndarray:
    """Scores (int64) of alignments recomputed from their aligned strings alone.

    It checks a traceback independently of the DP that produced it: every column is scored from
    the matrix and every maximal run of ``-`` in one row is charged as one gap, so a traceback that
    splits or misplaces a gap shows up as a different score.  All alignments in one numpy pass.
    """
    lens = np.fromiter(map(len, query_aligned), np.int64, len(query_aligned))
    for qa, ta in zip(query_aligned, target_aligned):
        if len(qa) != len(ta):
            raise ValueError(f"aligned strings differ in length: {len(qa)} vs {len(ta)}")
    if len(query_aligned) != len(target_aligned):
        raise ValueError(f"{len(query_aligned)} query rows but {len(target_aligned)} target rows")
    q = np.frombuffer("".join(query_aligned).upper().encode("latin-1"), np.uint8)
    t = np.frombuffer("".join(target_aligned).upper().encode("latin-1"), np.uint8)
    gq, gt = q == _GAP, t == _GAP
    if (gq & gt).any():
        raise ValueError("a column with a gap on both sides is not an alignment column")
    ends = np.cumsum(lens)
    starts = ends - lens
    scores, codes = scoring.score_table()
    letters = np.where(gq | gt, 0, scores[codes[q], codes[t]])
    # a gap run opens where its row has '-' and the column before (in the same alignment) not
    opens = np.zeros(len(q), np.int64)
    firsts = starts[lens > 0]  # each non-empty alignment's first column
    for g in (gq, gt):
        o = g.copy()
        o[1:] &= ~g[:-1]
        o[firsts] = g[firsts]
        opens += o
    n_open = _per_pair(opens, starts, ends)
    n_gap = _per_pair(gq | gt, starts, ends)
    # a run of L costs gap_cost(L) = open + (L - 1) * extend: summed over runs
    gap_costs = n_open * scoring.open + (n_gap - n_open) * scoring.extend
    return _per_pair(letters, starts, ends) - gap_costs
