"""Camera sensor noise (PRNU): an image's noise residual, and NCC and PCE of residual pairs.

A sensor multiplies the light each pixel gets by (1 + K) with K a fixed pattern of the sensor
(photo-response non-uniformity), so every photo of one camera carries the same faint pattern
I·K. Two photos' noise residuals correlate when one camera took both, whatever they show.

Residual (after Lukáš, Fridrich & Goljan 2006, and Goljan's reference code):
1. the image's wavelet details, denoised by the locally adaptive Wiener rule of Mihçak et al.
   (``wave_noise``: the local variance is the smallest of the 3×3 … 9×9 estimates), give the
   noise left after denoising; the wavelet is Haar (4 levels), written with slicing and
   reshapes so that it runs on any array-API namespace;
2. zero-mean rows and columns remove the linear patterns that readout and demosaicing add to
   every camera alike;
3. the same Wiener rule applied to the residual's Fourier magnitudes flattens the periodic
   peaks that JPEG's 8×8 blocks put into every image alike (Goljan's "Wiener in DFT").

On a 2-D float64 numpy array each step takes a compiled loop (``_compiled_path``) with the
array code's operations in the same order, and gives its bits (tests/unit/test_prnu.py): the
array code makes a dozen full-size temporaries a step. The transforms are scipy.fft's on numpy
(``backend.fft_of``).

Pairs: NCC is the cosine of the two centred residuals; PCE (peak-to-correlation energy) is the
squared circular cross-correlation at zero shift over the mean square of the cross-correlation
away from a small neighbourhood of that peak, with the sign of the peak. Each item keeps only
its half spectrum; a tile's NCC and PCE are matrix products over it (``ncc_pce`` says how),
with no pair's cross-correlation map ever made.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .backend import fft_of
from .lazyjit import lazy_njit

__all__ = ["haar2", "ihaar2", "wave_noise", "noise_residual", "zero_mean_rows_cols",
           "wiener_dft", "prepare", "ncc_pce", "PEAK_NEIGHBOURHOOD"]

PEAK_NEIGHBOURHOOD = 11  # the square around the peak left out of the energy (Goljan's 11×11)
WIENER_WINDOWS = (3, 5, 7, 9)
_WINDOWS = np.asarray(WIENER_WINDOWS, dtype=np.int64)  # as the compiled loop takes them


def check_spectra(left: list, right: list, width: int) -> tuple[int, int]:
    """(rows, half width) of a tile's half spectra, all of one shape, from residuals ``width``
    pixels wide and no smaller than the peak's neighbourhood; else a ValueError saying which."""
    h, half = left[0].shape
    if width // 2 + 1 != half or min(h, width) < PEAK_NEIGHBOURHOOD:
        raise ValueError(f"half spectra of {h}x{half} do not come from residuals {width} wide, or "
                         f"are smaller than the peak's {PEAK_NEIGHBOURHOOD}x"
                         f"{PEAK_NEIGHBOURHOOD} neighbourhood")
    odd = [tuple(x.shape) for x in left + right if tuple(x.shape) != (h, half)]
    if odd:
        raise ValueError(f"half spectra of {odd[0][0]}x{odd[0][1]} and {h}x{half} in one tile")
    return h, half


def _compiled_path(a) -> bool:
    """Does ``a`` take this module's compiled loops (a 2-D float64 numpy array)? They keep the
    array code's operations in the same order, without its full-size temporaries."""
    return isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 2


def haar2(xp, x):
    """One level of the orthonormal 2-D Haar transform of an even-sized image:
    (LL, (LH, HL, HH))."""
    if _compiled_path(x):
        ll, lh, hl, hh = _haar2_cpu(np.ascontiguousarray(x))  # one compiled signature
        return ll, (lh, hl, hh)
    a, b = x[0::2, 0::2], x[0::2, 1::2]
    c, d = x[1::2, 0::2], x[1::2, 1::2]
    return (a + b + c + d) / 2, ((a - b + c - d) / 2, (a + b - c - d) / 2, (a - b - c + d) / 2)


def _interleave(xp, p, q, axis: int):
    """Rows (axis 0) or columns (axis 1) of p and q taken in turn."""
    h, w = p.shape
    stacked = xp.stack([p, q], axis=axis + 1)
    return xp.reshape(stacked, (2 * h, w) if axis == 0 else (h, 2 * w))


