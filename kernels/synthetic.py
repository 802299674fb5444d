"""The synthetic app's compare, over a whole tile: value(i, j) = (i * 7919 + j) % 1000 for a
row item of index i and a column item of index j (``apps/synthetic.py``), as a full block
(``synthetic_block``), as each row's and column's k best (``synthetic_topk``) or as the cells
past a threshold (``synthetic_threshold``), compiled with numba.

Every pair's value is computed; none is inferred from another. The arithmetic is the formula
reduced mod 1000 once per row and once per column, not once per pair:
(i * 7919 + j) % 1000 = (a_i + b_j) - 1000 [a_i + b_j >= 1000] with a_i = (i * 7919) % 1000 and
b_j = j % 1000 (exact for i, j >= 0), so a pair is an int32 add, a compare and a subtract, which
vectorise, where an int64 ``%`` per pair does not (``tests/unit/test_synthetic_kernel.py``
checks both forms against each other and against the app's ``expected``).

The top-k kernel keeps each row's (and column's) k best cells, ties to the lower index, among
the cells at least as good as the row's (column's) floor (the k-th best its item has in other
tiles): what ``engine.TopKReduction`` asks of an app's ``compare_reduced``. A chunk of a row's
values is computed and flagged branch-free against the row's and each column's threshold;
the few flagged cells are then checked exactly and pushed (``bitset_tiles._push``).
"""
from __future__ import annotations

import numba
import numpy as np

from .bitset import _readonly
from .bitset_counts import _row_span
from .bitset_tiles import _candidates, _push
from .jaccard import all_true_view

MULT, MOD = 7919, 1000
CHUNK = 256  # columns computed and flagged at a time (a multiple of 8)
_NEVER = MOD + 1  # an int threshold (on sign * value) no value reaches


def _indices(items) -> np.ndarray:
    """The item indices of a tile side: a pack's rows (2-D array, index in column 0) or a
    list of items (1-D arrays holding the index)."""
    if isinstance(items, np.ndarray) and items.ndim == 2:
        return items[:, 0].astype(np.int64)
    return np.array([x[0] for x in items], dtype=np.int64)


