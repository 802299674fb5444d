"""``numba.njit`` that imports numba and compiles on a kernel's first call, not at import.

Why: importing numba and loading a module's cached machine code costs about a second of CPU per
process; a small run whose kernels take the numpy path (``kernels.kmers``, ``kernels.jaccard``
for small inputs) or a tool that only reads an app's config should not pay it.

The first call of any kernel of a module compiles every lazy kernel of that module and puts the
compiled dispatchers in the module's namespace in place of the stand-ins, so kernels calling
kernels see compiled functions (numba cannot call a Python object). A stand-in imported
elsewhere (``from pairflow.kernels.jaccard import _merge_count``) keeps working: it forwards to the
dispatcher.
"""
from __future__ import annotations

import sys
import threading
from typing import Callable

_pending: dict[str, list["LazyKernel"]] = {}
_lock = threading.Lock()


class LazyKernel:
    """Stands in for ``numba.njit(**options)(fn)`` until first called."""

    def __init__(self, fn: Callable, options: dict):
        self.py_func, self.options = fn, options
        self.dispatcher = None
        self.__name__, self.__doc__ = fn.__name__, fn.__doc__
        self.__module__, self.__qualname__ = fn.__module__, fn.__qualname__

    def compile_module(self) -> None:
        """Compile every pending kernel of this kernel's module (once, thread-safe)."""
        with _lock:
            if self.dispatcher is not None:
                return
            import numba
            _no_extensions()
            module = sys.modules[self.__module__]
            kernels = _pending.pop(self.__module__, [])
            for k in kernels:  # all stand-ins out of the namespace before anything compiles
                k.dispatcher = numba.njit(**k.options)(k.py_func)
                setattr(module, k.__name__, k.dispatcher)

    def __call__(self, *args, **kwargs):
        if self.dispatcher is None:
            self.compile_module()
        return self.dispatcher(*args, **kwargs)

    def __getattr__(self, name):  # py_func, signatures ...: the dispatcher's
        if name.startswith("__"):
            raise AttributeError(name)
        if self.dispatcher is None:
            self.compile_module()
        return getattr(self.dispatcher, name)


def _no_extensions() -> None:
    """numba's first compile loads every installed numba extension (``numba_extensions`` entry
    points): awkward's imports all of awkward, about a CPU-second under load on the default
    run's critical path, for kernels that take numpy arrays only. They are marked loaded; an
    awkward array handed to numba registers its extension itself (``ak.Array.numba_type``)."""
    from numba.core import entrypoints
    entrypoints._already_initialized = True


def lazy_njit(**options) -> Callable[[Callable], LazyKernel]:
    """``@lazy_njit(cache=True, nogil=True)`` in place of ``@numba.njit(...)``."""
    def wrap(fn: Callable) -> LazyKernel:
        kernel = LazyKernel(fn, options)
        _pending.setdefault(fn.__module__, []).append(kernel)
        return kernel
    return wrap


def compiled(module_name: str) -> bool:
    """True once the module's lazy kernels are compiled (numba imported)."""
    return module_name not in _pending


def compile_now(*module_names: str) -> None:
    """Compile (load from numba's cache) every lazy kernel of these modules now: a worker's
    warm-up, so the first tile does not pay it."""
    import importlib
    for name in module_names:
        importlib.import_module(name)
        kernels = _pending.get(name)
        if kernels:
            kernels[0].compile_module()
