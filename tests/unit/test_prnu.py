"""PRNU kernel: NCC and PCE against a plain numpy brute force, the residual's steps against
PyWavelets and scipy, and torch on CPU against numpy."""
import numpy as np
import pytest

from pairflow.kernels.prnu import (PEAK_NEIGHBOURHOOD, haar2, ihaar2, ncc_pce, noise_residual, prepare,
                          wave_noise, wiener_dft, zero_mean_rows_cols)
from tests.conftest import need_module


@pytest.fixture(scope="module")
def photos():
    """Four 64x64 grey crops of real photographs, two of them sharing a sensor pattern."""
    import skimage.data
    from skimage.color import rgb2gray
    rng = np.random.default_rng(3)
    pattern = rng.normal(0, 0.03, (64, 64))
    crops = [skimage.data.camera()[100:164, 200:264].astype(float),
             rgb2gray(skimage.data.astronaut())[300:364, 100:164] * 255,
             skimage.data.coins()[50:114, 60:124].astype(float),
             skimage.data.brick()[:64, :64].astype(float)]
    crops[0] = crops[0] * (1 + pattern)
    crops[1] = crops[1] * (1 + pattern)
    return [c + rng.normal(0, 1, c.shape) for c in crops]


def _numpy_ncc(x, y):
    return np.corrcoef(x.ravel(), y.ravel())[0, 1]


def _numpy_pce(x, y):
    """Circular cross-correlation by explicit shifts (no FFT); the peak at zero shift; the
    energy over every shift outside the 11x11 square around it."""
    x, y = x - x.mean(), y - y.mean()
    h, w = x.shape
    r = PEAK_NEIGHBOURHOOD // 2
    peak, energy, n = 0.0, 0.0, 0
    for dy in range(h):
        for dx in range(w):
            c = float(np.sum(x * np.roll(y, (dy, dx), axis=(0, 1))))
            sy, sx = min(dy, h - dy), min(dx, w - dx)
            if dy == 0 and dx == 0:
                peak = c
            if sy > r or sx > r:
                energy += c * c
                n += 1
    return np.sign(peak) * peak * peak / (energy / n)


def _xp(device):
    from pairflow.kernels.backend import namespace_for
    if device == "torch-cpu":
        need_module("torch")
    return namespace_for(device)


PAIRS = [(0, 1), (1, 0), (0, 2), (1, 3), (2, 3)]


