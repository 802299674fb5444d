"""The compiled tile kernels of :mod:`kernels.bitset`: every pair's count and Jaccard
(``_and_popcount_jaccard``), each row's and column's k best (``_jaccard_topk_cells``) and the
pairs past a threshold (``_jaccard_above``).

Each kernel opens with the same dispatch to the counting passes (``kernels/bitset_counts.py``),
written out in each, not shared: a helper function between a kernel and the counting loops
stopped numba vectorising them (3x slower, measured).
"""
from __future__ import annotations

import numba
import numpy as np

from .bitset_counts import (WORD_MAJOR_MAX_WORDS, _count_row_t, _count_rows, _count_rows_sparse,
                            _count_two_rows_t, _load_block, _pair_span)

FLAG_CHUNK = 64  # columns flagged at a time in the top-k kernel (see its pass 2)


@numba.njit(cache=True, nogil=True)
def _and_popcount_jaccard(a, b, size_a, size_b, mask, use_mask, inter, sim, jblock,
                          with_j, sparse, pstart, pcols):
    """inter[i, j] = popcount(a[i] & b[j]) for every pair the mask allows (zeroed arrays), and
    with ``with_j`` J = |A∩B| / |A∪B| (0 for two empty sets) in the same pass: on sets of a
    few words the division and the stores cost as much as the popcounts, and a second pass
    over the tile would read it all again. Right rows are taken a cache-sized block at a time,
    each pair of left rows swept past the block."""
    na, nw = a.shape
    nb = b.shape[0]
    c0 = np.empty(jblock, np.uint64)
    c1 = np.empty(jblock, np.uint64)
    word_major = nw <= WORD_MAJOR_MAX_WORDS and not sparse
    bt = np.empty((nw, jblock) if word_major else (1, 1), np.uint64)
    for j0 in range(0, nb, jblock):
        j1 = min(nb, j0 + jblock)
        _load_block(b, bt, word_major, j0, j1)
        for i in range(0, na, 2):
            two, lo, hi, lo0, hi0, lo1, hi1 = _pair_span(mask, use_mask, na, i, j0, j1)
            if lo >= hi:
                continue
            # (these six lines open every tile kernel here: a helper function between the
            # kernel and the counting loops stopped their vectorising, 3x slower measured)
            if sparse:
                _count_rows_sparse(a, i, two, pstart, pcols, lo, hi, nw, c0, c1)
            elif not word_major:
                _count_rows(a, i, two, b, lo, hi, nw, c0, c1)
            elif two:
                _count_two_rows_t(a, i, bt, lo - j0, hi - lo, nw, c0, c1)
            else:
                _count_row_t(a, i, bt, lo - j0, hi - lo, nw, c0)
            for r in range(2 if two else 1):
                cr, rlo, rhi = (c0, lo0, hi0) if r == 0 else (c1, lo1, hi1)
                sa = size_a[i + r]
                for j in range(rlo, rhi):
                    if use_mask and not mask[i + r, j]:
                        continue
                    c = np.int64(cr[j - lo])
                    inter[i + r, j] = c
                    if with_j:
                        union = sa + size_b[j] - c
                        sim[i + r, j] = c / union if union > 0 else 0.0


@numba.njit(cache=True, nogil=True)
def _candidates(rj, rv, rn, ci, cv, cn):
    """The rows' k bests then the columns' as (i, j, value, is_column) arrays: what a tile's
    top-k pass hands its sink (rows' slots ``rj/rv/rn``, columns' ``ci/cv/cn``)."""
    nr, nc = rn.shape[0], cn.shape[0]
    total = rn.sum() + cn.sum()
    out_i = np.empty(total, np.int64)
    out_j = np.empty(total, np.int64)
    out_v = np.empty(total)
    out_c = np.zeros(total, np.bool_)
    w = 0
    for i in range(nr):
        for p in range(rn[i]):
            out_i[w] = i
            out_j[w] = rj[i, p]
            out_v[w] = rv[i, p]
            w += 1
    for j in range(nc):
        for p in range(cn[j]):
            out_i[w] = ci[j, p]
            out_j[w] = j
            out_v[w] = cv[j, p]
            out_c[w] = True
            w += 1
    return out_i, out_j, out_v, out_c


