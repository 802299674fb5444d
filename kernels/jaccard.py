"""Exact Jaccard tile kernel over sorted k-mer sets.

Why a tile and why counts
-------------------------
The engine hands a kernel a whole tile (items on the left × items on the right) so that Python and
Ray overheads are paid once per tile, not once per pair.  The kernel returns only the intersection
sizes: set sizes are known from the items, and |A ∪ B| = |A| + |B| - |A ∩ B|, so Jaccard, distances
and containment are all derived on the CPU afterwards (:func:`jaccard_from_counts`).

Why a merge
-----------
Items are sorted unique arrays (:func:`kernels.kmers.canonical_kmers`), so |A ∩ B| is one linear
merge with no allocation.  The merge is branch-free (each step advances by the comparison results)
because k-mer codes are random and an if/elif merge mispredicts often.  Rule: a merge, not
``np.intersect1d(assume_unique=True)`` (concatenate + sort), which is several times slower on
genome-sized sets (measured: benchmarks/RESULTS.md, "Kernel micro-benchmarks: k-mers and
Jaccard").  When one set is much smaller than the other (a plasmid against a genome, a
read set against a reference), galloping (exponential then binary search from the last position)
costs O(s log(l/s)) instead of O(s + l); it wins from a size ratio of about 8.

On torch or another array-API namespace the same counts come from ``searchsorted`` of the smaller
set in the larger, which vectorises on a GPU.  Codes are below 2**62, so int64 holds them exactly
(torch has no usable uint64).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .backend import is_numpy_namespace, to_numpy
from .lazyjit import compiled, lazy_njit

__all__ = ["intersection_counts", "intersection_count", "jaccard_from_counts", "GALLOP_RATIO"]

# Gallop when the larger set is at least this many times the smaller (the crossover on real k-mer
# sets, subsamples of one genome against another); below it the linear merge.
GALLOP_RATIO = 8
# Sets of at most this many k-mers are counted with numpy's searchsorted while the compiled kernels
# are not loaded yet (a small run never pays numba's import and load); once loaded, always them.
SMALL_SET = 1 << 17  # = kmers.SMALL_BASES: an item small enough to scan in numpy compares in it
SMALL_TILE = 1024    # ... in a tile of at most this many pairs (more: the compiled tile loop)
# Sets longer than this on average are counted pair by pair: a Python call per pair is then small
# beside its merge, while packing a tile side into one buffer first copies every set (for
# genome-sized sets the copy costs more than the merge).
PACK_MAX_MEAN = 1 << 14


@lazy_njit(cache=True, nogil=True)
def _merge_count(a, b):
    na = a.shape[0]
    nb = b.shape[0]
    i = 0
    j = 0
    c = 0
    while i < na and j < nb:
        x = a[i]
        y = b[j]
        c += x == y
        i += x <= y
        j += y <= x
    return c


@lazy_njit(cache=True, nogil=True)
def _gallop_count(small, big):
    """|small ∩ big| by exponential search of each element of ``small`` in ``big`` from the
    previous hit position (both sorted unique)."""
    nb = big.shape[0]
    lo = 0
    c = 0
    for i in range(small.shape[0]):
        x = small[i]
        if lo >= nb:
            break
        # exponential probe: find hi with big[hi] >= x
        step = 1
        hi = lo
        while hi < nb and big[hi] < x:
            lo = hi + 1
            hi += step
            step <<= 1
        if hi > nb:
            hi = nb
        # binary search in big[lo:hi+1) for the first element >= x
        h = hi
        while lo < h:
            mid = (lo + h) >> 1
            if big[mid] < x:
                lo = mid + 1
            else:
                h = mid
        if lo < nb and big[lo] == x:
            c += 1
            lo += 1
    return c


def intersection_count(a: np.ndarray, b: np.ndarray) -> int:
    """|a ∩ b| for two sorted unique numpy arrays of the same integer dtype (one pair)."""
    if a.dtype != b.dtype:
        # numba would compare uint64 with int64 through float64 and lose low bits.
        raise TypeError(f"k-mer arrays must share a dtype, got {a.dtype} and {b.dtype}")
    na, nb = a.shape[0], b.shape[0]
    if na == 0 or nb == 0:
        return 0
    if na > nb:
        a, b, na, nb = b, a, nb, na
    if nb <= SMALL_SET and not compiled(__name__):
        idx = np.minimum(np.searchsorted(b, a), nb - 1)
        return int(np.count_nonzero(b[idx] == a))
    if nb >= GALLOP_RATIO * na:
        return int(_gallop_count(a, b))
    return int(_merge_count(a, b))


def _check_mask(mask, shape):
    if mask is None:
        return None
    m = np.asarray(to_numpy(mask), dtype=bool)
    if m.shape != shape:
        raise ValueError(f"mask has shape {m.shape}, expected {shape} (len(lefts), len(rights))")
    if all_true_view(m):  # (a full block seen through one byte: every pair, no mask)
        return None
    return m


def all_true_view(m: np.ndarray) -> bool:
    """Is ``m`` one True seen as a whole block (every stride 0, ``space.block_mask``'s full
    blocks of large tiles)? Then it is no mask at all, and never copied into one."""
    return m.ndim == 2 and m.size > 0 and m.strides == (0, 0) and bool(m.flat[0])


def _namespace_of(lefts, rights):
    """The arrays' namespace; None for numpy arrays (array_api_compat is not imported for
    them: its import costs a small run more than its compare)."""
    for x in (*lefts, *rights):
        if isinstance(x, np.ndarray):
            return None
        import array_api_compat
        return array_api_compat.array_namespace(x)
    return None


def intersection_counts(
    lefts: Sequence, rights: Sequence, mask=None, xp=None
) -> np.ndarray:
    """|A ∩ B| for every (i, j) of a tile, as an int64 numpy array of shape (len(lefts), len(rights)).

    ``lefts``/``rights`` are sorted unique k-mer arrays: uint64 numpy arrays, or int64 arrays of
    another array-API namespace (torch on CPU or CUDA).  ``mask[i, j]`` False means (i, j) is not a
    pair of the space (the lower triangle of a diagonal tile, a filtered pair): it is not computed
    and stays 0.  ``xp`` defaults to the namespace of the arrays.  Inputs are never written to
    (they may be read-only views of the Ray object store).
    """
    shape = (len(lefts), len(rights))
    m = _check_mask(mask, shape)
    out = np.zeros(shape, dtype=np.int64)
    if xp is None:
        xp = _namespace_of(lefts, rights)
    if xp is None or is_numpy_namespace(xp):
        if out.size == 0:
            return out
        lefts, rights = [np.asarray(a) for a in lefts], [np.asarray(b) for b in rights]
        if sum(map(len, lefts)) + sum(map(len, rights)) >= \
                PACK_MAX_MEAN * (len(lefts) + len(rights)):
            cells = np.nonzero(m) if m is not None else np.indices(shape).reshape(2, -1)
            for i, j in zip(*cells):
                out[i, j] = intersection_count(lefts[i], rights[j])
            return out
        lv, lo = _packed(lefts)
        rv, ro = _packed(rights)
        if lv.dtype != rv.dtype and len(lv) and len(rv):
            raise TypeError(f"k-mer arrays must share a dtype, got {lv.dtype} and {rv.dtype}")
        if len(lv) and len(rv) and out.size <= SMALL_TILE and not compiled(__name__) and \
                max(np.diff(lo).max(), np.diff(ro).max()) <= SMALL_SET:
            # a small run's few pairs: numpy, per pair, with no compiled kernel to load
            cells = np.nonzero(m) if m is not None else np.indices(shape).reshape(2, -1)
            for i, j in zip(*cells):
                out[i, j] = intersection_count(np.asarray(lefts[i]), np.asarray(rights[j]))
        elif len(lv) and len(rv):
            mm = np.ones((1, 1), bool) if m is None else np.ascontiguousarray(m)
            _tile_counts(lv, lo, rv.astype(lv.dtype, copy=False), ro, mm, m is not None, out)
        return out
    return _intersection_counts_xp(xp, lefts, rights, m, out)


def _packed(arrays):
    """Arrays of one tile side as one buffer and offsets: the tile loop then runs compiled, with
    no Python call per pair (a call per pair cost more than merging two short reads)."""
    lengths = np.fromiter((len(a) for a in arrays), dtype=np.int64, count=len(arrays))
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    dtypes = {a.dtype for a in arrays if len(a)}
    if len(dtypes) > 1:
        raise TypeError(f"k-mer arrays must share a dtype, got {sorted(map(str, dtypes))}")
    values = np.concatenate(arrays) if arrays else np.zeros(0, np.uint64)
    if values.dtype == object or values.dtype.kind not in "iu":
        values = values.astype(np.uint64)
    return values, offsets


@lazy_njit(cache=True, nogil=True)
def _tile_counts(lv, lo, rv, ro, mask, use_mask, out):
    for i in range(lo.shape[0] - 1):
        a = lv[lo[i]:lo[i + 1]]
        for j in range(ro.shape[0] - 1):
            if use_mask and not mask[i, j]:
                continue
            b = rv[ro[j]:ro[j + 1]]
            na = a.shape[0]
            nb = b.shape[0]
            if na == 0 or nb == 0:
                continue
            if na <= nb:
                out[i, j] = _gallop_count(a, b) if nb >= GALLOP_RATIO * na else _merge_count(a, b)
            else:
                out[i, j] = _gallop_count(b, a) if na >= GALLOP_RATIO * nb else _merge_count(b, a)


def _count_xp(xp, a, b):
    """0-d array |a ∩ b| on ``xp``'s device: searchsorted of the smaller set in the larger."""
    if a.shape[0] > b.shape[0]:
        a, b = b, a
    idx = xp.searchsorted(b, a)
    idx = xp.clip(idx, 0, b.shape[0] - 1)  # positions past the end cannot match; clip then compare
    return xp.sum(xp.astype(xp.take(b, idx) == a, xp.int64))


