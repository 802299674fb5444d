"""How the bitset tile kernels (``kernels/bitset_tiles.py``) count |A ∩ B|: a left row, or
two, against a block of right rows.

Three ways, chosen per tile by ``kernels.bitset._count_plan``: row-major AND + popcount, two
left rows against two right rows at a time (``_count_rows``); word-major on short rows, the
block copied so that the loop over columns vectorises (``_count_two_rows_t``,
``_count_row_t``); and from the right rows' postings on sparse rows (``_postings``,
``_count_rows_sparse``). Beside them: the block of right rows that stays in cache
(``_column_block``) and the columns of a row the mask allows (``_row_span``, ``_pair_span``).
"""
from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic


@intrinsic
def _popcount(typingctx, x):
    """LLVM's ctpop on a uint64: one ``popcnt`` instruction where the CPU has it."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@intrinsic
def _ctz(typingctx, x):
    """LLVM's cttz on a uint64 (x != 0): the index of its lowest set bit, one ``tzcnt``."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], context.get_constant(types.boolean, True))

    return sig, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _and_count(a, i, b, j, nw):
    """|A ∩ B| of row i of ``a`` and row j of ``b`` (inlined by numba: no call)."""
    s = np.uint64(0)
    for w in range(nw):
        s += _popcount(a[i, w] & b[j, w])
    return s


@numba.njit(cache=True, nogil=True)
def _count_rows(a, i, two, b, lo, hi, nw, c0, c1):
    """|A ∩ B| of row i of ``a`` (and of row i + 1 when ``two``) against rows lo..hi-1 of
    ``b``, into ``c0[j - lo]`` (and ``c1[j - lo]``): the counting loop of every tile kernel.

    Two left rows against two right rows at a time: each word loaded serves two pairs, which
    measured 1.6x faster than one pair at a time on 128-word rows (k = 7), where a pair is
    bound by loading its words, and no slower on 8-word rows."""
    j = lo
    if two:
        while j + 2 <= hi:
            s00 = np.uint64(0)
            s01 = np.uint64(0)
            s10 = np.uint64(0)
            s11 = np.uint64(0)
            for w in range(nw):
                x0 = a[i, w]
                x1 = a[i + 1, w]
                y0 = b[j, w]
                y1 = b[j + 1, w]
                s00 += _popcount(x0 & y0)
                s01 += _popcount(x0 & y1)
                s10 += _popcount(x1 & y0)
                s11 += _popcount(x1 & y1)
            c0[j - lo] = s00
            c0[j + 1 - lo] = s01
            c1[j - lo] = s10
            c1[j + 1 - lo] = s11
            j += 2
        if j < hi:
            c0[j - lo] = _and_count(a, i, b, j, nw)
            c1[j - lo] = _and_count(a, i + 1, b, j, nw)
        return
    while j + 2 <= hi:
        s0 = np.uint64(0)
        s1 = np.uint64(0)
        for w in range(nw):
            x = a[i, w]
            s0 += _popcount(x & b[j, w])
            s1 += _popcount(x & b[j + 1, w])
        c0[j - lo] = s0
        c0[j + 1 - lo] = s1
        j += 2
    if j < hi:
        c0[j - lo] = _and_count(a, i, b, j, nw)


@numba.njit(cache=True, nogil=True)
def _count_two_rows_t(a, i, bt, off, m, nw, c0, c1):
    """Rows i and i + 1 of ``a`` against columns off..off+m-1 of a block stored word-major
    (``bt[w, j]`` is word w of the block's right row j), into ``c0[:m]`` and ``c1[:m]``: the
    loop over columns is innermost and contiguous, so it vectorises across columns, no sum
    across a vector per pair. On rows of a few words (k = 5: 8) that measured 1.5x faster than
    summing each pair's words; on long rows the word-wise sums win."""
    for j in range(m):
        c0[j] = 0
        c1[j] = 0
    for w in range(nw):
        x0 = a[i, w]
        x1 = a[i + 1, w]
        row = bt[w, off:off + m]  # (indexing bt[w, off + j] instead measured 3x slower)
        for j in range(m):
            y = row[j]
            c0[j] += _popcount(x0 & y)
            c1[j] += _popcount(x1 & y)


@numba.njit(cache=True, nogil=True)
def _count_row_t(a, i, bt, off, m, nw, c0):
    """``_count_two_rows_t`` for one row."""
    for j in range(m):
        c0[j] = 0
    for w in range(nw):
        x0 = a[i, w]
        row = bt[w, off:off + m]
        for j in range(m):
            c0[j] += _popcount(x0 & row[j])