def ihaar2(xp, ll, details):
    """Inverse of :func:`haar2`."""
    lh, hl, hh = details
    if all(_compiled_path(v) for v in (ll, lh, hl, hh)):
        return _ihaar2_cpu(*(np.ascontiguousarray(v) for v in (ll, lh, hl, hh)))
    a = (ll + lh + hl + hh) / 2
    b = (ll - lh + hl - hh) / 2
    c = (ll + lh - hl - hh) / 2
    d = (ll - lh - hl + hh) / 2
    return _interleave(xp, _interleave(xp, a, b, 1), _interleave(xp, c, d, 1), 0)


@lazy_njit(cache=True, nogil=True)
def _haar2_cpu(x):
    """:func:`haar2` of a float64 array: the four bands in one pass, the same sums in the
    same order."""
    h, w = x.shape[0] // 2, x.shape[1] // 2
    ll, lh = np.empty((h, w)), np.empty((h, w))
    hl, hh = np.empty((h, w)), np.empty((h, w))
    for i in range(h):
        for j in range(w):
            a, b = x[2 * i, 2 * j], x[2 * i, 2 * j + 1]
            c, d = x[2 * i + 1, 2 * j], x[2 * i + 1, 2 * j + 1]
            ll[i, j] = (a + b + c + d) / 2
            lh[i, j] = (a - b + c - d) / 2
            hl[i, j] = (a + b - c - d) / 2
            hh[i, j] = (a - b - c + d) / 2
    return ll, lh, hl, hh


@lazy_njit(cache=True, nogil=True)
def _ihaar2_cpu(ll, lh, hl, hh):
    """:func:`ihaar2` of float64 bands: each output pixel from the same sums, interleaved
    in place."""
    h, w = ll.shape
    out = np.empty((2 * h, 2 * w))
    for i in range(h):
        for j in range(w):
            p, q, r, t = ll[i, j], lh[i, j], hl[i, j], hh[i, j]
            out[2 * i, 2 * j] = (p + q + r + t) / 2
            out[2 * i, 2 * j + 1] = (p - q + r - t) / 2
            out[2 * i + 1, 2 * j] = (p + q - r - t) / 2
            out[2 * i + 1, 2 * j + 1] = (p - q - r + t) / 2
    return out


def _box_means(xp, x, windows: Sequence[int]):
    """Means over w×w windows centred on each pixel, zeros outside (MATLAB's filter2), one per
    w in ``windows`` in turn: differences of one integral image padded for the largest window.
    The cumulative sums, made once per window, were the residual's largest cost."""
    pad = max(windows) // 2
    h, wd = x.shape
    dev = x.device  # (every array made here on the input's device: a GPU's, not the host)
    z = xp.concat([xp.zeros((pad + 1, wd), dtype=x.dtype, device=dev), x,
                   xp.zeros((pad, wd), dtype=x.dtype, device=dev)], axis=0)
    z = xp.concat([xp.zeros((z.shape[0], pad + 1), dtype=x.dtype, device=dev), z,
                   xp.zeros((z.shape[0], pad), dtype=x.dtype, device=dev)], axis=1)
    s = xp.cumulative_sum(xp.cumulative_sum(z, axis=0), axis=1)
    for w in windows:
        r = w // 2
        hi, lo = pad + r + 1, pad - r  # the window's last row (column) and the one before it
        total = (s[hi:hi + h, hi:hi + wd] - s[lo:lo + h, hi:hi + wd]
                 - s[hi:hi + h, lo:lo + wd] + s[lo:lo + h, lo:lo + wd])
        yield total / (w * w)


def wave_noise(xp, coef, noise_var: float):
    """The noise part of ``coef`` under the locally adaptive Wiener rule: coef·σ²/(v + σ²),
    v = max(0, local mean of coef² − σ²), the smallest over the windows 3..9.

    A float64 numpy array takes a compiled loop (``_wave_noise_cpu``) with the same integral
    image and the same operations in the same order (bit for bit the same on the 512², 256²
    and 64² arrays checked when it was written): the array version makes a dozen full-size
    temporaries a call, most of a residual's time (the residual both ways, measured:
    benchmarks/RESULTS.md, "Kernel micro-benchmarks: k-mers and Jaccard")."""
    if _compiled_path(coef):
        return _wave_noise_cpu(np.ascontiguousarray(coef), float(noise_var), _WINDOWS)
    var = None
    for mean in _box_means(xp, coef * coef, WIENER_WINDOWS):
        est = xp.clip(mean - noise_var, 0, None)
        var = est if var is None else xp.minimum(var, est)
    return coef * noise_var / (var + noise_var)


