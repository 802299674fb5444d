"""Device strings -> array namespaces, and moving arrays between them."""

from __future__ import annotations

import numpy as np
import pytest

from pairflow.kernels.backend import best_device, namespace_for, to_device, to_numpy
from tests.conftest import need_module


def test_cpu_is_numpy():
    import array_api_compat

    xp = namespace_for("cpu")
    assert array_api_compat.is_numpy_namespace(xp)
    a = to_device(xp, np.arange(4, dtype=np.uint64), "cpu")
    assert isinstance(a, np.ndarray) and a.dtype == np.uint64


def test_unknown_device():
    with pytest.raises(ValueError, match="gpu"):
        namespace_for("gpu")


def test_torch_cpu_round_trip():
    torch = need_module("torch")
    xp = namespace_for("torch-cpu")
    a = np.array([0, 5, 2**62 - 1], dtype=np.uint64)
    a.flags.writeable = False  # as handed out by the Ray object store
    t = to_device(xp, a, "torch-cpu")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.int64
    back = to_numpy(t)
    assert back.view(np.uint64).tolist() == a.tolist()


def test_torch_rejects_uint64_beyond_int64():
    need_module("torch")
    with pytest.raises(ValueError, match="2\\*\\*63"):
        to_device(namespace_for("torch-cpu"), np.array([2**63], dtype=np.uint64), "torch-cpu")


def test_cuda_and_cupy_fail_clearly_when_absent():
    torch = need_module("torch")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            namespace_for("cuda")
        assert best_device() == "cpu"
    else:
        assert best_device() == "cuda"
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="cupy"):
            namespace_for("cupy")
