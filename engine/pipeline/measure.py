"""What the engine measures about operators, and on which records: pure, no Ray, no clock.

* ``OperatorStats``: one operator's measured cost per record (seconds) and pass rate over a
  recent window of batches. Pass rates come from the *sample* observations when there are enough
  of them (every operator sees the sample records that passed its own dependencies, so the rate
  does not depend on where the current order put the operator), else from everything.
* ``SampleRule``: which records of a batch also run every operator (a small deterministic sample
  per batch) so that the estimates of operators the order rarely reaches stay honest.

``engine.pipeline.ordering`` turns these measurements into decisions.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from .ordering import MAP, FILTER


class OperatorStats:
    """Windowed measurements of one operator.

    ``observe(records_in, passed, seconds, sampled)`` once per batch (and once more for the
    batch's sample). ``cost_s``: marginal seconds per record over the window, with a fixed cost
    per call (``overhead_s``, paid wherever the operator sits) taken out when calls of very
    different sizes show it; ``pass_rate``: passed / in over the sample observations of the
    window when they hold at least ``min_pass_records`` records, else over every observation.
    Totals over the whole run are kept apart for the cutflow.
    """

    def __init__(self, kind: str = FILTER, window: int = 16, min_pass_records: int = 32):
        self.kind = kind
        self.window = window
        self.min_pass_records = min_pass_records
        self.normal: deque = deque(maxlen=window)
        self.sampled: deque = deque(maxlen=window)
        self.total = {"records_in": 0, "passed": 0, "seconds": 0.0, "calls": 0}
        self.sample_total = {"records_in": 0, "passed": 0, "seconds": 0.0, "calls": 0}

    def observe(self, records_in: int, passed: int, seconds: float, sampled: bool = False) -> None:
        if passed > records_in or records_in < 0:
            raise ValueError(f"passed={passed} of records_in={records_in}")
        (self.sampled if sampled else self.normal).append((records_in, passed, seconds))
        tot = self.sample_total if sampled else self.total
        tot["records_in"] += records_in
        tot["passed"] += passed
        tot["seconds"] += seconds
        tot["calls"] += 1

    @staticmethod
    def _sums(obs: Iterable) -> tuple[int, int, float]:
        n = p = 0
        s = 0.0
        for a, b, c in obs:
            n += a
            p += b
            s += c
        return n, p, s

    @property
    def records_in(self) -> int:
        """Records seen in the window (both kinds)."""
        return self._sums(self.normal)[0] + self._sums(self.sampled)[0]

    def _fit(self) -> tuple[float, float] | None:
        """(overhead per call, seconds per record) over the window.

        The cost per record is the records-weighted ratio seconds / records, less a per-call
        floor ``a`` when the window holds calls much smaller than the typical one (the sample's
        calls, or calls late in the order): ``a`` is the fastest of those small calls, an upper
        bound of the fixed cost per call that timing noise can only raise. So an operator whose
        time is mostly a fixed cost per call (awkward's, say) is not charged per record for it,
        and an operator whose cost grows with its records is never estimated free (a least-
        squares fit on a handful of noisy small calls can be)."""
        pts = [(a, c) for a, _, c in list(self.normal) + list(self.sampled) if a > 0]
        if not pts:
            return None
        n = np.array([p[0] for p in pts], float)
        s = np.array([p[1] for p in pts], float)
        typical = float((n * n).sum() / n.sum())
        small = n <= 0.25 * typical
        if not small.any():
            return 0.0, float(s.sum() / n.sum())
        a = float(min(s[small].min(), s.min()))
        return a, max(0.0, float((s - a).sum() / n.sum()))

    @property
    def cost_s(self) -> float | None:
        """Marginal seconds per record (what moving the operator changes)."""
        fit = self._fit()
        return None if fit is None else fit[1]

    @property
    def overhead_s(self) -> float | None:
        """Seconds per call whatever the number of records (paid in any order)."""
        fit = self._fit()
        return None if fit is None else fit[0]

    @property
    def pass_rate(self) -> float | None:
        if self.kind == MAP:
            return 1.0
        n2, p2, _ = self._sums(self.sampled)
        if n2 >= self.min_pass_records:
            return p2 / n2
        n1, p1, _ = self._sums(self.normal)
        if n1 + n2 == 0:
            return None
        return (p1 + p2) / (n1 + n2)

    def snapshot(self) -> dict:
        fit = self._fit()
        return {"cost_s": None if fit is None else fit[1], "pass_rate": self.pass_rate,
                "records_in": self.records_in, "overhead_s": None if fit is None else fit[0]}


@dataclass(frozen=True)
class SampleRule:
    """Which rows of a batch also run every operator.

    ``rows(batch_index, n)``: ``max(min_records, rate * n)`` rows, chosen at random but
    reproducibly from (seed, batch index), in every ``every``-th batch; ``rate = 0`` samples
    nothing.

    ``budgeted(batch_index, n, expected, full, overhead, budget)`` caps what the sample costs at
    a fraction ``budget`` of the batch's expected work: running every operator on a sampled record
    costs ``full`` seconds (the sum of the operators' costs per record) plus ``overhead`` per
    batch (their fixed costs per call), the batch itself ``overhead + expected * n``. When even
    ``min_records`` rows would exceed the budget, ``min_records`` rows are sampled in one batch of
    every k, so that the budget holds on average. A pipeline whose best order is 100 times cheaper
    than running everything would otherwise spend more on its sample than on its work.
    """

    rate: float = 0.02
    min_records: int = 16
    seed: int = 0
    every: int = 1

    def __post_init__(self):
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"sample rate must be in [0, 1], got {self.rate}")
        if self.every < 1:
            raise ValueError(f"sample every must be >= 1, got {self.every}")

    def _pick(self, batch_index: int, n: int, m: int) -> np.ndarray:
        m = min(n, m)
        rng = np.random.default_rng([self.seed, batch_index])
        return np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)

    def rows(self, batch_index: int, n: int) -> np.ndarray:
        if self.rate <= 0 or n <= 0 or batch_index % self.every:
            return np.zeros(0, np.int64)
        return self._pick(batch_index, n, max(self.min_records, int(math.ceil(self.rate * n))))

    def plan(self, n: int, expected: float, full: float, overhead: float,
             budget: float) -> tuple[int, int]:
        """(records per sampled batch, sample one batch in every k) within the budget."""
        if self.rate <= 0 or n <= 0:
            return 0, 1
        m_rate = max(self.min_records, int(math.ceil(self.rate * n)))
        allowed = budget * (overhead + expected * n)          # seconds per batch
        if overhead + full * m_rate <= allowed:
            return m_rate, self.every
        m = int((allowed - overhead) / full) if full > 0 else m_rate
        if m >= self.min_records:
            return min(m, m_rate), self.every
        cost = overhead + full * self.min_records
        k = int(math.ceil(cost / allowed)) if allowed > 0 else 1_000_000
        return self.min_records, max(self.every, k)

    def budgeted(self, batch_index: int, n: int, expected: float, full: float,
                 overhead: float = 0.0, budget: float = 0.02) -> np.ndarray:
        m, every = self.plan(n, expected, full, overhead, budget)
        if m <= 0 or batch_index % every:
            return np.zeros(0, np.int64)
        return self._pick(batch_index, n, m)

