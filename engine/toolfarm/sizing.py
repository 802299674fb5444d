"""How big a farm's units are and how many cores each worker owns: the policy, fed timings, with
no Ray and no tool in it (the driver runs the tool and reports what it measured).

A tool's seconds per record fall as its units grow and then level off: blastp loads its
database once per run (0.08 s CPU) and scans it once per batch of queries, hmmsearch parses
every profile once per run. So a unit's cost is ``fixed + per_byte x bytes`` and the records
per second at size n, ``n / (fixed + per_byte x n x mean record)``, rise towards
``1 / per_byte``. Both are measured on the run's first units, in CPU seconds of the tool, not
the wall clock: on a machine shared with other work a unit's wall time says how busy the
machine was while it ran (blastp, 128 queries: 1.6-1.7 s CPU in every run, 1.4-7.5 s wall at
load 4-16; the wall clock made 32 look as fast as 128 and chose it, paying blastp's start 80
times). A tool that waits more than it computes (its CPU time under ``WAITING`` of its wall
time) is measured by the wall clock.

``UnitSizer`` runs a ladder: the first units of the run (real units, their outputs kept) are
cut at sizes ``first``, x ``factor``, ... one per worker at a time, each step's rate measured
in input bytes per CPU second (records differ in length; bytes are what the tool reads), read
as records per second at the input's mean record size, and a line ``fixed + per_byte x bytes``
is fitted through every unit so far (least squares of relative errors, ``fit``). Comparing two steps' rates is not enough:
their records differ, and one blastp query costs 10 % more or less than another, which hides
the few per cent a larger unit gains. The ladder stops when the fitted fixed cost is under
``LADDER_SHARE`` of the last step's units (the line is measured where it bends), when a step
is slower than the best by more than ``FALL`` (a tool slower on big units: the best measured
size is taken), at the load-balance bound (every worker keeps ``units_per_worker`` units of the
whole input, ``bound()``), at a step that would run longer than ``max_unit_s``, when the
records left cannot fill a step, or when what is left is short (under ``TAIL_MIN_S`` a worker
at the last rate): then there is nothing left to balance, and the rest is one unit per worker
(a worker has had its ladder units already), so 50 queries run as 2 rounds of blastp, not 4 of
ever smaller units.

``choose()`` then takes the smallest size whose fitted fixed cost is at most ``SHARE`` of a
unit (records per second within ``SHARE`` of the tool's best), within the bound and
``max_unit_s``; the bound itself where no fixed cost shows (larger units cost nothing then).
``work_s`` is the run's estimated seconds of work per CPU: what decides between in-process and
Ray (``engine.run.executor_choice.choose``, the one rule all engines follow).

``tail_units``: the last units of a run are cut smaller so no core idles long behind the
last one (``units.unit_size``); where a unit takes less than ``TAIL_MIN_S`` that idle is short
already, and smaller units would pay the tool's fixed cost again (on a small input every unit
is in the tail), so they are not cut. A tool with a thread option runs its last units on every
core instead (``local.drive_local``'s ``all_cores_last``).

``threads_per_worker``: a node's cores split over its workers; a worker owning several passes
the tool's own thread option (``{threads}``: ``-num_threads``, ``--cpu``, ``--threads``). There
are never more workers than units, so one Clustal Omega file on two cores is one worker with
``--threads 2``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

UNITS_PER_WORKER = 2      # every worker gets at least this many full units (balance, progress)
MAX_UNIT_S = 60.0         # and no unit runs longer (what a killed run loses per worker)
TAIL_MIN_S = 2.0          # units shorter than this are not cut smaller at the end of the run
FIRST = 1                 # the ladder's first size, records (mostly the tool's fixed cost)
FACTOR = 8                # each step this many times the last
LADDER_SHARE = 0.15       # the ladder stops once the fixed cost is under this of a unit
SHARE = 0.01              # units are cut where the fixed cost is this share of a unit
FALL = 0.15               # a step slower than the best by more than this: the tool slows
WAITING = 0.05            # CPU time under this share of wall time: the tool waits, use the wall


@dataclass
class Step:
    size: int                                  # records per unit asked for
    records: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu_s: list[float | None] = field(default_factory=list)

    def uses_cpu(self) -> bool:
        """The tool's CPU time counts, unless unknown or the tool mostly waits."""
        return all(c is not None for c in self.cpu_s) and \
            sum(self.cpu_s) >= WAITING * sum(self.seconds)

    def costs(self) -> list[float]:
        """Each unit's seconds: the tool's CPU time, or the wall time (see ``uses_cpu``)."""
        return list(self.cpu_s) if self.uses_cpu() else list(self.seconds)

    def cost_s(self) -> float:
        return sum(self.costs())

    def bytes_per_s(self) -> float:
        return sum(self.nbytes) / max(self.cost_s(), 1e-9)


