"""NCC and PCE of residual pairs from their whole cross-correlation maps, a batch of pairs per
inverse FFT: the GPU form of :func:`kernels.prnu.ncc_pce`.

Why a second form
-----------------
:func:`kernels.prnu.ncc_pce` never makes a pair's map: the (2r+1)² values near zero shift are
matrix products over the tile's half spectra, about (2r+1)² · h · (w/2 + 1) complex
multiply-adds a pair (121 · 512 · 257 ≈ 16 M at 512², r = 5), which on a CPU core beats an
inverse FFT per pair because each item is streamed once per tile. A GPU does batched FFTs at
close to its memory bandwidth: a pair's map is about 5 · N log₂ N flops (N = h·w: ≈ 24 M at
512², but in one streaming pass of ~6 N bytes), against the product form's 16 M complex MACs at
the matrix units' float64 rate. Which wins on a given GPU is measured (scripts/gpu_check.py);
both give the same numbers.

Per pair, with L and R the half spectra of two centred unit-norm residuals (``prnu.prepare``),
the map c = irfft2(L · conj(R)) is the circular cross-correlation (irfft's 1/N included), so
NCC = c(0) and PCE = sign(c(0)) c(0)² / mean of c² outside the (2r+1)² square around zero shift.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .backend import fft_of, is_numpy_namespace
from .prnu import PEAK_NEIGHBOURHOOD, check_spectra

__all__ = ["ncc_pce_fft"]

DEFAULT_BATCH_BYTES = 1 << 30  # the maps and products of one batch of pairs, at most


def _near_index(n: int, r: int) -> list[int]:
    """Indices of shifts −r..r along an axis of length n (negative shifts wrap)."""
    return [s % n for s in range(-r, r + 1)]


def ncc_pce_fft(xp, left: Sequence, right: Sequence, width: int, mask=None,
                batch_bytes: int = DEFAULT_BATCH_BYTES):
    """NCC and PCE of every left item with every right one (half spectra from
    :func:`kernels.prnu.prepare` of residuals ``width`` pixels wide), as two (len(left),
    len(right)) arrays on their device: each pair's whole cross-correlation map by one inverse
    real FFT, a block of left items against all right items per batch (at most ``batch_bytes``
    of maps and products). ``mask`` (numpy booleans; None: all): a left item that wants none of
    the right items is skipped (its row stays 0); the pairs of a computed row are all computed.
    The maps are of the spectra's precision (complex128 -> float64, complex64 -> float32)."""
    left, right = list(left), list(right)
    h, half = check_spectra(left, right, width)
    r = PEAK_NEIGHBOURHOOD // 2
    nl, nr = len(left), len(right)
    dev = getattr(left[0], "device", None)
    fft = fft_of(xp)
    n, s = float(h * width), 2 * r + 1
    wanted = np.ones(nl, bool) if mask is None else np.asarray(mask, bool).any(axis=1)
    real_bytes = 4 if "64" in str(left[0].dtype) and "128" not in str(left[0].dtype) else 8
    per_pair = h * width * real_bytes * 2 + h * half * real_bytes * 4  # map, its square, product
    lb = max(1, min(nl, batch_bytes // max(1, per_pair * nr)))
    rows_near, cols_near = _near_index(h, r), _near_index(width, r)
    rs = xp.conj(xp.stack(right))[None]  # (1, nr, h, half)
    ncc_rows, pce_rows = [], []
    zeros = None
    for i0 in range(0, nl, lb):
        i1 = min(nl, i0 + lb)
        todo = [i for i in range(i0, i1) if wanted[i]]
        if not todo:
            if zeros is None:
                zeros = xp.zeros((1, nr), dtype=xp.float64, device=dev)
            ncc_rows += [zeros] * (i1 - i0)
            pce_rows += [zeros] * (i1 - i0)
            continue
        ls = xp.stack([left[i] for i in range(i0, i1)])[:, None]  # (m, 1, h, half)
        maps = fft.irfftn(ls * rs, s=(h, width), axes=(-2, -1))   # (m, nr, h, width)
        peak = maps[:, :, 0, 0]
        near = xp.take(xp.take(maps, xp.asarray(rows_near, device=dev), axis=2),
                       xp.asarray(cols_near, device=dev), axis=3)
        energy = (xp.sum(maps * maps, axis=(2, 3)) - xp.sum(near * near, axis=(2, 3))) \
            / (n - s * s)
        pce = xp.sign(peak) * peak * peak / energy
        keep = xp.asarray(np.asarray(wanted[i0:i1], dtype=np.float64)[:, None], device=dev)
        ncc_rows.append(xp.astype(peak, xp.float64) * keep)
        pce_rows.append(xp.astype(pce, xp.float64) * keep)
    ncc = xp.concat(ncc_rows, axis=0)
    pce = xp.concat(pce_rows, axis=0)
    if is_numpy_namespace(xp):
        ncc, pce = np.asarray(ncc), np.asarray(pce)
    return ncc, pce
