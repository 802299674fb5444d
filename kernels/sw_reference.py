"""The reference Smith-Waterman of :mod:`kernels.smith_waterman`: an independent plain-array
Gotoh recurrence (rows vectorised over the target, many targets at once), on any array-API
namespace (numpy, torch, cupy). The tests use it as a second opinion beside Biopython; it shares
only the scoring's matrix table with parasail, so the two agreeing checks the SIMD code.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .scoring import Scoring
from .sw_common import _prepare

_PROFILE_BYTES = 64 << 20


def sw_reference(q: str, t: str, scoring: Scoring, *, validate: bool = True) -> int:
    """Smith-Waterman score of one pair by the plain Gotoh recurrence (no SIMD, no parasail kernel)."""
    return int(sw_reference_batch(q, [t], scoring, validate=validate)[0])


def sw_reference_batch(q: str, targets: Sequence[str], scoring: Scoring, *, xp=None,
                       validate: bool = True):
    """Scores of one query against many targets, one array row per query position.

    Row i of the DP is computed for all targets at once (targets padded to a common length; the
    padding sits right of every real column and so never feeds a real cell).  Within a row the
    horizontal gap term is a prefix maximum,

        E[j] = max_{k<j} (H~[k] + k*e) - o - (j-1)*e,

    taken over H~ = the cell values without horizontal gaps.  That is exact when o >= e, which
    :meth:`Scoring.create` enforces: a gap that closes and reopens at once never beats one gap.

    ``xp`` is an array-API namespace (numpy when None); results come back on it, int64.  Only the
    matrix table is shared with parasail, so agreement of the two is a real check of the SIMD code.
    """
    (q,) = _prepare([q], scoring, "query", validate)
    ts = _prepare(targets, scoring, "target", validate)
    if xp is None:
        xp = np
    table, codes = scoring.score_table()
    b = len(ts)
    n = max((len(t) for t in ts), default=0)
    if b == 0:
        return xp.zeros((0,), dtype=xp.int64)  # works for numpy and array-API namespaces
    pad = codes[ord(q[0])]  # any in-alphabet code; padded columns are masked out below
    tc = np.full((b, n), pad, dtype=np.int64)
    for r, t in enumerate(ts):
        tc[r, : len(t)] = codes[np.frombuffer(t.encode("latin-1"), dtype=np.uint8)]
    qc = codes[np.frombuffer(q.encode("latin-1"), dtype=np.uint8)].tolist()
    lens = np.array([len(t) for t in ts], dtype=np.int64)

    o, e = int(scoring.open), int(scoring.extend)
    # prof[c] = scores of letter c against every target cell, for the letters q uses.  Gathered
    # once when that fits in _PROFILE_BYTES, otherwise row by row (one extra gather per row) so a
    # big batch costs O(targets x length) memory, not 24 times that.
    letters = sorted(set(qc))
    if len(letters) * b * n * 8 <= _PROFILE_BYTES:
        slot = {c: i for i, c in enumerate(letters)}
        prof = table.astype(np.int64)[letters][:, tc]
        rows = [slot[c] for c in qc]
    else:
        prof, rows = None, qc
    valid = np.arange(n)[None, :] < lens[:, None]
    if getattr(xp, "__name__", "").endswith("numpy"):
        colmax = _rows_numpy(rows, prof, table, tc, o, e)
        return np.where(valid, colmax, 0).max(axis=1)
    colmax = _rows_xp(rows, None if prof is None else xp.asarray(prof), xp.asarray(table.astype(np.int64)),
                      xp.asarray(tc), o, e, xp)
    return xp.max(xp.where(xp.asarray(valid), colmax, xp.zeros_like(colmax)), axis=1)


def _rows_numpy(rows, prof, table, tc, o: int, e: int) -> np.ndarray:
    """The row loop with preallocated buffers: faster than the generic one, same arithmetic."""
    b, n = tc.shape
    table64 = table.astype(np.int64)
    sub = np.empty((b, n), dtype=np.int64)
    h_prev = np.zeros((b, n + 1), dtype=np.int64)               # column 0 is the H = 0 boundary
    h_next = np.zeros((b, n + 1), dtype=np.int64)
    f = np.full((b, n), -o, dtype=np.int64)                     # any value <= e - o works for row 0
    tmp = np.empty((b, n), dtype=np.int64)
    h_t = np.empty((b, n), dtype=np.int64)
    a = np.zeros((b, n), dtype=np.int64)                         # a[:, 0] stays H~[0] = 0
    ecol = np.empty((b, n), dtype=np.int64)
    ramp_k = np.arange(1, n, dtype=np.int64) * e                 # k*e for k = 1..n-1
    o_ramp_j = o + np.arange(0, n, dtype=np.int64) * e           # o + (j-1)*e for j = 1..n
    colmax = np.zeros((b, n), dtype=np.int64)                    # best H seen in each column
    for c in rows:
        if prof is None:
            np.take(table64[c], tc, out=sub)
        np.subtract(h_prev[:, 1:], o, out=tmp)
        np.subtract(f, e, out=f)
        np.maximum(f, tmp, out=f)                                # vertical gaps
        np.add(h_prev[:, :-1], sub if prof is None else prof[c], out=h_t)
        np.maximum(h_t, f, out=h_t)
        np.maximum(h_t, 0, out=h_t)                              # H~: everything but horizontal gaps
        np.add(h_t[:, :-1], ramp_k, out=a[:, 1:])
        np.maximum.accumulate(a, axis=1, out=ecol)
        np.subtract(ecol, o_ramp_j, out=ecol)                    # horizontal gaps, by prefix maximum
        np.maximum(h_t, ecol, out=h_next[:, 1:])
        np.maximum(colmax, h_next[:, 1:], out=colmax)
        h_prev, h_next = h_next, h_prev
    return colmax


def _rows_xp(rows, prof, table, tc, o: int, e: int, xp):
    """The same recurrence in array-API calls only (no out=, no accumulate), for torch/cupy."""
    b, n = tc.shape
    flat = xp.reshape(tc, (-1,))
    i64 = xp.int64
    ramp_k = xp.asarray(np.arange(1, n, dtype=np.int64) * e)
    o_ramp_j = xp.asarray(o + np.arange(0, n, dtype=np.int64) * e)
    zero_col = xp.zeros((b, 1), dtype=i64)
    h_prev = xp.zeros((b, n + 1), dtype=i64)
    f = xp.full((b, n), -o, dtype=i64)
    colmax = xp.zeros((b, n), dtype=i64)
    for c in rows:
        sub = prof[c, ...] if prof is not None else xp.reshape(xp.take(table[c, ...], flat, axis=0), (b, n))
        f = xp.maximum(h_prev[:, 1:] - o, f - e)
        h_t = xp.maximum(xp.maximum(h_prev[:, :-1] + sub, f), xp.zeros_like(f))
        a = xp.concat([zero_col, h_t[:, :-1] + ramp_k], axis=1)
        h = xp.maximum(h_t, _prefix_max(a, xp) - o_ramp_j)
        colmax = xp.maximum(colmax, h)
        h_prev = xp.concat([zero_col, h], axis=1)
    return colmax


def _prefix_max(a, xp):
    """Running maximum along the last axis; numpy has it built in, the array API does not."""
    if isinstance(a, np.ndarray):
        return np.maximum.accumulate(a, axis=-1)
    n = a.shape[-1]
    shift = 1
    while shift < n:  # Hillis-Steele doubling: log2(n) passes of elementwise maximum
        shifted = xp.concat([xp.zeros_like(a[:, :shift]), a[:, :-shift]], axis=1)  # a >= 0, so 0 is neutral
        a = xp.maximum(a, shifted)
        shift *= 2
    return a
