"""Array backend selection.

Kernels are written once against the array API standard and receive the namespace ``xp`` as an
argument, so the same tile code runs on numpy (CPU), torch (CPU or CUDA) and cupy (GPU).  The
engine only has to name a device string per device actor; this module turns that string into a
namespace and moves arrays to and from it.

torch and cupy are imported only when a device asks for them: most runs are CPU-only, importing
torch costs about a second and hundreds of MB in every Ray worker, and cupy is usually absent.

Device strings
    ``"cpu"``        numpy (through ``array_api_compat.numpy``)
    ``"torch-cpu"``  torch tensors in host memory (useful to test the torch path without a GPU)
    ``"cuda"``       torch tensors on the current CUDA device
    ``"cupy"``       cupy arrays on the current CUDA device
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DEVICES", "namespace_for", "best_device", "to_device", "to_numpy", "is_numpy_namespace",
           "fft_of"]

DEVICES = ("cpu", "torch-cpu", "cuda", "cupy")


def _check_device(device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is installed in the dev env
        raise ImportError("device needs torch, which is not installed (pip install 'pairflow[torch]')") from e
    return torch


def namespace_for(device: str):
    """Return the array-api-compat namespace that kernels should use on ``device``.

    Raises a clear error when the device cannot be used here (no CUDA, no cupy) rather than
    silently falling back to the CPU: a run configured for a GPU that ends up on the CPU is a
    performance bug the user should hear about.  Use :func:`best_device` to pick what exists.
    """
    _check_device(device)
    if device == "cpu":
        import array_api_compat.numpy as xp

        return xp
    if device in ("torch-cpu", "cuda"):
        torch = _torch()
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
        import array_api_compat.torch as xp

        return xp
    try:
        import cupy  # noqa: F401
    except ImportError as e:
        raise ImportError("device 'cupy' requested but cupy is not installed") from e
    import array_api_compat.cupy as xp

    return xp


def best_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``.

    Does not import torch when it is not installed, so CPU-only installs stay light.
    """
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def is_numpy_namespace(xp) -> bool:
    """True for plain numpy or array-api-compat's numpy wrapper (both hand out numpy arrays)."""
    import array_api_compat

    return xp is None or xp is np or array_api_compat.is_numpy_namespace(xp)


def fft_of(xp):
    """The FFT functions kernels call for namespace ``xp``: scipy.fft for numpy, the
    namespace's own ``fft`` otherwise. Both follow numpy.fft's signatures and are pocketfft;
    scipy's real transforms are the faster on a residual, with the same bits in the residuals
    checked (the residual both ways, measured: benchmarks/RESULTS.md, "Kernel micro-benchmarks:
    k-mers and Jaccard")."""
    if is_numpy_namespace(xp):
        import scipy.fft

        return scipy.fft
    return xp.fft


def to_device(xp, array: Any, device: str):
    """Put ``array`` (usually a numpy array from the host tier) on ``device`` for namespace ``xp``.

    torch has no usable uint64 (no searchsorted, no comparisons on CUDA), so uint64 arrays going to
    torch are reinterpreted as int64.  That keeps values only below 2**63, which is checked here:
    k-mer codes are below 2**62 and always pass.  Inputs from the Ray object store are read-only;
    ``torch.as_tensor`` would warn about that, so host arrays are copied when they are read-only
    and the target is torch (the copy is needed anyway for a CUDA upload).
    """
    _check_device(device)
    if device == "cpu":
        return np.asarray(to_numpy(array))
    if device in ("torch-cpu", "cuda"):
        torch = _torch()
        if isinstance(array, torch.Tensor):
            return array.to("cuda" if device == "cuda" else "cpu")
        a = np.asarray(to_numpy(array))
        if a.dtype == np.uint64:
            if a.size and int(a.max()) >= 2**63:
                raise ValueError("uint64 values >= 2**63 cannot be represented in torch int64")
            a = a.view(np.int64)
        if not a.flags.writeable or not a.flags.c_contiguous:
            a = np.array(a, copy=True, order="C")
        t = torch.from_numpy(a)
        return t.to("cuda") if device == "cuda" else t
    import cupy

    return cupy.asarray(to_numpy(array) if not isinstance(array, cupy.ndarray) else array)


def to_numpy(array: Any) -> np.ndarray:
    """Bring any supported array back to a numpy array in host memory (no copy when it is one)."""
    if isinstance(array, np.ndarray):
        return array
    mod = type(array).__module__.split(".")[0]
    if mod == "torch":
        return array.detach().cpu().numpy()
    if mod == "cupy":
        return array.get()
    return np.asarray(array)