@pytest.fixture(scope="module")
def reference(photos):
    residuals = [noise_residual(np, p) for p in photos]
    return residuals, {(i, j): (_numpy_ncc(residuals[i], residuals[j]),
                                _numpy_pce(residuals[i], residuals[j])) for i, j in PAIRS}


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
def test_ncc_and_pce_equal_plain_numpy(reference, device):
    from pairflow.kernels.backend import to_device, to_numpy
    xp = _xp(device)
    residuals, want = reference
    items = [prepare(xp, to_device(xp, r, device)) for r in residuals]
    ncc, pce = (to_numpy(m) for m in ncc_pce(xp, items, items, residuals[0].shape[1]))
    for i, j in PAIRS:
        assert ncc[i, j] == pytest.approx(want[i, j][0], abs=1e-6)
        assert pce[i, j] == pytest.approx(want[i, j][1], rel=1e-6, abs=1e-6)
    # only photos 0 and 1 share a sensor
    assert min(pce[0, 1], pce[1, 0]) > 60 > max(abs(pce[i, j]) for i, j in PAIRS[2:])


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
@pytest.mark.parametrize("height,chunk_bytes", [(20, 1), (20, None), (40, 1), (40, 2816)])
def test_a_rectangular_tile_of_odd_width_equals_plain_numpy(height, chunk_bytes, device):
    """Any real images (here noise, 15 wide: an odd width keeps no Nyquist column), 3 against
    2, in blocks of one left item and one spectrum row (chunk_bytes=1), of two left items
    (2816 bytes: 2 x 11 column factors x 8 columns x 16 bytes, so blocks of 2 and 1), or the
    default; 40 rows are summed over the row factors in two parts (FLUSH_ROWS is 32). numpy
    computes into buffers, torch into fresh tensors."""
    from pairflow.kernels.backend import to_device, to_numpy
    xp = _xp(device)
    rng = np.random.default_rng(11)
    images = [rng.normal(size=(height, 15)) for _ in range(5)]
    images[3] = images[0] + 0.5 * rng.normal(size=(height, 15))  # correlated with image 0
    spectra = [prepare(xp, to_device(xp, x, device)) for x in images]
    ncc, pce = (to_numpy(m) for m in ncc_pce(xp, spectra[:3], spectra[3:], 15,
                                             chunk_bytes=chunk_bytes))
    assert ncc.shape == pce.shape == (3, 2)
    for i in range(3):
        for j in range(2):
            x, y = images[i], images[3 + j]
            assert ncc[i, j] == pytest.approx(_numpy_ncc(x, y), abs=1e-9)
            assert pce[i, j] == pytest.approx(_numpy_pce(x, y), rel=1e-9, abs=1e-9)
    assert pce[0, 0] > 60 > max(abs(pce[i, j]) for i in range(3) for j in range(2) if i or j)
    with pytest.raises(ValueError, match=f"{height}x8 do not come from residuals 16 wide"):
        ncc_pce(xp, spectra[:2], spectra[2:], 16)
    other = prepare(xp, to_device(xp, rng.normal(size=(height + 2, 15)), device))
    with pytest.raises(ValueError, match=f"{height + 2}x8 and {height}x8 in one tile"):
        ncc_pce(xp, spectra[:2], spectra[2:] + [other], 15)


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
@pytest.mark.parametrize("chunk_bytes", [1, 2816, None])
def test_a_masked_tile_computes_the_wanted_pairs_and_skips_the_rest(chunk_bytes, device):
    """A diagonal tile of 6 items wants its upper triangle; in blocks of one left item
    (chunk_bytes=1) or of two (2816 bytes, and the default: a masked tile is cut into at least
    four blocks), the wanted pairs equal plain numpy, and a pair left of every wanted one in its block's rows was never computed: 0. A
    scattered mask with an empty row (item 2 wants nothing) the same."""
    from pairflow.kernels.backend import to_device, to_numpy
    xp = _xp(device)
    rng = np.random.default_rng(5)
    images = [rng.normal(size=(20, 15)) for _ in range(6)]
    images[4] = images[1] + 0.5 * rng.normal(size=(20, 15))
    spectra = [prepare(xp, to_device(xp, x, device)) for x in images]
    scattered = np.zeros((6, 6), bool)
    scattered[0, 5] = scattered[1, 4] = scattered[3, 0] = scattered[5, 2] = True
    for mask in (np.triu(np.ones((6, 6), bool), 1), scattered):
        ncc, pce = (to_numpy(m) for m in ncc_pce(xp, spectra, spectra, 15,
                                                 chunk_bytes=chunk_bytes, mask=mask))
        for i, j in zip(*np.nonzero(mask)):
            x, y = images[i], images[j]
            assert ncc[i, j] == pytest.approx(_numpy_ncc(x, y), abs=1e-9)
            assert pce[i, j] == pytest.approx(_numpy_pce(x, y), rel=1e-9, abs=1e-9)
        if chunk_bytes == 1:  # one left item a block: every pair before its first wanted one
            for i in range(6):
                first = np.flatnonzero(mask[i])
                skipped = range(first[0] if first.size else 6)
                assert all(ncc[i, j] == 0 and pce[i, j] == 0 for j in skipped), (i, ncc[i])
    assert ncc[1, 4] > 0.3 and pce[1, 4] > 60


def test_haar_equals_pywavelets_and_inverts():
    pywt = need_module("pywt")
    x = np.random.default_rng(0).normal(size=(32, 48))
    ll, (lh, hl, hh) = haar2(np, x)
    ref_ll, (ref_h, ref_v, ref_d) = pywt.dwt2(x, "haar")
    np.testing.assert_allclose(ll, ref_ll, atol=1e-12)
    # PyWavelets names the details by direction: horizontal = rows differ = our HL
    np.testing.assert_allclose(np.abs(hl), np.abs(ref_h), atol=1e-12)
    np.testing.assert_allclose(np.abs(lh), np.abs(ref_v), atol=1e-12)
    np.testing.assert_allclose(np.abs(hh), np.abs(ref_d), atol=1e-12)
    np.testing.assert_allclose(ihaar2(np, ll, (lh, hl, hh)), x, atol=1e-12)