class UnitSizer:
    """The ladder and the choice for ``records`` records of ``mean_record_bytes`` bytes each on
    average, run by ``workers`` single-core workers (see the module docstring)."""

    def __init__(self, records: int, workers: int, mean_record_bytes: float,
                 units_per_worker: int = UNITS_PER_WORKER, max_unit_s: float = MAX_UNIT_S,
                 first: int = FIRST, factor: int = FACTOR, share: float = SHARE,
                 ladder_share: float = LADDER_SHARE, fall: float = FALL):
        if records < 1 or workers < 1:
            raise ValueError(f"UnitSizer needs records >= 1 and workers >= 1, got {records}, "
                             f"{workers}")
        self.records, self.workers = records, workers
        self.mean_record_bytes = max(float(mean_record_bytes), 1.0)
        self.units_per_worker, self.max_unit_s = units_per_worker, max_unit_s
        self.first, self.factor = first, factor
        self.share, self.ladder_share, self.fall = share, ladder_share, fall
        self.steps: list[Step] = []
        self.stopped: str | None = None     # why the ladder ended
        self.left = 0                        # records left when it ended "short"

    def bound(self) -> int:
        """The largest unit that leaves every worker ``units_per_worker`` units."""
        return max(1, self.records // (self.workers * self.units_per_worker))

    def rate(self, step: Step) -> float:
        """Records per CPU second at the step's size (per worker, a worker owning one core)."""
        return step.bytes_per_s() / self.mean_record_bytes

    def longest(self, rate: float) -> int:
        """Records a unit may hold at ``rate`` and finish within ``max_unit_s``."""
        return max(1, int(self.max_unit_s * rate))

    def observe(self, size: int, records: int, nbytes: int, seconds: float,
                cpu_s: float | None = None) -> None:
        """One unit of the step of ``size`` ran: ``records`` records, ``nbytes`` bytes of
        input, in ``seconds`` (the tool's wall time) and ``cpu_s`` (its CPU time, if known)."""
        if not self.steps or self.steps[-1].size != size:
            self.steps.append(Step(size))
        s = self.steps[-1]
        s.records.append(records)
        s.nbytes.append(nbytes)
        s.seconds.append(seconds)
        s.cpu_s.append(cpu_s)

    def fit(self) -> tuple[float, float] | None:
        """(fixed seconds, seconds per byte): the line through every unit measured, least
        squares of relative errors (each unit weighs 1 / its cost squared: a blastp query
        costs 10 % more or less than another, so a big unit's cost is known to 10 % of itself
        and a small one's to 10 % of itself, and the small units, mostly fixed cost, pin the
        fixed cost); None where it cannot be drawn (one size of unit, a cost that falls with
        size)."""
        pts = [(n, c, 1.0 / c ** 2) for st in self.steps
               for n, c in zip(st.nbytes, st.costs()) if c > 0]
        if len({n for n, _, _ in pts}) < 2:
            return None
        sw = sum(w for _, _, w in pts)
        mx = sum(w * n for n, _, w in pts) / sw
        my = sum(w * c for _, c, w in pts) / sw
        sxx = sum(w * (n - mx) ** 2 for n, _, w in pts)
        per_byte = sum(w * (n - mx) * (c - my) for n, c, w in pts) / sxx
        if per_byte <= 0:
            return None
        return max(0.0, my - per_byte * mx), per_byte

    def fixed_share(self, size: int) -> float | None:
        """The fitted fixed cost's share of a unit of ``size`` records (mean records)."""
        line = self.fit()
        if line is None:
            return None
        fixed, per_byte = line
        return fixed / (fixed + per_byte * size * self.mean_record_bytes)

    def next_step(self, left: int) -> int | None:
        """Records per unit of the next ladder step (one unit per worker), or None when the
        curve is done (``stopped`` says why); ``left``: records not yet in any unit."""
        if self.stopped:
            return None
        bound = self.bound()
        if not self.steps:
            size = min(self.first, bound)
        else:
            last = self.steps[-1]
            best = max(self.rate(s) for s in self.steps)
            if self.rate(last) < (1 - self.fall) * best:
                return self._stop("falls")
            share = self.fixed_share(last.size)
            if share is not None and share <= self.ladder_share:
                return self._stop("fit")
            if last.size >= bound:
                return self._stop("bound")
            size = min(last.size * self.factor, bound)
            if size > self.longest(self.rate(last)):
                return self._stop("max_unit_s")
        if self.steps and left / self.rate(self.steps[-1]) / self.workers < TAIL_MIN_S:
            self.left = left
            return self._stop("short")
        if left < size * self.workers:
            return self._stop("records")
        return size

    def _stop(self, why: str) -> None:
        self.stopped = why
        return None

    def choose(self) -> int:
        """Records per unit for the rest of the run (see the module docstring)."""
        bound = self.bound()
        if not self.steps:  # nothing measured (too few records for a step): balance alone
            return bound
        if self.stopped == "short":  # one unit per worker for what is left
            return max(1, -(-self.left // self.workers))
        if self.stopped == "falls":  # slower on bigger units: the best size measured
            best = max(self.steps, key=self.rate)
            return max(1, min(best.size, bound, self.longest(self.rate(best))))
        line = self.fit()
        if line is None or line[0] <= 0:  # no fixed cost to spread: as large as balance allows
            return max(1, min(bound, self.longest(self.rate(self.steps[-1]))))
        fixed, per_byte = line
        per_record = per_byte * self.mean_record_bytes
        size = math.ceil(round(fixed * (1 - self.share) / (self.share * per_record), 6))
        longest = int((self.max_unit_s - fixed) / per_record)  # on the line: t(n) <= max
        return max(1, min(size, bound, longest))

    def tail_units(self, size: int, default: int) -> int:
        """How many of the last units' worth of records are cut smaller: ``default``, or none
        where a unit of ``size`` takes less than ``TAIL_MIN_S`` at the measured rate."""
        rate = self.rate_at(size) if self.steps else 0.0
        return 0 if rate > 0 and size / rate < TAIL_MIN_S else default

    def rate_at(self, size: int) -> float:
        """Records per (CPU) second per worker at ``size``: on the fitted line where there
        is one, else the measured step at or below it."""
        line = self.fit()
        if line is not None and self.stopped != "falls":
            fixed, per_byte = line
            return size / (fixed + per_byte * size * self.mean_record_bytes)
        below = [s for s in self.steps if s.size <= size] or self.steps[:1]
        return self.rate(max(below, key=lambda s: s.size)) if below else 0.0

    def work_s(self, records: int, cpus: int, size: int) -> float | None:
        """Seconds of tool work per CPU for ``records`` records in units of ``size``."""
        rate = self.rate_at(size)
        return records / rate / max(1, cpus) if rate > 0 else None

    def report(self) -> dict:
        """The curve as measured, for the run's summary (``unit_choice``)."""
        return {"steps": [{"size": s.size, "units": len(s.records), "records": sum(s.records),
                           "bytes": sum(s.nbytes), "seconds": s.seconds, "cpu_s": s.cpu_s,
                           "records_per_s": self.rate(s)} for s in self.steps],
                "stopped": self.stopped, "bound": self.bound(), "fit": self.fit(),
                "mean_record_bytes": self.mean_record_bytes}


def threads_per_worker(cores: int, units: int, workers: int | None = None) -> list[int]:
    """Cores of each worker on a node of ``cores``: ``workers`` of them if given, else one per
    core but never more than ``units``; the cores split as evenly as they go."""
    w = max(1, min(cores, units) if workers is None else workers)
    base, extra = divmod(max(cores, w), w)
    return [base + (1 if i < extra else 0) for i in range(w)]
