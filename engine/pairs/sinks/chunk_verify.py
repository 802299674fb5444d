"""A dense result's tiles checked against their journaled CRCs from its chunks, as arrays.

A finished run reopened (a resume that repairs) verifies every tile from the array: one read
of its region (and of the mirrored region, for a symmetric space's tile off the diagonal) and a
CRC32 each, ~20 us a tile in Python, most of a minute at 10^6 tiles. Here each chunk is read
once per pass, the regions of one shape inside it are gathered as one (tiles, rows, cols)
array and their CRCs computed a byte column at a time (``tile_log._crcs``): the first pass the
regions' CRCs, the second chains the mirrored regions' onto them, as ``DenseMatrix.verify``
does. A region that is not inside one chunk (a tile larger than a chunk) is left to
``verify``, one by one; a chunk that no longer decodes fails the tiles it holds.
"""
from __future__ import annotations

import numpy as np

from .tile_log import _crcs

UNDECIDED, FAILED = -1, -2


def region_crcs(arr, regions: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """For each region (r0, r1, c0, c1) of the 2-d array ``arr`` (zarr or numpy, with
    ``chunks`` or one chunk), the CRC32 of its values in C order continued from its seed;
    ``UNDECIDED`` for a region across chunks, ``FAILED`` where its chunk does not decode."""
    m = len(regions)
    out = np.full(m, UNDECIDED, np.int64)
    if not m:
        return out
    rows, cols = getattr(arr, "chunks", None) or arr.shape
    n_rows, n_cols = arr.shape
    r0, r1, c0, c1 = (regions[:, k].astype(np.int64) for k in range(4))
    h, w = r1 - r0, c1 - c0
    empty = (h <= 0) | (w <= 0)
    out[empty] = seeds[empty]  # the CRC of no bytes is its seed
    ci, cj = r0 // rows, c0 // cols
    inside = ~empty & ((r1 - 1) // rows == ci) & ((c1 - 1) // cols == cj) & (r0 >= 0) & \
        (c0 >= 0) & (r1 <= n_rows) & (c1 <= n_cols)
    idx = np.flatnonzero(inside)
    if not len(idx):
        return out
    n_cj = -(-n_cols // cols)
    chunk = ci[idx] * n_cj + cj[idx]
    order = np.lexsort((w[idx], h[idx], chunk))
    idx, chunk = idx[order], chunk[order]
    cuts = np.r_[np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]]), len(idx)]
    itemsize = np.dtype(arr.dtype).itemsize
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        i, j = divmod(int(chunk[lo]), n_cj)
        mine = idx[lo:hi]
        try:
            block = np.asarray(arr[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols])
        except Exception:  # a chunk that no longer decodes is as corrupt as a wrong one
            out[mine] = FAILED
            continue
        shape = np.stack([h[mine], w[mine]], axis=1)
        cut = np.r_[np.flatnonzero(np.r_[True, np.any(shape[1:] != shape[:-1], axis=1)]),
                    len(mine)]
        for a, b in zip(cut[:-1].tolist(), cut[1:].tolist()):
            e = mine[a:b]
            hh, ww = int(h[e[0]]), int(w[e[0]])
            rr = (r0[e] - i * rows)[:, None, None] + np.arange(hh)[None, :, None]
            cc = (c0[e] - j * cols)[:, None, None] + np.arange(ww)[None, None, :]
            values = np.ascontiguousarray(block[rr, cc])
            out[e] = _crcs(values.tobytes(), hh * ww * itemsize, seeds[e])
    return out


def tile_crcs(arr, regions: np.ndarray, mirrored: np.ndarray) -> np.ndarray:
    """The CRC a journal names for each tile's region (its values' CRC32, chained with the
    mirrored region's where ``mirrored``), ``UNDECIDED`` or ``FAILED`` as ``region_crcs``."""
    crc = region_crcs(arr, regions, np.zeros(len(regions), np.int64))
    again = np.flatnonzero(mirrored & (crc >= 0))
    if len(again):
        flipped = regions[again][:, [2, 3, 0, 1]]
        crc[again] = region_crcs(arr, flipped, crc[again])
    return crc