def _intersection_counts_xp(xp, lefts, rights, m, out):
    # Keep per-pair results on the device and bring them back once: a host sync per pair would
    # dominate on a GPU.
    where, vals = [], []
    for i, a in enumerate(lefts):
        for j, b in enumerate(rights):
            if m is not None and not m[i, j]:
                continue
            if a.shape[0] == 0 or b.shape[0] == 0:
                continue
            where.append((i, j))
            vals.append(_count_xp(xp, a, b))
    if vals:
        got = to_numpy(xp.stack(vals)).astype(np.int64, copy=False)
        ii, jj = np.array(where).T
        out[ii, jj] = got
    return out


def jaccard_from_counts(inter, size_left, size_right) -> np.ndarray:
    """Jaccard index J = |A∩B| / (|A| + |B| - |A∩B|) as float64; distance is ``1 - J``.

    For a tile, pass ``inter`` of shape (n, m) with 1-D sizes of length n and m (outer form);
    otherwise the three arguments broadcast elementwise (e.g. per-pair vectors).

    J is defined as 0 where the union is empty (both sets empty).  The alternative, 1, would make
    two empty items a perfect match of each other, which is never what a genome comparison means;
    the engine rejects empty items before any compute, so this only guards the arithmetic.
    """
    inter = np.asarray(to_numpy(inter), dtype=np.float64)
    sl = np.asarray(to_numpy(size_left), dtype=np.float64)
    sr = np.asarray(to_numpy(size_right), dtype=np.float64)
    if inter.ndim == 2 and sl.ndim == 1 and sr.ndim == 1:
        sl = sl[:, None]
        sr = sr[None, :]
    union = sl + sr - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        j = np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)
    return j
