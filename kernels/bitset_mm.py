"""Exact Jaccard of bitset rows as a matrix product: the tensor-core form of :mod:`kernels.bitset`.

Why a product
-------------
On a CPU a pair costs one AND + popcount per 64-bit word (:mod:`kernels.bitset`). On a GPU that
is integer-ALU work, while its matrix units run int8 products at about 2 POP/s (H200) and bf16
at about 0.8 PFLOP/s: |A ∩ B| is the dot product of the two rows unpacked to 0/1, so a tile's
counts are one product of the unpacked rows. Unpacking costs 8 bits a bit, once per item and
not per pair. On torch the product is ``torch._int_mm`` (int8 in, int32 out: exact); on any other
namespace, or where ``_int_mm`` refuses its shapes, a float32 product (exact while a count is
below 2^24, and one is at most the 4^k bits of a row).

Top-k without the matrix
------------------------
``jaccard_topk_mm`` gives each row's k best Jaccard values among all other rows (the TopK sink's
answer for a symmetric space, both sides of the triangle merged), ties to the lower index as
:func:`kernels.bitset.bitset_jaccard_topk`, a block of rows at a time, so no n x n matrix is
ever held. J = c / u with u at most the row's bits U, so two different values differ by at least
1 / U²; ``key = floor(c · S / u)`` with S = 2U² is then an exact, order-keeping integer for J
(integer division, no rounding), and ``key · n + (n − 1 − j)`` orders by J, then by the lower
j: one ``topk`` of integers per block, the same choice as the CPU kernel bit for bit. Counts of the
chosen pairs come back with them, so J is recomputed on the host in float64 exactly as the CPU
kernel computes it.
"""
from __future__ import annotations

import numpy as np

from .backend import is_numpy_namespace, to_numpy

__all__ = ["unpack_bits", "intersections_mm", "jaccard_topk_mm", "product_form"]


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def unpack_bits(xp, rows, dtype=None):
    """(n, words) rows of 64-bit words (uint64; int64 on torch) -> (n, 64 * words) 0/1 of
    ``dtype`` (default int8) on the rows' device: column 64·w + b is bit b of word w."""
    dtype = xp.int8 if dtype is None else dtype
    shifts = xp.arange(64, dtype=rows.dtype)
    if _is_torch(rows):
        shifts = shifts.to(rows.device)
    elif not is_numpy_namespace(xp) and hasattr(rows, "device"):
        shifts = xp.asarray(shifts, device=rows.device)
    one = xp.asarray(1, dtype=rows.dtype)
    bits = (rows[:, :, None] >> shifts[None, None, :]) & one
    return xp.astype(xp.reshape(bits, (rows.shape[0], -1)), dtype)


def _pad_to(x, rows: int, xp):
    """``x`` with zero rows appended up to ``rows``."""
    if x.shape[0] >= rows:
        return x
    pad = xp.zeros((rows - x.shape[0], x.shape[1]), dtype=x.dtype)
    if _is_torch(x):
        pad = pad.to(x.device)
    return xp.concat([x, pad], axis=0)


def product_form(xp, sample) -> str:
    """Which product ``intersections_mm`` uses for unpacked rows like ``sample``: ``int8`` (torch's
    ``_int_mm``, int32 sums) or ``float32``."""
    if _is_torch(sample):
        import torch
        if hasattr(torch, "_int_mm"):
            return "int8"
    return "float32"


def intersections_mm(xp, ua, ub, form: str | None = None):
    """|A ∩ B| for every row of ``ua`` against every row of ``ub`` (unpacked int8 0/1 rows,
    ``unpack_bits``): an int32 (len(ua), len(ub)) array on their device.

    ``form`` (``product_form``'s default): ``int8``, torch's int8 product with int32 sums (its
    CUDA kernel wants more than 16 rows and sides a multiple of 8: rows are padded with zeros,
    which count nothing); ``float32``: a float product, exact below 2^24."""
    form = form or product_form(xp, ua)
    if form == "int8":
        import torch
        m, n = ua.shape[0], ub.shape[0]
        a = _pad_to(ua, max(32, -(-m // 8) * 8), xp)
        b = _pad_to(ub, max(8, -(-n // 8) * 8), xp)
        return torch._int_mm(a, b.t().contiguous())[:m, :n]
    fa, fb = xp.astype(ua, xp.float32), xp.astype(ub, xp.float32)
    return xp.astype(xp.round(fa @ xp.matrix_transpose(fb)), xp.int32)


def _topk_rows(xp, key, k: int):
    """Positions of each row's k largest keys, largest first (keys of a row are distinct)."""
    if _is_torch(key):
        return key.topk(k, dim=1, largest=True, sorted=True).indices
    mod = np if is_numpy_namespace(xp) else __import__(type(key).__module__.split(".")[0])
    part = mod.argpartition(-key, k - 1, axis=1)[:, :k]
    chosen = mod.take_along_axis(key, part, axis=1)
    return mod.take_along_axis(part, mod.argsort(-chosen, axis=1), axis=1)


def jaccard_topk_mm(xp, rows, k: int = 10, block_rows: int | None = None,
                    block_bytes: int = 1 << 30, form: str | None = None):
    """Each row's ``k`` best Jaccard values against every other row of ``rows`` (packed bitset
    rows on ``xp``'s device), ties to the lower index: (j, count) numpy int64 arrays of shape
    (n, min(k, n − 1)), best first; J of (i, j[i, t]) is count / (|A_i| + |A_j| − count), 0 for
    two empty sets (``bitset_sizes``). Rows are taken ``block_rows`` at a time (default: as many
    as fit ``block_bytes`` of per-pair temporaries, about 24 bytes a pair)."""
    n = rows.shape[0]
    k = min(int(k), n - 1)
    if k < 1:
        z = np.zeros((n, 0), np.int64)
        return z, z.copy()
    u = unpack_bits(xp, rows)
    bits = u.shape[1]
    scale = 2 * bits * bits  # S = 2U²: distinct J are >= 2 apart after scaling
    wide = xp.int64 if bits * scale >= 2**31 else xp.int32  # c·S must not overflow
    sizes = xp.astype(xp.sum(xp.astype(u, xp.int32), axis=1), wide)
    form = form or product_form(xp, u)
    block = block_rows or max(1, min(n, block_bytes // max(1, 24 * n)))
    cols = xp.arange(n, dtype=xp.int64)
    if _is_torch(u):
        cols = cols.to(u.device)
    out_j, out_c = [], []
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        c = xp.astype(intersections_mm(xp, u[r0:r1], u, form), wide)
        union = sizes[r0:r1, None] + sizes[None, :] - c
        union = xp.where(union > 0, union, xp.ones_like(union))
        key = xp.astype((c * scale) // union, xp.int64) * n + (n - 1 - cols)[None, :]
        here = xp.arange(r1 - r0, dtype=xp.int64)
        if _is_torch(u):
            here = here.to(u.device)
        key[here, here + r0] = -1  # a row is no candidate of itself
        pos = _topk_rows(xp, key, k)
        out_j.append(to_numpy(pos).astype(np.int64))
        if _is_torch(c):
            out_c.append(to_numpy(c.gather(1, pos)).astype(np.int64))
        else:
            out_c.append(np.take_along_axis(to_numpy(c), to_numpy(pos), axis=1).astype(np.int64))
    return np.concatenate(out_j), np.concatenate(out_c)
