"""The batched-FFT form of NCC and PCE (kernels/prnu_fft.py) against plain numpy: each pair's
circular cross-correlation by whole-spectrum fft2/ifft2 of the centred, unit-norm images, its
value at zero shift and its energy away from the 11 x 11 square there; on numpy and torch, in
one batch or a pair of rows at a time, odd and even widths, with a mask."""
from __future__ import annotations

import numpy as np
import pytest

from pairflow.kernels.backend import namespace_for, to_device, to_numpy
from pairflow.kernels.prnu import prepare
from pairflow.kernels.prnu_fft import ncc_pce_fft
from tests.conftest import need_module

R = 5  # the peak's neighbourhood is (2R+1)² = 11 x 11 (Goljan's)


def _plain(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(NCC, PCE) of two images by whole-spectrum numpy: no half spectra, no batching."""
    x = x - x.mean()
    y = y - y.mean()
    x, y = x / np.sqrt((x * x).sum()), y / np.sqrt((y * y).sum())
    c = np.real(np.fft.ifft2(np.fft.fft2(x) * np.conj(np.fft.fft2(y))))
    h, w = c.shape
    near = np.zeros_like(c, dtype=bool)
    for dy in range(-R, R + 1):
        for dx in range(-R, R + 1):
            near[dy % h, dx % w] = True
    peak = c[0, 0]
    return peak, np.sign(peak) * peak * peak / np.mean(c[~near] ** 2)


def _xp(device):
    if device == "torch-cpu":
        need_module("torch")
    return namespace_for(device)


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
@pytest.mark.parametrize("shape", [(20, 15), (24, 32)])
@pytest.mark.parametrize("batch_bytes", [1, None])
def test_ncc_and_pce_equal_plain_numpy(device, shape, batch_bytes):
    xp = _xp(device)
    rng = np.random.default_rng(shape[1])
    images = [rng.normal(size=shape) for _ in range(5)]
    images[3] = images[0] + 0.5 * rng.normal(size=shape)  # one pair shares a pattern
    spectra = [prepare(xp, to_device(xp, x, device)) for x in images]
    kw = {} if batch_bytes is None else {"batch_bytes": batch_bytes}
    ncc, pce = (to_numpy(m) for m in ncc_pce_fft(xp, spectra[:3], spectra[2:], shape[1], **kw))
    assert ncc.shape == pce.shape == (3, 3)
    for i in range(3):
        for j in range(3):
            want_ncc, want_pce = _plain(images[i], images[2 + j])
            assert ncc[i, j] == pytest.approx(want_ncc, abs=1e-9)
            assert pce[i, j] == pytest.approx(want_pce, rel=1e-9, abs=1e-9)
    assert pce[0, 1] > 60 > abs(pce[1, 1])  # images 0 and 3 correlate, 1 and 3 do not


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
def test_a_row_that_wants_nothing_stays_zero_and_the_rest_are_computed(device):
    xp = _xp(device)
    rng = np.random.default_rng(8)
    images = [rng.normal(size=(16, 16)) for _ in range(4)]
    spectra = [prepare(xp, to_device(xp, x, device)) for x in images]
    mask = np.triu(np.ones((4, 4), bool), 1)  # row 3 wants nothing
    ncc, pce = (to_numpy(m) for m in ncc_pce_fft(xp, spectra, spectra, 16, mask=mask,
                                                 batch_bytes=1))
    for i, j in zip(*np.nonzero(mask)):
        want_ncc, want_pce = _plain(images[i], images[j])
        assert ncc[i, j] == pytest.approx(want_ncc, abs=1e-9)
        assert pce[i, j] == pytest.approx(want_pce, rel=1e-9, abs=1e-9)
    assert not ncc[3].any() and not pce[3].any()


def test_spectra_of_another_width_or_size_are_refused():
    rng = np.random.default_rng(1)
    spectra = [prepare(np, rng.normal(size=(20, 15))) for _ in range(2)]
    with pytest.raises(ValueError, match="20x8 do not come from residuals 16 wide"):
        ncc_pce_fft(np, spectra, spectra, 16)
    other = prepare(np, rng.normal(size=(22, 15)))
    with pytest.raises(ValueError, match="22x8 and 20x8 in one tile"):
        ncc_pce_fft(np, spectra, spectra + [other], 15)
