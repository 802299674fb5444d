"""Many-to-many Smith-Waterman: SIMD scores for every pair, tracebacks only for the hits.

Scores come from parasail's striped (or scan) kernels.  A search scores every pair but reports few,
so the full traceback (coordinates, CIGAR, aligned strings) is paid only in :func:`sw_traceback`,
for the pairs a caller keeps (:func:`sw_top_k` does both steps).  Gaps follow
:class:`kernels.scoring.Scoring`: a gap of length L costs ``open + (L-1)*extend`` in the standard
convention, ``open + L*extend`` in the BLAST one.

Integer width.  SIMD kernels are fastest in narrow lanes, and a score that does not fit saturates
instead of wrapping; parasail flags that, and the pair is then recomputed one width up
(8 → 16 → 32 → 64 bits), so results are exact whatever width was tried first.

:func:`sw_reference` / :func:`sw_reference_batch` are an independent plain-array Gotoh recurrence
(rows vectorised over the target, many targets at once); the tests use them as a second opinion
beside Biopython, and they run on any array-API namespace (numpy, torch, cupy) for the array
backend.

Nothing here does I/O, starts Ray, or writes into its inputs.

The shared record and input checks live in ``kernels/sw_common.py``, the reference in
``kernels/sw_reference.py``, the tracebacks and their re-score in ``kernels/sw_trace.py``; this
module's names include theirs.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from .scoring import Scoring
from .sw_common import (EMPTY_ALIGNMENT, METHODS, Alignment, _check_k, _check_mask,
                        _check_method, _prepare, cells)
from .sw_reference import sw_reference, sw_reference_batch
from .sw_trace import rescore, rescore_many, sw_traceback, sw_tracebacks

__all__ = [
    "Alignment",
    "EMPTY_ALIGNMENT",
    "sw_scores",
    "sw_traceback",
    "sw_tracebacks",
    "sw_top_k",
    "top_k",
    "rescore",
    "rescore_many",
    "sw_reference",
    "sw_reference_batch",
    "cells",
]

_WIDTHS = (8, 16, 32, 64)
_INT32_MAX = int(np.iinfo(np.int32).max)

# Starting at 8 bits pays off only when most pairs score below ~127: unrelated sequences long
# enough that SIMD work, not call overhead, dominates.  Measured here (AVX2, one core): globins45
# # all-vs-all ran 1.07 Gcells/s starting at 8 bits against 1.69 at 16 (64% of the pairs saturate
# and are redone), globins45 x 7LESS_DROME (2,554 aa) 15.7 against 9.8, random unrelated
# 300-600-residue proteins 7.6 against 6.4.  So "auto" starts a pair at 8 bits only when its longer
# sequence (the profile) is at least this long, and gives up on 8 bits for a query once more than
# a quarter of its first pairs have saturated.
_AUTO8_MIN_LEN = 250
_AUTO8_PROBE = 4
_AUTO8_MAX_SAT_RATE = 0.25


class _Kernels:
    """parasail entry points for one method, looked up once instead of per pair.

    ``score[w](profile, target_bytes, open, extend) -> (score, saturated)``.  When the installed
    parasail exposes its ctypes library the C function is called directly: on short proteins the
    Python wrapper (a Result object, re-decoding the profile's sequence, a finaliser) cost about a
    third of the time of the SIMD work itself.  Otherwise the public wrapper is used.
    """

    def __init__(self, method: str, direct: bool = True):
        import parasail

        self.method = method
        self.profile = {w: getattr(parasail, f"profile_create_{w}") for w in _WIDTHS}
        lib = _parasail_lib() if direct else None
        self.direct = lib is not None
        if lib is not None:
            self.score = {w: _direct_score(lib, getattr(lib, f"parasail_sw_{method}_profile_{w}"))
                          for w in _WIDTHS}
        else:
            self.score = {w: _wrapped_score(getattr(parasail, f"sw_{method}_profile_{w}"))
                          for w in _WIDTHS}


def _parasail_lib():
    try:
        from parasail import bindings_v2 as pb

        lib = pb._lib
        needed = ["parasail_result_free", "parasail_result_is_saturated"] + [
            f"parasail_sw_{m}_profile_{w}" for m in METHODS for w in _WIDTHS]
        for name in needed:
            getattr(lib, name)
        # the wrapper module declares the result pointer type; without it the call is unsafe
        if lib.parasail_sw_striped_profile_16.restype is not pb.c_result_p:
            return None
        return lib
    except Exception:  # pragma: no cover - other parasail layouts fall back to the public API
        return None


def _direct_score(lib, cfn):
    free = lib.parasail_result_free
    is_sat = lib.parasail_result_is_saturated

    def score(profile, target: bytes, go: int, ge: int):
        ptr = cfn(profile, target, len(target), go, ge)
        try:
            return ptr[0].score, is_sat(ptr) != 0
        finally:
            free(ptr)

    return score


def _wrapped_score(fn):
    def score(profile, target: bytes, go: int, ge: int):
        r = fn(profile, target, go, ge)
        return r.score, r.saturated

    return score


_KERNELS: dict[tuple[str, bool], _Kernels] = {}


@functools.cache
def _compiled_loop() -> bool:
    """Is the compiled pair loop usable here (parasail's C library reachable)?"""
    from .parasail_loop import available
    return available()


def _kernels(method: str, direct: bool = True) -> _Kernels:
    k = _KERNELS.get((method, direct))
    if k is None:
        k = _KERNELS[(method, direct)] = _Kernels(method, direct)
    return k


# ----------------------------------------------------------------------------- scores

def sw_scores(
    queries: Sequence[str],
    targets: Sequence[str],
    scoring: Scoring,
    mask=None,
    *,
    method: str = "auto",
    width: int | str = "auto",
    validate: bool = True,
    fill: int = -1,
    _direct: bool = True,
) -> np.ndarray:
    """Smith-Waterman scores of every (query, target) pair, shape ``(len(queries), len(targets))``.

    Each sequence's parasail profile is built at most once per call and reused across all its
    pairs.  Scores are symmetric for the symmetric matrices used here, so each pair is computed
    with the longer sequence as the profile: SIMD runs down the profile, and a short profile
    leaves most of each vector step idle (globins45 against 7LESS_DROME at 16 bits: 4.5 Gcells/s
    with the globins as profiles, 10.1 with 7LESS_DROME).

    ``method`` and ``width`` change speed, never results.  ``width`` is the first integer width
    tried (8, 16, 32 or "auto"); a saturated pair is redone one width up.  ``method`` is "striped",
    "scan" or "auto".  Striped is fastest on unrelated pairs and scan on closely related ones
    (striped's lazy-F correction loop runs long when high scores make vertical gaps pay): measured here, unrelated proteins
    ran 6.4 vs 4.0 Gcells/s and similar DNA alleles 2.6 vs 3.7.  "auto" tries striped first (at 8
    bits when the longer sequence has 250 letters or more) and uses scan for every retry after a
    saturation, since a saturated pair is a high-scoring, related one; a query whose pairs keep
    saturating 8 bits goes straight to scan at 16.  It was the fastest, or within 5% of it, on
    every workload of ``benchmarks/sw_micro.py``.

    When ``open == extend`` (linear gaps, e.g. 0/0 or BLAST-style 0/2) scan is used whatever
    ``method`` says: parasail 1.3.4's striped kernels return wrong scores there (found by the
    reference comparison: 0/0, 1/1, 2/2, 4/4, 5/5 all failed on some pairs, at every width), while
    scan, Biopython and :func:`sw_reference_batch` agree.

    ``mask`` (bool, same shape) selects the pairs to compute; the rest hold ``fill`` (-1 by
    default, which no local score can be).  ``validate=False`` skips the input checks for callers
    that already ran :func:`kernels.scoring.validate` on these exact sequences.

    Returns int32, or int64 in the (unreached in practice) case that a score needs 64 bits.
    """
    if method != "auto":
        _check_method(method)
    if width != "auto" and width not in _WIDTHS:
        raise ValueError(f"width must be 'auto' or one of {_WIDTHS}, got {width!r}")
    qs = _prepare(queries, scoring, "query", validate)
    ts = _prepare(targets, scoring, "target", validate)
    nq, nt = len(qs), len(ts)
    mask = _check_mask(mask, (nq, nt))
    out = np.full((nq, nt), fill, dtype=np.int32)
    if nq == 0 or nt == 0:
        return out

    first = "striped" if method == "auto" else method
    retry = "scan" if method == "auto" else method
    if scoring.open == scoring.extend:
        first = retry = "scan"  # parasail's striped kernels mis-score linear gaps; see the docstring
    # parasail encodes str arguments on every call; bytes pass straight through.
    qb = [s.encode("latin-1") for s in qs]
    tb = [s.encode("latin-1") for s in ts]
    if _direct and _compiled_loop():
        # the whole loop in compiled code, GIL released once (kernels/parasail_loop.py)
        from .parasail_loop import score_pairs
        scores = score_pairs(qb, tb, scoring.parasail_matrix(), scoring.open, scoring.extend, mask,
                             first, retry, -1 if width == "auto" else _WIDTHS.index(width),
                             (_AUTO8_MIN_LEN, _AUTO8_PROBE, _AUTO8_MAX_SAT_RATE), fill)
        if scores.size and int(scores.max()) > _INT32_MAX:  # pragma: no cover - needs > 2**31
            return scores
        return scores.astype(np.int32)
    first_kern = _kernels(first, _direct)
    retry_kern = _kernels(retry, _direct)
    profile_create = first_kern.profile
    matrix = scoring.parasail_matrix()
    go, ge = scoring.open, scoring.extend
    qlen = [len(s) for s in qs]
    tlen = [len(s) for s in ts]
    qprof: dict[tuple[int, int], object] = {}
    tprof: dict[tuple[int, int], object] = {}

    def profile(cache, seqs, i, w):
        p = cache.get((i, w))
        if p is None:
            p = cache[(i, w)] = profile_create[w](seqs[i], matrix)
        return p

    for i in range(nq):
        cols = range(nt) if mask is None else np.flatnonzero(mask[i]).tolist()
        tried8 = sat8 = 0
        for j in cols:
            lq, lt = qlen[i], tlen[j]
            kern = first_kern
            if width == "auto":
                w = 16
                if max(lq, lt) >= _AUTO8_MIN_LEN:
                    if tried8 < _AUTO8_PROBE or sat8 <= _AUTO8_MAX_SAT_RATE * tried8:
                        w = 8
                    else:
                        kern = retry_kern
            else:
                w = width
            while True:
                if lq >= lt:
                    score, saturated = kern.score[w](profile(qprof, qb, i, w), tb[j], go, ge)
                else:
                    score, saturated = kern.score[w](profile(tprof, tb, j, w), qb[i], go, ge)
                if w == 8:
                    tried8 += 1
                if not saturated:
                    break
                if w == 8:
                    sat8 += 1
                if w == 64:  # pragma: no cover - needs a score beyond 2**63
                    raise OverflowError(f"score of query {i} x target {j} overflows 64 bits")
                w = _WIDTHS[_WIDTHS.index(w) + 1]
                kern = retry_kern
            if score > _INT32_MAX and out.dtype == np.int32:  # pragma: no cover - needs > 2**31
                out = out.astype(np.int64)
            out[i, j] = score
    return out


# ----------------------------------------------------------------------------- top-k

def top_k(scores: np.ndarray, k: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """The k best targets per query: ``(indices, values)``, each ``(n_queries, min(k, n_targets))``.

    Ties go to the lower target index so that results do not depend on how the targets were
    split into tiles.  Pairs outside ``mask`` are never reported; a query with fewer than k
    computed pairs is padded with index -1 and value -1.
    """
    k = _check_k(k)
    scores = np.asarray(scores)
    if scores.ndim != 2:
        raise ValueError(f"scores must be 2-D (queries x targets), got shape {scores.shape}")
    mask = _check_mask(mask, scores.shape)
    nq, nt = scores.shape
    kk = min(k, nt)
    s = scores.astype(np.int64)
    absent = np.iinfo(np.int64).min + 1  # still negatable, so it sorts last
    if mask is not None:
        s = np.where(mask, s, absent)
    # stable sort on the negated score keeps equal scores in target order
    order = np.argsort(-s, axis=1, kind="stable")[:, :kk]
    vals = np.take_along_axis(s, order, axis=1)
    idx = order.astype(np.int64)
    if mask is not None:
        missing = vals == absent
        idx[missing] = -1
        vals[missing] = -1
    return idx, vals.astype(scores.dtype if scores.dtype.kind == "i" else np.int64)


def sw_top_k(
    queries: Sequence[str],
    targets: Sequence[str],
    scoring: Scoring,
    k: int,
    mask=None,
    *,
    method: str = "auto",
) -> list[list[tuple[int, Alignment]]]:
    """Per query, the k best ``(target index, Alignment)`` pairs, best first (ties: lower index).

    All inputs and k are checked before any cell is computed; tracebacks are run only for the
    reported pairs, and each traceback's score is checked against the scoring pass.  ``method``
    is passed to :func:`sw_scores`; tracebacks use scan unless a method is named.
    """
    k = _check_k(k)
    trace_method = "scan" if method == "auto" else method
    _check_method(trace_method)
    qs = _prepare(queries, scoring, "query", True)
    ts = _prepare(targets, scoring, "target", True)
    scores = sw_scores(qs, ts, scoring, mask, method=method, validate=False)
    idx, vals = top_k(scores, k, mask)
    pairs = [(i, j, v) for i in range(len(qs))
             for j, v in zip(idx[i].tolist(), vals[i].tolist()) if j >= 0]
    alns = sw_tracebacks([qs[i] for i, _, _ in pairs], [ts[j] for _, j, _ in pairs], scoring,
                         method=trace_method, validate=False)  # all hits in one call
    out: list[list[tuple[int, Alignment]]] = [[] for _ in qs]
    for (i, j, v), aln in zip(pairs, alns):
        if aln.score != v:  # pragma: no cover - would be a parasail bug
            raise RuntimeError(f"traceback score {aln.score} != sw_scores score {v} "
                               f"for query {i} x target {j}")
        out[i].append((j, aln))
    return out
