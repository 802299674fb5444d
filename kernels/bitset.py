"""Exact Jaccard of many short sequences: k-mer sets as bitsets, a tile as AND + popcount.

Why a bitset
------------
For small k the k-mer universe is small: 4^k codes, 1,024 at k = 5, 16,384 at k = 7 (128 B and
2 KiB per set). A read's set is then one row of 4^k / 64 words with bit c set when code c is in
it, and |A ∩ B| is the popcount of A AND B, a fixed-length loop with no branch that the compiler
turns into one ``popcnt`` per word. A sorted-array merge of two ~100-k-mer reads costs a few
hundred mispredictable steps, so up to k = 8 (8 KiB per set) the bitset wins whenever the row is
not many times longer than the sets are large (``prefer_bitset``); past that the merge of
:mod:`kernels.jaccard` stays the kernel.

Canonical and strand-specific sets share the layout: the code of a canonical k-mer is the smaller
of its two strands' codes (:mod:`kernels.kmers`), still below 4^k.

On another array namespace (torch, cupy) the same counts are a matrix product of the unpacked
0/1 rows, which is what a GPU does fastest; counts stay below 2^24, exact in float32.
"""
from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from .backend import is_numpy_namespace, to_numpy
from .kmers import _TABLE, MAX_BITSET_K, _check_k, _joined

__all__ = ["MAX_BITSET_K", "bitset_words", "canonical_slots", "kmer_bitsets", "bitset_sizes",
           "bitset_intersections", "bitset_jaccard", "bitset_jaccard_topk",
           "bitset_jaccard_threshold", "prefer_bitset"]



