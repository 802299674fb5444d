"""Freed memory kept for reuse while a pipeline runs: the allocator setting columnar work needs.

A columnar operator makes big temporaries on every call (the HEP selection's reconstruction:
arrays of events x draws x streams, tens of MB each). glibc's malloc serves a block over its
mmap threshold (at most 32 MB) with a fresh mmap and unmaps it on free, so the next call
faults every page in again; where faults are dear (a VM: benchmarks/RESULTS.md, "Filter
pipelines") that is most of a selection's CPU time, and worker threads of one process queue on
the address space's lock while they fault. During a run the engine asks
malloc to serve big blocks from its heap and not to give the top of the heap back
(``mallopt``), so a batch reuses the pages the previous one freed; afterwards it restores the
values in force before (``engine/run/runtime.allocator_baseline``: glibc's fixed defaults, or
the process's tuning) and returns the free memory
(``malloc_trim``). Other C libraries than glibc: nothing is changed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
from contextlib import contextmanager

from ..run.runtime import allocator_baseline

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -2, -3, -4
KEEP = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: 1 << 62, M_TOP_PAD: 64 << 20}

_lock = threading.Lock()
_depth = 0


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def _set(libc, values: dict) -> bool:
    return all(libc.mallopt(k, ctypes.c_int(v) if v < 2**31 else ctypes.c_int(2**31 - 1))
               for k, v in values.items())


def keep() -> bool:
    """Start keeping freed memory (see the module docstring); each ``keep`` that returned True
    is undone by one ``release``. False where the C library is not glibc."""
    global _depth
    libc = _libc()
    if libc is None:
        return False
    with _lock:
        if _depth == 0 and not _set(libc, KEEP):
            _set(libc, allocator_baseline())
            return False
        _depth += 1
    return True


def release() -> None:
    """Undo one ``keep``; the last one restores the defaults and returns the free memory."""
    global _depth
    libc = _libc()
    if libc is None:
        return
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth == 0:
            _set(libc, allocator_baseline())
            libc.malloc_trim(ctypes.c_size_t(0))


@contextmanager
def keep_freed_memory(enabled: bool = True):
    """``keep`` for the block (nested and concurrent uses share one setting, undone by the last
    to leave). Yields whether the setting took effect."""
    ok = keep() if enabled else False
    try:
        yield ok
    finally:
        if ok:
            release()