@numba.njit(cache=True, nogil=True, inline="always")
def _push(idx, vals, n, slot, x, v, k, sign):
    """Insert the cell of index ``x`` and J ``v`` into the k best of ``slot``, kept best first
    (by J times ``sign``): a later equal J ranks after the ones there, so ties keep the lower
    index (indices come in increasing order). Returns whether ``slot`` holds k."""
    m = n[slot]
    p = m if m < k else k - 1
    while p > 0 and sign * (v - vals[slot, p - 1]) > 0:
        if p < k:
            idx[slot, p] = idx[slot, p - 1]
            vals[slot, p] = vals[slot, p - 1]
        p -= 1
    idx[slot, p] = x
    vals[slot, p] = v
    if m < k:
        n[slot] = m + 1
        m += 1
    return m == k


FLOOR_SLACK = 1e-6  # a threshold the flag pass uses is moved this much (relative) the
#                     lenient way, more than float32 rounds: the pass may flag a few cells too
#                     many, never one too few


@numba.njit(cache=True, nogil=True, inline="always")
def _lenient(kth, floor, sign):
    """The flag pass's threshold: the stricter of the k-th best so far and the floor, moved
    by ``FLOOR_SLACK`` the lenient way (cells tied with it stay flagged), in float32."""
    t = kth
    if sign * (floor - t) > 0:
        t = floor
    return np.float32(t - sign * (abs(t) * FLOOR_SLACK + 1e-12))


@numba.njit(cache=True, nogil=True)
def _flag_cells(cnt, size_b, sa, row_t, col_t, sign, flag):
    """``flag[j]``: may cell j (its count ``cnt[j]``, its column's set size ``size_b[j]``, the
    row's set size ``sa``) enter the row's k best (its lenient threshold ``row_t``, from
    ``_lenient``) or its column's (``col_t[j]``)? J = c / u beats t when c - t u > 0 (times
    ``sign``): no division, branch-free, so it vectorises; every argument starts at the row's
    first column (zero-based slices vectorise, offset indices measured 3x slower).

    In float32 (twice the lanes of doubles): every count is below 2^17 (k <= 8), so c and u
    are exact, and the lenient thresholds absorb the rounding of t u. ``cnt`` is narrowed to
    int32 first (int32 -> float is one vector instruction; int64 -> float is not)."""
    for j in range(cnt.shape[0]):
        c = np.float32(np.int32(cnt[j]))
        u = max(sa + size_b[j] - c, np.float32(1.0))  # two empty sets: J = 0 = 0 / 1
        flag[j] = (sign * (c - row_t * u) > 0) | (sign * (c - col_t[j] * u) > 0)


