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

This module builds the sets (``kmer_bitsets``) and holds the entry points, which choose how a
tile is counted (``_count_plan``); the counting passes are in ``kernels/bitset_counts.py`` and
the compiled tile kernels in ``kernels/bitset_tiles.py``.
"""
from __future__ import annotations

import functools

import numba
import numpy as np

from .backend import is_numpy_namespace, to_numpy
from .bitset_counts import _column_block, _popcount, _postings
from .bitset_tiles import _and_popcount_jaccard, _jaccard_above, _jaccard_topk_cells
from .jaccard import all_true_view
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
    if use_mask and all_true_view(m):  # every pair (a view of one True): no mask, no copy
        use_mask, m = False, np.ones((1, 1), bool)
    # a read-only mask is read in place, whatever its strides (a large diagonal block's is a
    # view of one line of bytes, space.block_mask: a copy of it would be rows x cols bytes)
    m = m if not m.flags.writeable and m.ndim == 2 else np.ascontiguousarray(m)
    a, b, m = _readonly(a), _readonly(b), _readonly(m)
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