def _residues(li: np.ndarray, ri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if (len(li) and li.min() < 0) or (len(ri) and ri.min() < 0):
        raise ValueError("synthetic item indices are non-negative")
    return ((li * MULT) % MOD).astype(np.int32), (ri % MOD).astype(np.int32)


@numba.njit(cache=True, nogil=True)
def _block(a, b, out):
    for i in range(a.shape[0]):
        ai = a[i]
        for j in range(b.shape[0]):
            v = ai + b[j]
            out[i, j] = v - MOD if v >= MOD else v


def synthetic_block(left, right) -> np.ndarray:
    """Every pair's value of a tile: float64 (len(left), len(right))."""
    a, b = _residues(_indices(left), _indices(right))
    out = np.empty((len(a), len(b)))
    if out.size:
        _block(a, b, out)
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _int_threshold(kth, floor, sign):
    """The flag pass's threshold on ``sign * value`` (values are integers): a cell may enter
    when it is at least as good as the stricter of the k-th best so far and the floor (ties
    flagged; the exact check follows)."""
    t = kth
    if sign * (floor - t) > 0:
        t = floor
    st = sign * t
    if st <= -_NEVER:
        return np.int32(-_NEVER)
    if st >= _NEVER:
        return np.int32(_NEVER)
    return np.int32(np.ceil(st))


@numba.njit(cache=True, nogil=True)
def _topk_cells(a, b, mask, use_mask, k, sign, do_rows, do_cols, row_floor, col_floor):
    na, nb = a.shape[0], b.shape[0]
    nr = na if do_rows else 0
    nc = nb if do_cols else 0
    fsign = np.float64(sign)
    isign = np.int32(sign)
    none = -np.inf * fsign  # the k-th best before a slot holds k: worse than any value
    rj = np.empty((nr, k), np.int64)
    rv = np.empty((nr, k))
    rn = np.zeros(nr, np.int64)
    ci = np.empty((nc, k), np.int64)
    cv = np.empty((nc, k))
    cn = np.zeros(nc, np.int64)
    col_kth = np.full(nc, none)
    col_t = np.full(nb, np.int32(_NEVER), np.int32)
    for j in range(nc):
        col_t[j] = _int_threshold(none, col_floor[j], fsign)
    vals = np.empty(CHUNK, np.int32)
    flag = np.zeros(CHUNK, np.bool_)
    flag_words = flag.view(np.uint64)  # eight flags read as one word: most words are zero
    for i in range(na):
        lo, hi = _row_span(mask, use_mask, i, 0, nb)
        if lo >= hi:
            continue
        ai = a[i]
        if do_rows:
            kth, floor = none, row_floor[i]
            row_t = _int_threshold(kth, floor, fsign)
        else:
            kth, floor, row_t = none, np.inf * fsign, np.int32(_NEVER)
        for f0 in range(lo, hi, CHUNK):
            f1 = min(hi, f0 + CHUNK)
            m = f1 - f0
            bc = b[f0:f1]
            ct = col_t[f0:f1]
            for x in range(m):  # branch-free, so it vectorises: computed and flagged
                v = ai + bc[x]
                v = v - MOD if v >= MOD else v
                vals[x] = v
                flag[x] = (isign * v >= row_t) | (isign * v >= ct[x])
            for x in range(m, CHUNK):
                flag[x] = False
            for w8 in range(CHUNK // 8):
                if flag_words[w8] == 0:
                    continue
                for x in range(8 * w8, min(m, 8 * w8 + 8)):
                    if not flag[x]:
                        continue
                    j = f0 + x
                    if use_mask and not mask[i, j]:
                        continue
                    v = np.float64(vals[x])
                    if do_rows and fsign * (v - kth) > 0 and fsign * (v - floor) >= 0:
                        if _push(rj, rv, rn, i, j, v, k, sign):
                            kth = rv[i, k - 1]
                            row_t = _int_threshold(kth, floor, fsign)
                    if do_cols and fsign * (v - col_kth[j]) > 0 and \
                            fsign * (v - col_floor[j]) >= 0:
                        if _push(ci, cv, cn, j, i, v, k, sign):
                            col_kth[j] = cv[j, k - 1]
                            col_t[j] = _int_threshold(col_kth[j], col_floor[j], fsign)
    return _candidates(rj, rv, rn, ci, cv, cn)


def _mask_args(mask, shape):
    """The mask as the kernel takes it, and whether it is used: always read-only (numba
    compiles once per array type, and a read-only array is a type of its own: the spaces'
    masks are read-only, a warm-up's are not)."""
    none = _readonly(np.ones((1, 1), bool))
    if mask is None:
        return none, False
    m = np.asarray(mask, dtype=bool)
    if m.shape != shape:
        raise ValueError(f"mask has shape {m.shape}, expected {shape}")
    if all_true_view(m):  # every pair (a full block seen through one True)
        return none, False
    if not m.flags.c_contiguous:  # a large diagonal block's strided view: read in place (a
        return _readonly(m), True  # copy was 3.46 GB an actor at a leaf of 58,824 items)
    if m.all():
        return none, False
    return _readonly(m), True


def synthetic_topk(left, right, mask=None, k: int = 10, largest: bool = True,
                   rows: bool = True, cols: bool = False, row_floor=None, col_floor=None):
    """Each row's (``rows``) and column's (``cols``) k best values of a tile, ties to the
    lower index, cells where ``mask`` is False left out, cells worse than the row's
    (column's) floor left out (NaN or None: no floor): (i, j, value, is_column) arrays, the
    rows' candidates first. The same cells a full block's top-k pass keeps."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    a, b = _residues(_indices(left), _indices(right))
    if len(a) == 0 or len(b) == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), np.zeros(0), np.zeros(0, bool)
    m, use_mask = _mask_args(mask, (len(a), len(b)))
    none = -np.inf if largest else np.inf
    floors = []
    for name, fl, n in (("row_floor", row_floor, len(a)), ("col_floor", col_floor, len(b))):
        fl = np.full(n, none) if fl is None else np.ascontiguousarray(fl, dtype=np.float64)
        if fl.shape != (n,):
            raise ValueError(f"{name} has shape {fl.shape}, expected ({n},)")
        floors.append(np.where(np.isnan(fl), none, fl))
    return _topk_cells(a, b, m, use_mask, int(k), 1 if largest else -1, bool(rows),
                       bool(cols), *floors)


def synthetic_threshold(left, right, t: float, mask=None, above: bool = True):
    """The cells of a tile whose value is >= t (``above``) or <= t, mask allowing: (i, j,
    value) in row-major order."""
    vals = synthetic_block(left, right)
    keep = vals >= t if above else vals <= t
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    i, j = np.nonzero(keep)
    return i.astype(np.int64), j.astype(np.int64), vals[i, j]
