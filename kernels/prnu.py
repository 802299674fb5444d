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

Pairs: NCC is the cosine of the two centred residuals; PCE (peak-to-correlation energy) is the
squared circular cross-correlation at zero shift over the mean square of the cross-correlation
away from a small neighbourhood of that peak, with the sign of the peak. NCC is one matrix
product for a whole tile; PCE one inverse FFT of the product of spectra kept with each item, a
pair at a time on the CPU (a tile's batch is hundreds of MB of temporaries) and batched on a
GPU (one launch per pair would dominate there).
"""
from __future__ import annotations

from typing import Sequence

__all__ = ["haar2", "ihaar2", "wave_noise", "noise_residual", "zero_mean_rows_cols",
           "wiener_dft", "prepare", "ncc_matrix", "pce_matrix", "PEAK_NEIGHBOURHOOD"]

PEAK_NEIGHBOURHOOD = 11  # the square around the peak left out of the energy (Goljan's 11×11)
WIENER_WINDOWS = (3, 5, 7, 9)


def haar2(xp, x):
    """One level of the orthonormal 2-D Haar transform of an even-sized image:
    (LL, (LH, HL, HH))."""
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
    a = (ll + lh + hl + hh) / 2
    b = (ll - lh + hl - hh) / 2
    c = (ll + lh - hl - hh) / 2
    d = (ll - lh - hl + hh) / 2
    return _interleave(xp, _interleave(xp, a, b, 1), _interleave(xp, c, d, 1), 0)


def _box_mean(xp, x, w: int):
    """Mean over a w×w window centred on each pixel, zeros outside (MATLAB's filter2), by
    cumulative sums: cost independent of w."""
    r = w // 2
    h, wd = x.shape
    z = xp.concat([xp.zeros((r + 1, wd), dtype=x.dtype), x, xp.zeros((r, wd), dtype=x.dtype)],
                  axis=0)
    z = xp.concat([xp.zeros((z.shape[0], r + 1), dtype=x.dtype), z,
                   xp.zeros((z.shape[0], r), dtype=x.dtype)], axis=1)
    s = xp.cumulative_sum(xp.cumulative_sum(z, axis=0), axis=1)
    total = s[w:, w:] - s[:-w, w:] - s[w:, :-w] + s[:-w, :-w]
    return total / (w * w)


def wave_noise(xp, coef, noise_var: float):
    """The noise part of ``coef`` under the locally adaptive Wiener rule: coef·σ²/(v + σ²),
    v = max(0, local mean of coef² − σ²), the smallest over the windows 3..9."""
    square = coef * coef
    var = None
    for w in WIENER_WINDOWS:
        est = xp.clip(_box_mean(xp, square, w) - noise_var, 0, None)
        var = est if var is None else xp.minimum(var, est)
    return coef * noise_var / (var + noise_var)


def zero_mean_rows_cols(xp, x):
    x = x - xp.mean(x, axis=1, keepdims=True)
    return x - xp.mean(x, axis=0, keepdims=True)


def wiener_dft(xp, x):
    """Flatten the peaks of the residual's spectrum (periodic patterns shared by every image)."""
    n = x.shape[0] * x.shape[1]
    spectrum = xp.fft.fft2(x)
    magnitude = xp.abs(spectrum) / n ** 0.5
    kept = wave_noise(xp, magnitude, float(xp.mean(x * x)))
    zero = magnitude == 0
    scale = xp.where(zero, xp.zeros_like(kept), kept / xp.where(zero, xp.ones_like(magnitude),
                                                                 magnitude))
    return xp.real(xp.fft.ifft2(spectrum * xp.astype(scale, spectrum.dtype)))


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
    """What a tile needs of one residual: centred and scaled to unit norm (NCC is then a dot
    product), and its spectrum (PCE is then one product and one inverse FFT per pair). The
    residual is real, so half its spectrum is the other half's conjugate: the kept half
    (``rfftn``) is half the bytes to hold, ship and stream through every pair."""
    centred = residual - xp.mean(residual)
    unit = centred / xp.linalg.vector_norm(centred)
    return unit, xp.fft.rfftn(unit)


def ncc_matrix(xp, left: Sequence, right: Sequence):
    """NCC of every left residual with every right one (items from :func:`prepare`)."""
    a = xp.stack([xp.reshape(u, (-1,)) for u, _ in left])
    b = xp.stack([xp.reshape(u, (-1,)) for u, _ in right])
    return a @ b.T


def pce_matrix(xp, left: Sequence, right: Sequence, pairs, batch: int | None = None):
    """PCE of the given (i, j) pairs of a tile: an inverse FFT of each cross-spectrum.

    ``batch`` pairs go through the FFT together (default: one on the CPU, all of them on a
    GPU, where one launch per pair would dominate). On the CPU a batch of a tile's pairs is
    hundreds of MB of fresh temporaries, several times slower than one pair at a time. The
    cross-correlation is real: its inverse FFT takes the half spectra as they are
    (``irfftn``), half the work and bytes of a full complex one. The energy is the whole
    map's less the peak's neighbourhood (four corner blocks), so no map-sized mask is built."""
    if not len(pairs):
        return xp.zeros(0, dtype=xp.float64)
    if batch is None:
        batch = 1 if _on_cpu(left[0][1]) else len(pairs)
    h, w = left[0][0].shape
    r = PEAK_NEIGHBOURHOOD // 2
    # the peak is at zero shift: its neighbourhood is the corners of the circular map
    near_r = _corner_indices(xp, h, r, left[0][1])
    near_c = _corner_indices(xp, w, r, left[0][1])
    n_away = float(h * w - near_r.shape[0] * near_c.shape[0])
    out = []
    for s in range(0, len(pairs), batch):
        part = pairs[s:s + batch]
        fl = xp.stack([left[i][1] for i, _ in part])
        fr = xp.stack([right[j][1] for _, j in part])
        xcorr = xp.fft.irfftn(fl * xp.conj(fr), s=(h, w), axes=(1, 2))
        near = xp.take(xp.take(xcorr, near_r, axis=1), near_c, axis=2)
        energy = (xp.sum(xcorr * xcorr, axis=(1, 2)) - xp.sum(near * near, axis=(1, 2))) / n_away
        peak = xcorr[:, 0, 0]
        out.append(xp.sign(peak) * peak * peak / energy)
    return xp.concat(out) if len(out) > 1 else out[0]


def _corner_indices(xp, n: int, r: int, like):
    """Indices 0..r and n-r..n-1 on ``like``'s device: one axis of the peak's neighbourhood
    on a circular map."""
    dev = getattr(like, "device", None)
    return xp.concat([xp.arange(0, min(r + 1, n), device=dev),
                      xp.arange(max(r + 1, n - r), n, device=dev)])


def _on_cpu(array) -> bool:
    """Is ``array`` in host memory (numpy, or a torch tensor on the CPU)?"""
    return str(getattr(array, "device", "cpu")) == "cpu"
