"""Known amounts of CPU work, for workloads whose stage costs must be set exactly (benchmarks,
tests of scheduling and interrupts).

The work is compiled code that releases the GIL, so it behaves like a real kernel, not like
``time.sleep``: threads of one process compete for cores, and a tile's cost is CPU time.
"""
from __future__ import annotations

import time

import numba


@numba.njit(nogil=True, cache=True)
def spin(n):
    """``n`` dependent floating-point steps (nothing for the compiler to skip)."""
    x = 0.0
    for i in range(n):
        x = x * 0.999999 + 1.0
    return x


_RATE = None


def spin_rate() -> float:
    """Iterations of ``spin`` per second in this process (measured once)."""
    global _RATE
    if _RATE is None:
        spin(1000)
        n, t0 = 2_000_000, time.perf_counter()
        spin(n)
        _RATE = n / max(1e-6, time.perf_counter() - t0)
    return _RATE


def burn(seconds: float, rate: float | None = None) -> None:
    """Burn about ``seconds`` of CPU; ``rate`` (iterations/s) fixes the work across processes."""
    if seconds > 0:
        spin(int(seconds * (rate or spin_rate())))