@numba.njit(cache=True, nogil=True)
def _jaccard_topk_cells(a, b, size_a, size_b, mask, use_mask, k, sign, do_rows, do_cols,
                        row_floor, col_floor, jblock, sparse, pstart, pcols):
    """J of every pair the mask allows, keeping only each row's k best (``do_rows``) and each
    column's (``do_cols``) by J times ``sign`` (-1: smallest first), ties to the lower index,
    among the cells at least as good as the row's ``row_floor`` (the column's ``col_floor``):
    (i, j, J, is_column) of every candidate, rows first then columns.

    A floor is the k-th best its item already has in other tiles (``-inf``, ``+inf`` when
    smallest win: none). A cell worse than it cannot be among the item's k best of the whole
    run, and without it every tile starts each row and column from nothing: on a tile of
    short reads at k = 5, a tenth of the cells then entered a k best (~k ln(m / k) records of
    each of m rows and columns), and those pushes cost more than the counting.

    No tile-sized array is written, and J is divided out only for the cells the flag pass
    lets through: as c / |A u B|, the very double of :func:`bitset_jaccard`, which orders
    cells exactly as their fractions do (distinct fractions of terms below 2^31 never round
    to one double; equal ones are one double, so ties with a floor are exact). Two rows'
    counts over a block of columns are taken first, then, ``FLAG_CHUNK`` columns at a time,
    a branch-free pass flags the cells that may enter a k best and the flagged ones are
    pushed: each chunk is flagged against the k-th bests as the chunks before it left them. Cells are visited a cache block of columns at a
    time, rows in order within it, so every row sees its columns, and every column its rows,
    in increasing order: ties go to the lower index."""
    na, nw = a.shape
    nb = b.shape[0]
    nr = na if do_rows else 0
    nc = nb if do_cols else 0
    # the k-th best J so far, "worse than any J" before a slot holds k: -1 ranks below every
    # J when the largest win, 2 above every J when the smallest do
    fsign = np.float64(sign)
    none = -1.0 if sign > 0 else 2.0
    never = np.inf * fsign  # a threshold no cell beats
    rj = np.empty((nr, k), np.int64)
    rv = np.empty((nr, k))
    rn = np.zeros(nr, np.int64)
    row_kth = np.full(nr, none)
    ci = np.empty((nc, k), np.int64)
    cv = np.empty((nc, k))
    cn = np.zeros(nc, np.int64)
    col_kth = np.full(nc, none)
    # the flag pass's column thresholds: the stricter of the k-th best and the floor, lenient
    col_t = np.full(nb if do_cols else FLAG_CHUNK, np.float32(never), np.float32)
    for j in range(nc):
        col_t[j] = _lenient(none, col_floor[j], fsign)
    fsign32 = np.float32(sign)
    size_bf = size_b.astype(np.float32)
    c0 = np.empty(jblock, np.uint64)
    c1 = np.empty(jblock, np.uint64)
    word_major = nw <= WORD_MAJOR_MAX_WORDS and not sparse
    bt = np.empty((nw, jblock) if word_major else (1, 1), np.uint64)
    flag = np.zeros(FLAG_CHUNK, np.bool_)
    flag_words = flag.view(np.uint64)  # (FLAG_CHUNK is a multiple of 8)
    for j0 in range(0, nb, jblock):
        j1 = min(nb, j0 + jblock)
        _load_block(b, bt, word_major, j0, j1)
        for i2 in range(0, na, 2):
            two, lo, hi, lo0, hi0, lo1, hi1 = _pair_span(mask, use_mask, na, i2, j0, j1)
            if lo >= hi:
                continue
            # pass 1, branch-free: the counts of two rows at a time
            if sparse:
                _count_rows_sparse(a, i2, two, pstart, pcols, lo, hi, nw, c0, c1)
            elif not word_major:
                _count_rows(a, i2, two, b, lo, hi, nw, c0, c1)
            elif two:
                _count_two_rows_t(a, i2, bt, lo - j0, hi - lo, nw, c0, c1)
            else:
                _count_row_t(a, i2, bt, lo - j0, hi - lo, nw, c0)
            for r in range(2 if two else 1):
                i = i2 + r
                cr, rlo, rhi = (c0, lo0, hi0) if r == 0 else (c1, lo1, hi1)
                if rlo >= rhi:
                    continue
                sa = size_a[i]
                saf = np.float32(sa)
                if do_rows:
                    kth, floor = row_kth[i], row_floor[i]
                    row_t = _lenient(kth, floor, fsign)
                else:
                    kth, floor, row_t = none, never, np.float32(never)
                for f0 in range(rlo, rhi, FLAG_CHUNK):
                    f1 = min(rhi, f0 + FLAG_CHUNK)
                    cnt = cr[f0 - lo:f1 - lo]
                    # pass 2, branch-free so it vectorises: which cells beat the row's or
                    # their column's threshold (a few more than can enter: it is lenient)
                    _flag_cells(cnt, size_bf[f0:f1], saf, row_t,
                                col_t[f0:f1] if do_cols else col_t[:f1 - f0], fsign32, flag)
                    # pass 3: the flagged cells, checked exactly against the k-th bests as
                    # they are now, enter their row's and column's k best in column order;
                    # eight flags are read as one word, and most words are zero
                    for x in range(f1 - f0, FLAG_CHUNK):
                        flag[x] = False
                    for w8 in range(FLAG_CHUNK // 8):
                        if flag_words[w8] == 0:
                            continue
                        for j in range(f0 + 8 * w8, min(f1, f0 + 8 * w8 + 8)):
                            if not flag[j - f0] or (use_mask and not mask[i, j]):
                                continue
                            c = np.int64(cnt[j - f0])
                            u = max(sa + size_b[j] - c, np.int64(1))
                            v = c / u  # (0 / 1: two empty sets)
                            # floors: ties kept (equal fractions, equal doubles)
                            if do_rows and fsign * (v - kth) > 0 and fsign * (v - floor) >= 0:
                                if _push(rj, rv, rn, i, j, v, k, sign):
                                    kth = rv[i, k - 1]
                                    row_t = _lenient(kth, floor, fsign)
                            if do_cols and fsign * (v - col_kth[j]) > 0 and \
                                    fsign * (v - col_floor[j]) >= 0:
                                if _push(ci, cv, cn, j, i, v, k, sign):
                                    col_kth[j] = cv[j, k - 1]
                                    col_t[j] = _lenient(col_kth[j], col_floor[j], fsign)
                if do_rows:
                    row_kth[i] = kth
    return _candidates(rj, rv, rn, ci, cv, cn)


@numba.njit(cache=True, nogil=True)
def _jaccard_flags(cnt, size_b, sa, t, above, val, flag):
    """``val[j]`` = J of cell j of a row (as ``_flag_cells`` takes it) and ``flag[j]`` whether
    it is >= t (``above``) or <= t: branch-free, zero-based, so it vectorises."""
    for j in range(cnt.shape[0]):
        c = np.int64(cnt[j])
        v = c / max(sa + size_b[j] - c, np.int64(1))  # two empty sets: 0 / 1
        val[j] = v
        flag[j] = (v >= t) if above else (v <= t)


@numba.njit(cache=True, nogil=True)
def _jaccard_above(a, b, size_a, size_b, mask, use_mask, t, above, jblock, sparse, pstart,
                   pcols):
    """(i, j, J) of the cells the mask allows whose J is >= t (``above``) or <= t, in the
    order visited (a cache block of columns at a time); nothing tile-sized is written."""
    na, nw = a.shape
    nb = b.shape[0]
    cap = 1024
    out_i = np.empty(cap, np.int64)
    out_j = np.empty(cap, np.int64)
    out_v = np.empty(cap)
    n = 0
    c0 = np.empty(jblock, np.uint64)
    c1 = np.empty(jblock, np.uint64)
    word_major = nw <= WORD_MAJOR_MAX_WORDS and not sparse
    bt = np.empty((nw, jblock) if word_major else (1, 1), np.uint64)
    val = np.empty(jblock)
    flag = np.empty(jblock, np.bool_)
    for j0 in range(0, nb, jblock):
        j1 = min(nb, j0 + jblock)
        _load_block(b, bt, word_major, j0, j1)
        for i2 in range(0, na, 2):
            two, lo, hi, lo0, hi0, lo1, hi1 = _pair_span(mask, use_mask, na, i2, j0, j1)
            if lo >= hi:
                continue
            if sparse:
                _count_rows_sparse(a, i2, two, pstart, pcols, lo, hi, nw, c0, c1)
            elif not word_major:
                _count_rows(a, i2, two, b, lo, hi, nw, c0, c1)
            elif two:
                _count_two_rows_t(a, i2, bt, lo - j0, hi - lo, nw, c0, c1)
            else:
                _count_row_t(a, i2, bt, lo - j0, hi - lo, nw, c0)
            for r in range(2 if two else 1):
                i = i2 + r
                cr, rlo, rhi = (c0, lo0, hi0) if r == 0 else (c1, lo1, hi1)
                sa = size_a[i]
                _jaccard_flags(cr[rlo - lo:rhi - lo], size_b[rlo:rhi], sa, t, above, val, flag)
                for j in range(rlo, rhi):
                    if not flag[j - rlo] or (use_mask and not mask[i, j]):
                        continue
                    if n == cap:
                        cap *= 2
                        grown_i = np.empty(cap, np.int64)
                        grown_j = np.empty(cap, np.int64)
                        grown_v = np.empty(cap)
                        grown_i[:n] = out_i[:n]
                        grown_j[:n] = out_j[:n]
                        grown_v[:n] = out_v[:n]
                        out_i, out_j, out_v = grown_i, grown_j, grown_v
                    out_i[n] = i
                    out_j[n] = j
                    out_v[n] = val[j - rlo]
                    n += 1
    return out_i[:n], out_j[:n], out_v[:n]