def _scipy_local_wiener(coef, noise_var):
    from scipy.ndimage import uniform_filter
    var = None
    for w in (3, 5, 7, 9):
        est = np.maximum(uniform_filter(coef ** 2, w, mode="constant") - noise_var, 0)
        var = est if var is None else np.minimum(var, est)
    return coef * noise_var / (var + noise_var)


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
def test_wave_noise_equals_a_scipy_local_wiener(device):
    """numpy's float64 arrays take the compiled loop, torch's the array-API code."""
    from pairflow.kernels.backend import to_device, to_numpy
    coef = np.random.default_rng(1).normal(0, 5, (40, 40))
    coef[10:20, 10:20] *= 8
    xp = _xp(device)
    got = to_numpy(wave_noise(xp, to_device(xp, coef, device), 9.0))
    np.testing.assert_allclose(got, _scipy_local_wiener(coef, 9.0), atol=1e-9)


def _plain_wiener_dft(x):
    """Goljan's Wiener filter in the DFT domain on the whole spectrum, inverted whole."""
    spectrum = np.fft.fft2(x)
    magnitude = np.abs(spectrum) / np.sqrt(x.size)
    kept = _scipy_local_wiener(magnitude, float(np.mean(x * x)))
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(magnitude == 0, 0.0, kept / magnitude)
    return np.real(np.fft.ifft2(spectrum * scale))


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
@pytest.mark.parametrize("shape", [(64, 64), (48, 33), (31, 40)])
@pytest.mark.parametrize("centred", [True, False])
def test_wiener_dft_on_half_spectra_equals_the_whole_spectrum_filter(photos, shape, centred,
                                                                     device):
    """The kernel transforms half spectra; the whole spectrum's filter and real inverse, by
    plain numpy and scipy, give the same result (odd and even sides: the half spectrum's last
    column is, or is not, its own mirror). Rows and columns of zero mean, as the residual's,
    zero the spectrum's first row and column, and the filter's gains come out even in the
    frequency; an image's are not, and the half spectrum must carry their even part."""
    from pairflow.kernels.backend import to_device, to_numpy
    x = photos[1][:shape[0], :shape[1]]
    x = zero_mean_rows_cols(np, x) if centred else x
    want = _plain_wiener_dft(x)
    xp = _xp(device)
    got = to_numpy(wiener_dft(xp, to_device(xp, x, device)))
    assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
    assert np.abs(want - x).max() > 1e-3 * np.abs(x).max()  # the filter changed something


def test_residual_rows_and_columns_have_zero_mean_and_torch_agrees(photos):
    from pairflow.kernels.backend import to_device, to_numpy
    x = zero_mean_rows_cols(np, photos[2])
    assert np.abs(x.mean(axis=0)).max() < 1e-9 and np.abs(x.mean(axis=1)).max() < 1e-9
    xp = _xp("torch-cpu")
    got = to_numpy(noise_residual(xp, to_device(xp, photos[2], "torch-cpu")))
    np.testing.assert_allclose(got, noise_residual(np, photos[2]), atol=1e-9)
    with pytest.raises(ValueError, match="divisible by 16"):
        noise_residual(np, photos[2][:60])


def test_the_compiled_loops_give_the_array_codes_bits(photos, monkeypatch):
    """numpy's float64 arrays take compiled loops (Haar both ways, the Wiener rule, the DFT
    filter); the array-API code on the same arrays gives the same bits, an even and an odd
    half spectrum alike."""
    import pairflow.kernels.prnu as prnu
    images = [photos[0], photos[1][:48, :32]]
    x = zero_mean_rows_cols(np, photos[2][:, :37])
    fast = [prepare(np, noise_residual(np, im)) for im in images] + [wiener_dft(np, x)]
    monkeypatch.setattr(prnu, "_compiled_path", lambda a: False)
    slow = [prepare(np, noise_residual(np, im)) for im in images] + [wiener_dft(np, x)]
    for got, want in zip(fast, slow):
        assert got.shape == want.shape and np.array_equal(got, want)