@lazy_njit(cache=True, nogil=True)
def _wave_noise_cpu(coef, noise_var, windows):
    """:func:`wave_noise` of a float64 array in one pass per window, no temporaries: the
    integral image of coef² zero-padded for the largest window (cumulative sums down the
    columns, then along the rows, as ``_box_means``), each window's mean from its four
    corners, the smallest clipped estimate kept."""
    h, w = coef.shape
    pad = 0
    for win in windows:
        pad = max(pad, win // 2)
    rows, cols = h + 2 * pad + 1, w + 2 * pad + 1
    s = np.zeros((rows, cols))
    for i in range(h):
        for j in range(w):
            s[i + pad + 1, j + pad + 1] = coef[i, j] * coef[i, j]
    for i in range(1, rows):
        for j in range(cols):
            s[i, j] += s[i - 1, j]
    for i in range(rows):
        for j in range(1, cols):
            s[i, j] += s[i, j - 1]
    var = np.full((h, w), np.inf)
    for win in windows:
        r = win // 2
        area = win * win
        for i in range(h):
            hi, lo = s[i + pad + r + 1], s[i + pad - r]  # the window's last row, the one before
            best = var[i]
            for j in range(w):
                total = (hi[j + pad + r + 1] - lo[j + pad + r + 1]
                         - hi[j + pad - r] + lo[j + pad - r])
                best[j] = min(best[j], max(total / area - noise_var, 0.0))
    out = np.empty((h, w))
    for i in range(h):
        for j in range(w):
            out[i, j] = coef[i, j] * noise_var / (var[i, j] + noise_var)
    return out


def zero_mean_rows_cols(xp, x):
    x = x - xp.mean(x, axis=1, keepdims=True)
    return x - xp.mean(x, axis=0, keepdims=True)


def wiener_dft(xp, x):
    """Flatten the peaks of the residual's spectrum (periodic patterns shared by every image).

    The rule runs on the whole spectrum's magnitudes (its windows zero-padded at the edges, as
    Goljan's), but the transforms are of the real residual's half spectrum: the whole
    spectrum's real inverse, real(ifft2(S·g)), is the inverse of its Hermitian part,
    S·(g(k) + g(−k))/2, which the half spectrum holds. (The gains g are even in k when the
    rows and columns have zero mean, as a residual's do, but not for any image.) The same
    result to rounding in about a third of the transforms' time. On numpy, the steps between
    the two transforms are one compiled
    filter (``_wiener_half_cpu``)."""
    h, w = x.shape
    n = h * w
    fft = fft_of(xp)
    spectrum = fft.rfftn(x)  # (h, w // 2 + 1)
    # (numpy's complex abs, its own SIMD loop, is not numba's hypot: taken here for both paths)
    half_magnitude, noise_var = xp.abs(spectrum) / n ** 0.5, float(xp.mean(x * x))
    if _compiled_path(x):
        filtered = _wiener_half_cpu(spectrum, half_magnitude, w, noise_var, _WINDOWS)
        return fft.irfftn(filtered, s=(h, w), axes=(0, 1))
    kept = spectrum.shape[1]
    magnitude = _whole_from_half(xp, half_magnitude, w)
    filtered = wave_noise(xp, magnitude, noise_var)
    zero = magnitude == 0
    scale = xp.where(zero, xp.zeros_like(filtered),
                     filtered / xp.where(zero, xp.ones_like(magnitude), magnitude))
    symmetric = (scale + _negated(xp, scale))[:, :kept] / 2
    return fft.irfftn(spectrum * xp.astype(symmetric, spectrum.dtype), s=(h, w),
                      axes=(0, 1))


@lazy_njit(cache=True, nogil=True)
def _wiener_half_cpu(spectrum, half_magnitude, width, noise_var, windows):
    """:func:`wiener_dft`'s filtering of a half spectrum (complex128, ``width`` the residual's;
    ``half_magnitude`` its magnitudes over √n), as the array code does it, in three passes: the
    whole spectrum's magnitudes (the columns past the half mirrored from the half's negated
    frequencies), the Wiener loop on them, then each kept frequency times the mean of its gain
    and its negated frequency's."""
    h, kept = spectrum.shape
    magnitude = np.empty((h, width))
    magnitude[:, :kept] = half_magnitude
    for y in range(h):
        for x in range(kept, width):
            magnitude[y, x] = magnitude[(h - y) % h, width - x]
    filtered = _wave_noise_cpu(magnitude, noise_var, windows)
    for y in range(h):  # the gains, in place of the filtered magnitudes
        for x in range(width):
            m = magnitude[y, x]
            filtered[y, x] = 0.0 if m == 0 else filtered[y, x] / m
    out = np.empty((h, kept), dtype=np.complex128)
    for y in range(h):
        for x in range(kept):
            gain = (filtered[y, x] + filtered[(h - y) % h, (width - x) % width]) / 2
            out[y, x] = spectrum[y, x] * gain
    return out


def _negated(xp, a):
    """a at the negated frequency, a(−y mod h, −x mod w)."""
    return xp.roll(xp.flip(a, axis=(0, 1)), shift=(1, 1), axis=(0, 1))


def _whole_from_half(xp, half, width: int):
    """The whole spectrum's values from a half spectrum's of a real signal ``width`` wide,
    when they are even in the frequency (magnitudes): column x > width // 2 is column
    width − x with the rows negated, which is the half's own negation (its columns taken
    mod its width) from column kept − missing on."""
    kept = half.shape[1]
    return xp.concat([half, _negated(xp, half)[:, 2 * kept - width:]], axis=1)


def noise_residual(xp, image, sigma: float = 3.0, levels: int = 4):
    """The PRNU noise residual of a grey image (float, sides divisible by 2**levels)."""
    h, w = image.shape
    if h % (1 << levels) or w % (1 << levels):
        raise ValueError(f"image sides {h}x{w} must be divisible by {1 << levels}")
    bands = []
    ll = image
    for _ in range(levels):
        ll, details = haar2(xp, ll)
        bands.append(tuple(wave_noise(xp, d, sigma * sigma) for d in details))
    residual = xp.zeros_like(ll)
    for details in reversed(bands):
        residual = ihaar2(xp, residual, details)
    return wiener_dft(xp, zero_mean_rows_cols(xp, residual))


def prepare(xp, residual):
    """What a tile needs of one residual: the spectrum of the residual centred and scaled to
    unit norm. The residual is real, so half its spectrum is the other half's conjugate: the
    kept half (``rfftn``) is all a pair needs, half the bytes to hold, ship and stream."""
    centred = residual - xp.mean(residual)
    return fft_of(xp).rfftn(centred / xp.linalg.vector_norm(centred))


def ncc_pce(xp, left: Sequence, right: Sequence, width: int, chunk_bytes: int | None = None,
            mask=None):
    """NCC and PCE of every left item with every right one (spectra from :func:`prepare` of
    residuals ``width`` pixels wide): two (len(left), len(right)) matrices.

    No pair's cross-correlation map is made. PCE needs of it only the (2r+1)² values around
    zero shift and the sum of its squares:
    - each value is the inverse DFT at one shift, c(s) = (1/N) Re Σ_k w_k F_k e^{2πi k·s/N}
      over the half spectrum F = L·conj(R) (w_k = 2 for the columns whose conjugates it left
      out); e^{2πi k·s/N} is a product of a row and a column factor, so all shifts of all
      pairs are matrix products over the tile (``_tile_sums``);
    - the sum of squares is Σ_k w_k |L_k|²|R_k|² / N (Parseval): one real matrix product.
    NCC is the value at zero shift: the residuals are centred and of unit norm. Against an
    inverse FFT per pair this streams each item once per tile instead of once per pair.
    ``chunk_bytes`` bounds the block of left rows times column factors that each matrix
    product reads (default: ``CPU_BLOCK_BYTES`` on a CPU).

    ``mask`` (numpy booleans, len(left) x len(right); None: all): the pairs wanted. Each block
    of left items is multiplied only with the span of right items its rows want, so a tile on
    the diagonal (its upper triangle wanted) skips most of the lower one, which the engine and
    its dense sink never read; a pair outside every span comes out 0."""
    left, right = list(left), list(right)
    r = PEAK_NEIGHBOURHOOD // 2
    h, half = check_spectra(left, right, width)
    dev = getattr(left[0], "device", None)
    n, s = float(h * width), 2 * r + 1
    weight = _half_weights(width)
    col = xp.asarray((_shift_factors(width, half, r) * weight[:, None]).T.copy(),
                     device=dev)  # (s, half)
    row = xp.asarray(_shift_factors(h, h, r).T.copy(), device=dev)  # (s, h)
    if chunk_bytes is None:
        chunk_bytes = CPU_BLOCK_BYTES if _on_cpu(left[0]) else (256 << 20)
    # near: (row shift, i, column shift, j)
    near, total = _tile_sums(xp, left, right, col, row, xp.asarray(weight, device=dev),
                             chunk_bytes, mask)
    # (i, j, row shift, column shift)
    near = xp.permute_dims(xp.real(near), (1, 3, 0, 2)) / n
    peak = near[:, :, r, r]
    energy = (total / n - xp.sum(near * near, axis=(2, 3))) / (n - s * s)
    return peak, xp.sign(peak) * peak * peak / energy


# A block of left spectrum rows times the column factors, what each matrix product of
# ``_tile_sums`` reads, is kept within one core's L2: blocks that spill into the shared L3 slow
# a device down, and two devices comparing side by side slow each other
CPU_BLOCK_BYTES = 1 << 20
# spectrum rows gathered from the tile's items at a time: their products are summed over the
# row factors in one more product. The items are never stacked whole: a tile's stacked side
# passes glibc's largest mmap threshold (32 MB) and takes fresh pages every tile
FLUSH_ROWS = 32


def _wanted_span(mask, i0: int, m: int, nr: int) -> tuple[int, int]:
    """The right items [c0, c1) that left items i0 .. i0 + m - 1 want (all without a mask)."""
    if mask is None:
        return 0, nr
    cols = np.flatnonzero(mask[i0:i0 + m].any(axis=0))
    return (int(cols[0]), int(cols[-1]) + 1) if cols.size else (0, 0)


def _tile_sums(xp, left: list, right: list, col, row, weight, chunk_bytes: int, mask=None):
    """For every pair (i, j): the sums over the spectrum of row[a, y] · L_i[y, x] · col[b, x]
    · conj(R_j[y, x]) for every shift (a, b), as (s, nl, s, nr), and of
    weight[x] · |L_i[y, x]|² · |R_j[y, x]|², as (nl, nr).

    ``FLUSH_ROWS`` spectrum rows of every item at a time: for each row y, the left rows times
    every column factor (a block of ``lb`` left items, ``band`` rows at a time, at most
    ``chunk_bytes``) times the right rows is one matrix product; those of the gathered rows
    are then summed over the row factors in one more. On numpy, both land in buffers made once
    a tile, not a fresh array for each of these loops' few hundred small products. A block of
    left items is multiplied only with the right items ``mask`` wants of it
    (``_wanted_span``); the sums of the others stay 0."""
    from .backend import is_numpy_namespace
    (h, half), nl, nr, s = left[0].shape, len(left), len(right), col.shape[0]
    dev = getattr(left[0], "device", None)
    item_bytes = s * half * 16  # one left row times the column factors, complex128
    lb = max(1, min(nl, chunk_bytes // item_bytes))
    mask = None if mask is None else np.asarray(mask, dtype=bool)
    if mask is not None and not mask.all():
        # at least four blocks, so the skipped spans come near what the mask leaves out
        # (smaller blocks cost an unmasked tile more, so only here)
        lb = min(lb, -(-nl // 4))
    band = max(1, min(h, chunk_bytes // (lb * item_bytes)))
    flush = max(band, FLUSH_ROWS)
    blocks = [(i0, min(nl, i0 + lb) - i0) for i0 in range(0, nl, lb)]
    spans = [_wanted_span(mask, i0, m, nr) for i0, m in blocks]
    sums = [xp.zeros((s, m * s * (c1 - c0)), dtype=xp.complex128, device=dev)
            for (_, m), (c0, c1) in zip(blocks, spans)]
    total = xp.zeros((nl, nr), dtype=xp.float64, device=dev)
    buffered = is_numpy_namespace(xp)
    if buffered:
        a_buf = {m: np.empty((band, m, s, half), dtype=np.complex128) for _, m in blocks}
        g_buf = {(m, c1 - c0): np.empty((flush, m * s, c1 - c0), dtype=np.complex128)
                 for (_, m), (c0, c1) in zip(blocks, spans)}

    def power(spectra):
        return xp.real(spectra) ** 2 + xp.imag(spectra) ** 2
    for f0 in range(0, h, flush):
        f1 = min(h, f0 + flush)
        rows = f1 - f0
        ls = xp.stack([x[f0:f1] for x in left])  # (nl, rows, half)
        rs = xp.conj(xp.stack([x[f0:f1] for x in right]))  # (nr, rows, half)
        total += (xp.reshape(power(ls) * weight, (nl, -1))
                  @ xp.permute_dims(xp.reshape(power(rs), (nr, -1)), (1, 0)))
        rows_t = xp.permute_dims(rs, (1, 2, 0))  # (rows, half, nr): a row's right side
        by_row = xp.permute_dims(ls, (1, 0, 2))  # (rows, nl, half)
        for (i0, m), (c0, c1), acc in zip(blocks, spans, sums):
            if c1 == c0:
                continue
            lefts = by_row[:, i0:i0 + m, None, :]  # (rows, m, 1, half)
            g = _row_products(xp, lefts, col, rows_t[:, :, c0:c1], band,
                              (a_buf[m], g_buf[m, c1 - c0]) if buffered else None)
            acc += row[:, f0:f1] @ xp.reshape(g, (rows, m * s * (c1 - c0)))
    near = []
    for acc, (_, m), (c0, c1) in zip(sums, blocks, spans):
        part = xp.reshape(acc, (s, m, s, c1 - c0))
        if c1 - c0 < nr:  # the right items this block skipped: 0
            part = xp.concat([xp.zeros((s, m, s, c0), dtype=acc.dtype, device=dev), part,
                              xp.zeros((s, m, s, nr - c1), dtype=acc.dtype, device=dev)],
                             axis=3)
        near.append(part)
    return (near[0] if len(near) == 1 else xp.concat(near, axis=1)), total


def _row_products(xp, lefts, col, rows_t, band: int, buffers=None):
    """(rows, m * s, nr): for each spectrum row, its left rows (``lefts``: rows, m, 1, half)
    times every column factor, times its right rows (``rows_t``: rows, half, nr), ``band`` rows
    a matrix product; on numpy into ``buffers`` (a_buf, g_buf), made once a tile."""
    rows, m, _, half = lefts.shape
    s = col.shape[0]
    if buffers is not None:
        a_buf, g_buf = buffers
        for y0 in range(0, rows, band):
            y1 = min(rows, y0 + band)
            a = np.multiply(lefts[y0:y1], col[None, None], out=a_buf[:y1 - y0])
            np.matmul(a.reshape(y1 - y0, m * s, half), rows_t[y0:y1], out=g_buf[y0:y1])
        return g_buf[:rows]
    products = [xp.reshape(lefts[y0:y0 + band] * col[None, None, :, :], (-1, m * s, half))
                @ rows_t[y0:y0 + band] for y0 in range(0, rows, band)]
    return products[0] if len(products) == 1 else xp.concat(products, axis=0)


def _half_weights(width: int):
    """How often each kept column of a half spectrum stands in the whole one: twice, except
    column 0 and (even width) the last."""
    w = np.full(width // 2 + 1, 2.0)
    w[0] = 1.0
    if width % 2 == 0:
        w[-1] = 1.0
    return w


def _shift_factors(n_full: int, n_freq: int, r: int):
    """e^{2πi k s / n} for frequencies k < n_freq and shifts s = -r..r: (n_freq, 2r+1)."""
    k = np.arange(n_freq)[:, None]
    return np.exp(2j * np.pi * k * np.arange(-r, r + 1)[None, :] / n_full)


def _on_cpu(array) -> bool:
    """Is ``array`` in host memory (numpy, or a torch tensor on the CPU)?"""
    return str(getattr(array, "device", "cpu")) == "cpu"
