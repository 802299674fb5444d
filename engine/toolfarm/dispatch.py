"""Which unit a worker gets next, how many it may hold queued, retries and failures: the farm's
policy, apart from the Ray mechanism in ``driver.py`` (and testable without it).

Workers pull: a worker holds its running unit plus a prefetch queue, so it starts the next unit
the moment the tool exits, and asks for more only when the queue is empty: with two queued
units a worker calls the driver once every two units (every Ray call takes CPU from a tool on
a machine whose cores all run one). The queue is sized from measured unit times: deep enough to
hide a hand-out round trip (``overhead_s``) behind queued work. Near the end (no more units
pending than workers) a worker gets a unit only when it has nothing queued, and a worker left
with nothing takes back half of the queued units of the worker holding most (``steal``), so no
unit waits behind another while a core idles.
"""
from __future__ import annotations

import math
from collections import deque


class UnitQueue:
    def __init__(self, units: list[int], retries: int, overhead_s: float = 0.05,
                 max_depth: int = 8):
        self.pending = deque(units)
        self.retries, self.overhead_s, self.max_depth = retries, overhead_s, max_depth
        self.held: dict[str, list[int]] = {}       # worker -> units given, oldest first
        self.attempts: dict[int, int] = {}
        self.failures: dict[int, dict] = {}         # unit -> its last failure, given up
        self.finished: set[int] = set()             # the tool succeeded (maybe not on disk yet)
        self.retried = 0
        self.stolen = 0                             # units taken back from a busy worker
        self.unit_seconds = 0.0
        self.unit_runs = 0

    def mean_unit_s(self) -> float | None:
        return self.unit_seconds / self.unit_runs if self.unit_runs else None

    def depth(self) -> int:
        """Units a worker may hold (running + queued): at least 3, so each hand-out brings two."""
        mean = self.mean_unit_s()
        if mean is None:
            return 3
        return max(3, min(self.max_depth, 2 + math.ceil(self.overhead_s / max(mean, 1e-6))))

    def steal(self, idle: str) -> tuple[str, int] | None:
        """For ``idle`` (a worker holding nothing, nothing pending): the worker to take units
        back from and how many (half its queued ones, at least one), or None."""
        if self.pending or self.held.get(idle):
            return None
        victim = max(self.held, key=lambda w: (len(self.held[w]), w), default=None)
        queued = len(self.held[victim]) - 1 if victim is not None else 0  # one is running
        if queued < 1:
            return None
        return victim, (queued + 1) // 2

    def returned(self, worker: str, units: list[int]) -> None:
        """``worker`` gave back ``units`` it never started: pending again, first, in order,
        their attempts not counted."""
        for u in reversed(units):
            self._release(worker, u)
            self.attempts[u] -= 1
            self.pending.appendleft(u)
        self.stolen += len(units)

    def next_for(self, worker: str, workers: int) -> int | None:
        """A unit for ``worker`` if it may take one more, else None."""
        held = self.held.setdefault(worker, [])
        if not self.pending:
            return None
        limit = 1 if len(self.pending) <= workers else self.depth()
        if len(held) >= limit:
            return None
        unit = self.pending.popleft()
        held.append(unit)
        self.attempts[unit] = self.attempts.get(unit, 0) + 1
        return unit

    def ran(self, worker: str, unit: int, seconds: float) -> None:
        """The tool succeeded on ``unit``: the worker is free of it; its output is on the way
        to the writer (``written`` or ``failed`` follows)."""
        self._release(worker, unit)
        self.unit_seconds += seconds
        self.unit_runs += 1

    def written(self, unit: int) -> None:
        """The writer has the unit's output."""
        self.finished.add(unit)

    def succeeded(self, worker: str, unit: int, seconds: float) -> None:
        self.ran(worker, unit, seconds)
        self.written(unit)

    def failed(self, worker: str, unit: int, failure: dict) -> bool:
        """A run of ``unit`` failed; True if it is queued again, False if given up."""
        self._release(worker, unit)
        if self.attempts.get(unit, 0) <= self.retries:
            self.pending.appendleft(unit)  # retried first: a failing unit is known soon
            self.retried += 1
            return True
        self.failures[unit] = {**failure, "attempts": self.attempts.get(unit, 0)}
        return False

    def lost_worker(self, worker: str) -> list[int]:
        """The worker died: every unit it held goes back (an attempt counted)."""
        units = self.held.pop(worker, [])
        for u in reversed(units):
            if self.attempts.get(u, 0) <= self.retries:
                self.pending.appendleft(u)
                self.retried += 1
            else:
                self.failures[u] = {"error": "its worker died", "attempts": self.attempts[u]}
        return units

    def rerun(self, unit: int) -> None:
        """A finished unit's output was lost before it reached the disk: run it again."""
        self.finished.discard(unit)
        self.pending.appendleft(unit)

    def _release(self, worker: str, unit: int) -> None:
        held = self.held.get(worker, [])
        if unit in held:
            held.remove(unit)

    def idle(self) -> bool:
        return not self.pending and not any(self.held.values())