def bitset_words(k: int, canonical: bool = True) -> int:
    """64-bit words of one set's row: a bit per possible code (4^k; canonical codes are about
    half of them, ``canonical_slots``), at least one word."""
    k = _check_bitset_k(k)
    return max(1, -(-(len(canonical_slots(k)[1]) if canonical else 4 ** k) // 64))


@functools.lru_cache(maxsize=None)
def canonical_slots(k: int) -> tuple[np.ndarray, np.ndarray]:
    """(slot of each code, the canonical codes): a canonical code is its own strand's or its
    reverse complement's, whichever is smaller, so only those codes occur; numbering them
    packs a canonical set into half the bits (a pair costs half the popcounts). ``slot[c]`` is
    -1 for a code that is never canonical."""
    codes = np.arange(4 ** k, dtype=np.int64)
    rc = np.zeros_like(codes)
    x = codes.copy()
    for _ in range(k):
        rc = (rc << 2) | (3 - (x & 3))
        x >>= 2
    canon = codes[codes <= rc]
    slot = np.full(4 ** k, -1, dtype=np.int64)
    slot[canon] = np.arange(len(canon))
    return slot, canon


def _check_bitset_k(k) -> int:
    k = _check_k(k)
    if k > MAX_BITSET_K:
        raise ValueError(f"the bitset kernel takes k up to {MAX_BITSET_K} (a set of 4^k bits), "
                         f"got k={k}; use the merge kernel")
    return k


def prefer_bitset(k: int, mean_kmers: float, canonical: bool = True) -> bool:
    """Is the bitset kernel the faster one for sets of about ``mean_kmers`` k-mers?

    A pair costs a bitset one AND + popcount per word of the row, which vectorise (~0.15 ns a
    word measured here on reads at k = 6-8), and a merge about two compare-and-step iterations
    per k-mer, which mispredict (~4.5 ns a k-mer): the bitset wins while its row holds up to
    ~30 words per k-mer, taken here as 16 to stay on the safe side (and k <= 8)."""
    return k <= MAX_BITSET_K and bitset_words(k, canonical) <= 16 * max(1.0, float(mean_kmers))


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


@numba.njit(cache=True, nogil=True)
def _fill_bitsets(buf, starts, ends, k, table, canonical, slot, bits):
    """Set bit ``slot[code]`` (canonical) or ``code`` of row r for every k-mer of record r
    (rows start zeroed)."""
    mask = np.uint64((1 << (2 * k)) - 1)
    shift = np.uint64(2 * (k - 1))
    two = np.uint64(2)
    three = np.uint64(3)
    six = np.uint64(6)
    low = np.uint64(63)
    one = np.uint64(1)
    for r in range(starts.shape[0]):
        fw = np.uint64(0)
        rc = np.uint64(0)
        run = 0
        for p in range(starts[r], ends[r]):
            c = table[buf[p]]
            if c > 3:
                run = 0
                continue
            cu = np.uint64(c)
            fw = ((fw << two) | cu) & mask
            rc = (rc >> two) | ((three - cu) << shift)
            run += 1
            if run >= k:
                if canonical:
                    code = np.uint64(slot[fw if fw < rc else rc])
                else:
                    code = fw
                bits[r, code >> six] |= one << (code & low)


@numba.njit(cache=True, nogil=True)
def _row_sizes(bits, out):
    for r in range(bits.shape[0]):
        s = np.uint64(0)
        for w in range(bits.shape[1]):
            s += _popcount(bits[r, w])
        out[r] = s


def kmer_bitsets(seqs, k: int, canonical: bool = True) -> np.ndarray:
    """One row per record: uint64 array of shape (len(seqs), bitset_words(k, canonical)), the
    bit of a code (its slot, for canonical k-mers: ``canonical_slots``) set when the k-mer occurs
    in the record (letters other than ACGT break windows, as in
    :func:`kernels.kmers.canonical_kmers`). A row of zeros is a record without a valid k-mer."""
    k = _check_bitset_k(k)
    buf, starts, ends = _joined(seqs)
    bits = np.zeros((len(starts), bitset_words(k, canonical)), dtype=np.uint64)
    if len(starts):
        _fill_bitsets(buf, starts, ends, k, _TABLE, bool(canonical), canonical_slots(k)[0],
                      bits)
    return bits


def bitset_sizes(bits) -> np.ndarray:
    """|set| of each row (popcount of the row), int64."""
    bits = np.ascontiguousarray(to_numpy(bits)).view(np.uint64)
    bits = bits.reshape(-1, bits.shape[-1]) if bits.ndim != 1 else bits.reshape(1, -1)
    out = np.empty(bits.shape[0], dtype=np.int64)
    _row_sizes(bits, out)
    return out


FLAG_CHUNK = 64  # columns flagged at a time in the top-k kernel (see its pass 2)
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


COUNTS = ("auto", "dense", "sparse")
# a postings step (a column read from the postings, its count incremented: a cache miss
# more often than not) costs about this many popcount words. Measured on lambda reads, 2-core
# AMD EPYC without AVX-512: ~5 ns a step against ~0.25 ns a word; at k = 6 (33 words, ~4
# steps a pair) the two counts ran level, at k = 7 (128 words, ~1 step) sparse 3x faster
SPARSE_STEP_COST = 16.0


def prefer_sparse(words: int, mean_a: float, mean_b: float) -> bool:
    """Count a tile from postings (about |A| |B| / (64 words) steps a pair) rather than by a
    popcount per word? Sparse rows win: a 109-base read holds ~100 of the 8,192 canonical
    7-mers (about 1.2 steps a pair against 128 words), but ~100 of 512 5-mers (~20 steps
    against 8 words) is dense."""
    return mean_a * mean_b / (64.0 * words) * SPARSE_STEP_COST < words


_NO_POSTINGS = (np.zeros(1, np.int64), np.zeros(0, np.int32))


def _count_plan(a, b, size_a, size_b, count: str):
    """(column block, sparse, postings start, postings columns) of a tile's counting loop:
    ``count="auto"`` chooses by ``prefer_sparse`` on the tile's mean set sizes."""
    if count not in COUNTS:
        raise ValueError(f"count must be one of {', '.join(COUNTS)}, got {count!r}")
    sparse = count == "sparse" or (count == "auto" and len(a) > 0 and len(b) > 0 and
                                   prefer_sparse(a.shape[1], float(size_a.mean()),
                                                 float(size_b.mean())))
    if sparse:  # one block: the postings cover every right row
        start, cols = _postings(b)
        return max(1, b.shape[0]), True, start, cols
    return _column_block(a.shape[1]), False, *_NO_POSTINGS


def _tile_args(lefts, rights, mask, count: str = "auto"):
    """The stacked rows, their sizes, the mask (or a dummy), whether it is used, and the
    counting plan (``_count_plan``) of a tile."""
    a, b = _stack(lefts), _stack(rights)
    if a.shape[1] != b.shape[1] and len(a) and len(b):
        raise ValueError(f"bitset rows differ in length: {a.shape[1]} and {b.shape[1]} words "
                         "(sets of different k?)")
    use_mask = mask is not None
    m = np.asarray(to_numpy(mask), dtype=bool) if use_mask else np.ones((1, 1), bool)
    if use_mask and m.shape != (a.shape[0], b.shape[0]):
        raise ValueError(f"mask has shape {m.shape}, expected {(a.shape[0], b.shape[0])}")
    a, b, m = _readonly(a), _readonly(b), _readonly(np.ascontiguousarray(m))
    size_a, size_b = bitset_sizes(a), bitset_sizes(b)
    return (a, b, size_a, size_b, m, use_mask, _count_plan(a, b, size_a, size_b, count))


def _readonly(x: np.ndarray) -> np.ndarray:
    """A read-only view of ``x`` (no copy). numba compiles a function once per argument type,
    and a read-only array is a type of its own: rows from Ray's object store and the pair
    spaces' shared masks are read-only, a warm-up's are not, so the first real tile of a
    process loaded another compilation (17-40 ms a tile kernel). Every tile's rows and mask
    go in read-only, the warm-up's too: one compilation each."""
    if not x.flags.writeable:
        return x
    view = x.view()
    view.flags.writeable = False
    return view


def bitset_jaccard_topk(lefts, rights, mask=None, k: int = 10, largest: bool = True,
                        rows: bool = True, cols: bool = False, count: str = "auto",
                        row_floor=None, col_floor=None):
    """Each row's (``rows``) and each column's (``cols``) k best Jaccard values of a tile, ties
    to the lower index, without the tile's matrices: (i, j, J, is_column) arrays, a row's
    candidates (is_column False) first, then a column's. J is bit for bit what
    :func:`bitset_jaccard` gives for the same pair; cells where ``mask`` is False are no
    candidates. ``count``: how |A ∩ B| is counted (``_count_plan``; the same counts).

    ``row_floor`` / ``col_floor`` (one J per row / column, optional): the k-th best each item
    already has elsewhere; cells worse than it are no candidates (cells equal to it are), so
    a row keeps its k best among the cells at least as good as its floor. Merged over every
    tile, the k best are the same; each tile pushes far fewer cells."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    a, b, size_a, size_b, m, use_mask, plan = _tile_args(lefts, rights, mask, count)
    if a.shape[0] == 0 or b.shape[0] == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), np.zeros(0), np.zeros(0, bool)
    use_mask = use_mask and not m.all()  # (an off-diagonal tile's mask holds every pair)
    none = -np.inf if largest else np.inf
    floors = []
    for name, fl, n in (("row_floor", row_floor, a.shape[0]), ("col_floor", col_floor,
                                                                  b.shape[0])):
        fl = np.full(n, none) if fl is None else np.ascontiguousarray(fl, dtype=np.float64)
        if fl.shape != (n,):
            raise ValueError(f"{name} has shape {fl.shape}, expected ({n},)")
        floors.append(np.where(np.isnan(fl), none, fl))
    return _jaccard_topk_cells(a, b, size_a, size_b, m, use_mask, int(k),
                               1 if largest else -1, bool(rows), bool(cols), *floors, *plan)


def bitset_jaccard_threshold(lefts, rights, t: float, mask=None, above: bool = True,
                             count: str = "auto"):
    """The pairs of a tile whose Jaccard is >= t (``above``) or <= t, without the tile's
    matrices: (i, j, J) arrays in row-major order. J is bit for bit :func:`bitset_jaccard`'s."""
    a, b, size_a, size_b, m, use_mask, plan = _tile_args(lefts, rights, mask, count)
    if a.shape[0] == 0 or b.shape[0] == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), np.zeros(0)
    i, j, v = _jaccard_above(a, b, size_a, size_b, m, use_mask, float(t), bool(above), *plan)
    order = np.lexsort((j, i))
    return i[order], j[order], v[order]


def bitset_jaccard(lefts, rights, mask=None, count: str = "auto"
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(|A ∩ B|, Jaccard) of every pair of a tile, numpy only, in one compiled pass: int64 and
    float64 arrays of shape (len(lefts), len(rights)), 0 where ``mask`` is False. J is what
    :func:`kernels.jaccard.jaccard_from_counts` gives (0 when both sets are empty)."""
    a, b, size_a, size_b, m, use_mask, plan = _tile_args(lefts, rights, mask, count)
    inter = np.zeros((a.shape[0], b.shape[0]), dtype=np.int64)
    sim = np.zeros(inter.shape, dtype=np.float64)
    if inter.size == 0:
        return inter, sim
    _and_popcount_jaccard(a, b, size_a, size_b, m, use_mask, inter, sim, plan[0], True,
                          *plan[1:])
    return inter, sim


def _stack(rows) -> np.ndarray:
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return np.ascontiguousarray(rows).view(np.uint64)
    if len(rows) == 0:
        return np.zeros((0, 1), np.uint64)
    return np.stack([np.asarray(r).view(np.uint64) for r in rows])


def bitset_intersections(lefts, rights, mask=None, xp=None, count: str = "auto") -> np.ndarray:
    """|A ∩ B| for every (i, j) of a tile as int64 numpy array (len(lefts), len(rights)).

    ``lefts``/``rights`` are bitset rows (a 2-D array, or a list of 1-D rows of one length) as
    uint64 (int64 on torch, which has no uint64). ``mask[i, j]`` False: not a pair of the space,
    not computed, left 0. On a numpy namespace the compiled count runs (AND + popcount, or from
    postings on sparse rows: ``count``, ``_count_plan``); on any other the rows are unpacked to
    0/1 and multiplied (``_intersections_xp``)."""
    if xp is not None and not is_numpy_namespace(xp):
        return _intersections_xp(xp, lefts, rights, mask)
    a, b, size_a, size_b, m, use_mask, plan = _tile_args(lefts, rights, mask, count)
    out = np.zeros((a.shape[0], b.shape[0]), dtype=np.int64)
    if out.size == 0:
        return out
    _and_popcount_jaccard(a, b, size_a, size_b, m, use_mask, out, np.zeros((1, 1)), plan[0],
                          False, *plan[1:])
    return out


def _unpack_xp(xp, rows):
    """(n, words) int64 rows -> (n, 64 * words) float32 0/1 on the rows' device."""
    shifts = xp.arange(64, dtype=rows.dtype)
    if hasattr(shifts, "to") and hasattr(rows, "device"):
        shifts = shifts.to(rows.device)
    bits = (rows[:, :, None] >> shifts[None, None, :]) & 1
    return xp.astype(xp.reshape(bits, (rows.shape[0], -1)), xp.float32)


def _intersections_xp(xp, lefts, rights, mask, chunk: int = 1024):
    """The counts as a product of unpacked rows, ``chunk`` left rows at a time (a chunk of
    k = 8 rows unpacks to 256 MB)."""
    a = lefts if hasattr(lefts, "shape") and len(lefts.shape) == 2 else xp.stack(list(lefts))
    b = rights if hasattr(rights, "shape") and len(rights.shape) == 2 else xp.stack(list(rights))
    ub = _unpack_xp(xp, b)
    parts = []
    for i0 in range(0, a.shape[0], chunk):
        ua = _unpack_xp(xp, a[i0:i0 + chunk])
        parts.append(to_numpy(xp.round(ua @ xp.matrix_transpose(ub))))
    out = (np.concatenate(parts) if parts else np.zeros((0, b.shape[0]))).astype(np.int64)
    if mask is not None:
        out[~np.asarray(to_numpy(mask), dtype=bool)] = 0
    return out