@numba.njit(cache=True, nogil=True)
def _postings(b):
    """For every bit x of the rows of ``b``, the rows holding it, ascending:
    ``cols[start[x]:start[x + 1]]`` (CSR). Built once per tile for the sparse count."""
    nb, nw = b.shape
    nbits = 64 * nw
    start = np.zeros(nbits + 1, np.int64)
    for j in range(nb):
        for w in range(nw):
            x = b[j, w]
            while x:
                start[w * 64 + np.int64(_ctz(x)) + 1] += 1
                x &= x - np.uint64(1)
    for x in range(nbits):
        start[x + 1] += start[x]
    cols = np.empty(start[nbits], np.int32)
    pos = start[:nbits].copy()
    for j in range(nb):
        for w in range(nw):
            x = b[j, w]
            while x:
                bit = w * 64 + np.int64(_ctz(x))
                cols[pos[bit]] = j
                pos[bit] += 1
                x &= x - np.uint64(1)
    return start, cols


@numba.njit(cache=True, nogil=True)
def _add_row_hits(a, i, start, cols, lo, hi, nw, c):
    """c[j - lo] += 1 for every bit of row i of ``a`` that column j in [lo, hi) holds."""
    for w in range(nw):
        x = a[i, w]
        while x:
            bit = w * 64 + np.int64(_ctz(x))
            x &= x - np.uint64(1)
            for p in range(start[bit], start[bit + 1]):
                j = cols[p]
                if j >= hi:
                    break
                if j >= lo:
                    c[j - lo] += np.uint64(1)


@numba.njit(cache=True, nogil=True)
def _count_rows_sparse(a, i, two, start, cols, lo, hi, nw, c0, c1):
    """``_count_rows`` from the right rows' postings (``_postings``): each set bit of a left
    row adds one to the columns holding it. On sparse rows (a read's ~100 k-mers among
    8,192 canonical 7-mers) that is about |A| |B| / 4^k steps a pair, not a popcount per word."""
    for t in range(hi - lo):
        c0[t] = 0
    _add_row_hits(a, i, start, cols, lo, hi, nw, c0)
    if two:
        for t in range(hi - lo):
            c1[t] = 0
        _add_row_hits(a, i + 1, start, cols, lo, hi, nw, c1)


@numba.njit(cache=True, nogil=True)
def _load_block(b, bt, word_major, j0, j1):
    """Copy right rows j0..j1-1 into ``bt`` word-major (when the counts use that layout)."""
    if word_major:
        for j in range(j0, j1):
            for w in range(b.shape[1]):
                bt[w, j - j0] = b[j, w]


@numba.njit(cache=True, nogil=True)
def _row_span(mask, use_mask, i, lo, hi):
    """The columns [lo, hi) of row i the mask can allow (its first and last allowed)."""
    if use_mask:
        while lo < hi and not mask[i, lo]:
            lo += 1
        while hi > lo and not mask[i, hi - 1]:
            hi -= 1
    return lo, hi


_BLOCK_BYTES = 1 << 17  # a block of right rows this large stays in the L2 cache
WORD_MAJOR_MAX_WORDS = 16  # rows up to this long are counted word-major (_count_rows_t)
_WORD_MAJOR_BYTES = 1 << 16  # its copy of a block of right rows, at most this large


def _column_block(nw: int) -> int:
    """Right rows per block for rows of ``nw`` words."""
    size = _WORD_MAJOR_BYTES if nw <= WORD_MAJOR_MAX_WORDS else _BLOCK_BYTES
    return max(1, size // (8 * nw))


@numba.njit(cache=True, nogil=True)
def _pair_span(mask, use_mask, na, i, j0, j1):
    """Rows i and i + 1 of the column block [j0, j1): (two: row i + 1 exists and has columns
    the mask allows, the columns either row may use, each row's own)."""
    lo0, hi0 = _row_span(mask, use_mask, i, j0, j1)
    lo1, hi1 = j0, j0
    if i + 1 < na:
        lo1, hi1 = _row_span(mask, use_mask, i + 1, j0, j1)
    two = lo1 < hi1
    if lo0 >= hi0:
        return two, lo1, hi1, lo0, hi0, lo1, hi1
    if not two:
        return two, lo0, hi0, lo0, hi0, lo1, hi1
    return two, min(lo0, lo1), max(hi0, hi1), lo0, hi0, lo1, hi1
