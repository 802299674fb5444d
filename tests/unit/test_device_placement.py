"""The kernels' array paths make every array on their input's device, never on the host by
default: on a GPU, torch refuses to mix a CUDA tensor with a host one. Without a GPU, torch's
"meta" device stands in for it: meta tensors carry shapes but no data, and an operation that
mixes them with host tensors fails just as a CUDA one would ("not on the expected device").
Each path runs on meta inputs as far as it goes without data (reading a value back, or
torch.nonzero, ends it: fine); what must never happen is the device error."""
from __future__ import annotations

import re

import numpy as np
import pytest

from tests.conftest import need_module

MIXED = re.compile(r"expected device|same device|on the expected", re.I)
NO_DATA = re.compile(r"meta tensors|no data|register_meta|data-dependent", re.I)


def _meta_cases():
    need_module("torch")
    from pairflow.kernels import bitset, bitset_mm, composition, jaccard, prnu, prnu_fft, registration
    rng = np.random.default_rng(0)

    def m(a):
        import torch
        return torch.from_numpy(np.asarray(a)).to("meta")
    def rows():
        return m(rng.integers(0, 2**62, (40, 8)))

    def spectra(xp):
        return [prnu.prepare(xp, m(rng.normal(size=(16, 16)))) for _ in range(3)]
    return {
        "registration.register": lambda xp: registration.register(
            xp, m(rng.normal(size=(20, 2))), m(rng.normal(size=(18, 2))), 2.0),
        "prnu.noise_residual": lambda xp: prnu.noise_residual(xp, m(rng.normal(size=(32, 32)))),
        "prnu.wave_noise": lambda xp: prnu.wave_noise(xp, m(rng.normal(size=(16, 16))), 9.0),
        "prnu.ncc_pce": lambda xp: prnu.ncc_pce(xp, spectra(xp), spectra(xp), 16),
        "prnu_fft.ncc_pce_fft": lambda xp: prnu_fft.ncc_pce_fft(xp, spectra(xp), spectra(xp), 16),
        "composition.word_counts": lambda xp: composition.word_counts(
            xp, m(np.array([1, 2, 3, 4, 5, -1, 2, 3, 4], np.int8)), 3),
        "composition.composition_vector (short)": lambda xp: composition.composition_vector(
            xp, m(np.array([1, 2], np.int8)), 3),
        "bitset._intersections_xp": lambda xp: bitset._intersections_xp(xp, rows(), rows(), None),
        "bitset_mm.intersections_mm int8": lambda xp: bitset_mm.intersections_mm(
            xp, bitset_mm.unpack_bits(xp, rows()), bitset_mm.unpack_bits(xp, rows()), "int8"),
        "bitset_mm.jaccard_topk_mm": lambda xp: bitset_mm.jaccard_topk_mm(xp, rows(), 5),
        "jaccard._count_xp": lambda xp: jaccard._count_xp(xp, m(np.arange(5)), m(np.arange(3, 9))),
    }


CASES = ["registration.register", "prnu.noise_residual", "prnu.wave_noise", "prnu.ncc_pce",
         "prnu_fft.ncc_pce_fft", "composition.word_counts",
         "composition.composition_vector (short)", "bitset._intersections_xp",
         "bitset_mm.intersections_mm int8", "bitset_mm.jaccard_topk_mm", "jaccard._count_xp"]


@pytest.mark.parametrize("name", CASES)
def test_no_host_array_meets_a_device_array(name):
    import array_api_compat.torch as xp
    try:
        _meta_cases()[name](xp)
    except (RuntimeError, NotImplementedError) as exc:
        assert not MIXED.search(str(exc)), f"{name} mixes devices: {exc}"
        assert NO_DATA.search(str(exc)), f"{name} failed otherwise: {exc}"


def test_the_meta_device_does_catch_a_host_array():
    """The detector works: a host array made without ``device=`` next to a meta one fails."""
    torch = need_module("torch")
    import array_api_compat.torch as xp
    with pytest.raises(RuntimeError, match=MIXED):
        xp.concat([xp.zeros(1, dtype=xp.float64), torch.zeros(2, dtype=torch.float64,
                                                              device="meta")])
