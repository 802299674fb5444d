"""A synthetic all-pairs app whose stages burn known amounts of CPU.

The benchmarks need workloads shaped like Rocket's Table 1 (parse-heavy, preprocess-heavy,
compare-heavy) to measure system efficiency against the modelled limit, and the R experiments need
many cheap items. Stages burn CPU in compiled code that releases the GIL (so they behave like real
kernels, not like ``time.sleep``); only the optional I/O delay sleeps. The result of compare is a
deterministic function of the two items, so correctness can be checked too.
"""
from __future__ import annotations

import time

import numba
import numpy as np

from engine import BasePairApp
from engine import Rectangle, Triangle


@numba.njit(nogil=True, cache=True)
def _spin(n):
    x = 0.0
    for i in range(n):
        x = x * 0.999999 + 1.0
    return x


_RATE = None


def spin_rate() -> float:
    """Iterations of ``_spin`` per second in this process (measured once)."""
    global _RATE
    if _RATE is None:
        _spin(1000)
        n, t0 = 2_000_000, time.perf_counter()
        _spin(n)
        _RATE = n / max(1e-6, time.perf_counter() - t0)
    return _RATE


def burn(seconds: float, rate: float | None = None) -> None:
    """Burn about ``seconds`` of CPU; ``rate`` (iterations/s) fixes the work across processes."""
    if seconds > 0:
        _spin(int(seconds * (rate or spin_rate())))


class SyntheticApp(BasePairApp):
    """n items; each stage costs the given seconds; compare(i, j) = (i * 7919 + j) % 1000."""

    name = "synthetic"

    def __init__(self, n: int, t_parse: float = 0.0, t_pre: float = 0.0, t_cmp: float = 0.0,
                 io_sleep: float = 0.0, item_floats: int = 1024, targets: int | None = None):
        self.n, self.targets = n, targets
        self.t_parse, self.t_pre, self.t_cmp, self.io_sleep = t_parse, t_pre, t_cmp, io_sleep
        self.item_floats = item_floats
        # calibrated once, here: every worker then burns the same work, whatever its load at
        # start-up, so the benchmark's T_min and the engine's T measure the same thing
        self.rate = spin_rate()

    def keys(self):
        total = self.n + (self.targets or 0)
        return [f"item{i:06d}" for i in range(total)]

    def row_keys(self):
        return self.keys()[: self.n]

    def col_keys(self):
        return self.keys()[self.n:] if self.targets else self.keys()

    def space(self):
        return Rectangle(self.n, self.targets) if self.targets else Triangle(self.n)

    def warmup(self, device):
        burn(1e-6, self.rate)  # loads the compiled _spin (~0.8 s of CPU per process)

    def parse(self, key, raw):
        if self.io_sleep:
            time.sleep(self.io_sleep)
        burn(self.t_parse, self.rate)
        idx = int(key[4:])
        return np.full(self.item_floats, idx, dtype=np.float64)

    def preprocess(self, key, item, device):
        burn(self.t_pre, self.rate)
        return item

    def compare(self, left, right, mask, device):
        burn(self.t_cmp * int(mask.sum()), self.rate)
        li = np.array([x[0] for x in left], dtype=np.int64)[:, None]
        ri = np.array([x[0] for x in right], dtype=np.int64)[None, :]
        return ((li * 7919 + ri) % 1000).astype(np.float64)

    @staticmethod
    def expected(i, j):
        return float((i * 7919 + j) % 1000)

    def describe(self):
        return {"app": self.name, "n": self.n, "t_parse": self.t_parse, "t_pre": self.t_pre,
                "t_cmp": self.t_cmp, "io_sleep": self.io_sleep}
