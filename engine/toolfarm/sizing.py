"""How big a farm's units are and how many cores each worker owns: the policy, fed timings, with
no Ray and no tool in it (the driver runs the tool and reports what it measured).

A tool's seconds per record fall as its units grow and then level off: blastp loads its
database once per run and scans it once per batch of queries (a lone query costs several of a
batched run's), hmmsearch parses every profile once per run. A straight line ``fixed +
per_record x n`` through two small units does not see this: it can find no fixed cost and
choose units of one record, far slower than the tool's own threads. So the curve itself is
measured (the farm against the tool's threads: RESULTS.md, "Tool farm").

``UnitSizer`` runs a ladder: the first units of the run (real units, their outputs kept) are
cut at sizes ``first``, x ``factor``, ... one per worker at a time, and each step's throughput
is measured in input bytes per second (records differ in length; bytes are what the tool
reads), read as records per second at the input's mean record size. The ladder stops at the
knee (a step gains less than ``gain`` over the one before), at the load-balance bound (every
worker keeps ``units_per_worker`` units of the whole input, ``bound()``), at a step that would
run longer than ``max_unit_s``, when the records left cannot fill a step, or when what is left
is short (under ``TAIL_MIN_S`` a worker at the last rate): then there is nothing left to
balance, and the rest is one unit per worker (a worker has had its ladder units already), so
50 queries run as 2 rounds of blastp, not 4 of ever smaller units.

``choose()`` then takes the size that maximises records per second per worker within the
bound: the smallest measured size within ``tolerance`` of the best measured rate (as fast, and
finer for balance, progress and resume), or the bound itself where the curve was still rising
when the ladder stopped (larger units are then faster still); never a unit longer than
``max_unit_s``. ``work_s`` is the run's estimated seconds of work per CPU at that rate: what
decides between in-process and Ray (``engine.run.executor_choice.choose``, the one rule both
engines follow).

``tail_units``: the last units of a run are cut smaller so no core idles long behind the
last one (``units.unit_size``); where a unit takes less than ``TAIL_MIN_S`` that idle is short
already, and smaller units would pay the tool's fixed cost again (on a small input every unit
is in the tail), so they are not cut.

``threads_per_worker``: a node's cores split over its workers; a worker owning several passes
the tool's own thread option (``{threads}``: ``-num_threads``, ``--cpu``, ``--threads``). There
are never more workers than units, so one Clustal Omega file on two cores is one worker with
``--threads 2``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

UNITS_PER_WORKER = 2      # every worker gets at least this many full units (balance, progress)
MAX_UNIT_S = 60.0         # and no unit runs longer (what a killed run loses per worker)
TAIL_MIN_S = 2.0          # units shorter than this are not cut smaller at the end of the run
FIRST = 8                 # the ladder's first size, records
FACTOR = 4                # each step this many times the last
GAIN = 0.05               # a step gaining less than this over the last: the knee, stop
TOLERANCE = 0.02          # sizes within this of the best rate count as the best


@dataclass
class Step:
    size: int                                  # records per unit asked for
    records: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def bytes_per_s(self) -> float:
        return sum(self.nbytes) / max(sum(self.seconds), 1e-9)


class UnitSizer:
    """The ladder and the choice for ``records`` records of ``mean_record_bytes`` bytes each on
    average, run by ``workers`` single-core workers (see the module docstring)."""

    def __init__(self, records: int, workers: int, mean_record_bytes: float,
                 units_per_worker: int = UNITS_PER_WORKER, max_unit_s: float = MAX_UNIT_S,
                 first: int = FIRST, factor: int = FACTOR, gain: float = GAIN,
                 tolerance: float = TOLERANCE):
        if records < 1 or workers < 1:
            raise ValueError(f"UnitSizer needs records >= 1 and workers >= 1, got {records}, "
                             f"{workers}")
        self.records, self.workers = records, workers
        self.mean_record_bytes = max(float(mean_record_bytes), 1.0)
        self.units_per_worker, self.max_unit_s = units_per_worker, max_unit_s
        self.first, self.factor, self.gain, self.tolerance = first, factor, gain, tolerance
        self.steps: list[Step] = []
        self.stopped: str | None = None     # why the ladder ended
        self.left = 0                        # records left when it ended "short"

    def bound(self) -> int:
        """The largest unit that leaves every worker ``units_per_worker`` units."""
        return max(1, self.records // (self.workers * self.units_per_worker))

    def rate(self, step: Step) -> float:
        """Records per second per worker at the step's size."""
        return step.bytes_per_s() / self.mean_record_bytes

    def longest(self, rate: float) -> int:
        """Records a unit may hold at ``rate`` and finish within ``max_unit_s``."""
        return max(1, int(self.max_unit_s * rate))

    def observe(self, size: int, records: int, nbytes: int, seconds: float) -> None:
        """One unit of the step of ``size`` ran: ``records`` records, ``nbytes`` bytes of
        input, in ``seconds`` (the tool's wall time)."""
        if not self.steps or self.steps[-1].size != size:
            self.steps.append(Step(size))
        s = self.steps[-1]
        s.records.append(records)
        s.nbytes.append(nbytes)
        s.seconds.append(seconds)

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
            if len(self.steps) >= 2 and \
                    self.rate(last) < (1 + self.gain) * self.rate(self.steps[-2]):
                return self._stop("knee")
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
        rates = [(self.rate(s), s.size) for s in self.steps]
        best = max(r for r, _ in rates)
        rising = len(rates) < 2 or rates[-1][0] >= (1 + self.gain) * rates[-2][0]
        if rising and self.stopped != "knee":
            size = bound  # still rising where the ladder stopped: as large as balance allows
            rate = rates[-1][0]
        else:
            size = min(s for r, s in rates if r >= (1 - self.tolerance) * best)
            rate = best
        return max(1, min(size, bound, self.longest(rate)))

    def tail_units(self, size: int, default: int) -> int:
        """How many of the last units' worth of records are cut smaller: ``default``, or none
        where a unit of ``size`` takes less than ``TAIL_MIN_S`` at the measured rate."""
        rate = self.rate_at(size) if self.steps else 0.0
        return 0 if rate > 0 and size / rate < TAIL_MIN_S else default

    def rate_at(self, size: int) -> float:
        """Records per second per worker at ``size``: the measured step at or below it."""
        below = [s for s in self.steps if s.size <= size] or self.steps[:1]
        return self.rate(max(below, key=lambda s: s.size)) if below else 0.0

    def work_s(self, records: int, cpus: int, size: int) -> float | None:
        """Seconds of tool work per CPU for ``records`` records in units of ``size``."""
        rate = self.rate_at(size)
        return records / rate / max(1, cpus) if rate > 0 else None

    def report(self) -> dict:
        """The curve as measured, for the run's summary (``unit_choice``)."""
        return {"steps": [{"size": s.size, "units": len(s.records), "records": sum(s.records),
                           "bytes": sum(s.nbytes), "seconds": s.seconds,
                           "records_per_s": self.rate(s)} for s in self.steps],
                "stopped": self.stopped, "bound": self.bound(),
                "mean_record_bytes": self.mean_record_bytes}


def threads_per_worker(cores: int, units: int, workers: int | None = None) -> list[int]:
    """Cores of each worker on a node of ``cores``: ``workers`` of them if given, else one per
    core but never more than ``units``; the cores split as evenly as they go."""
    w = max(1, min(cores, units) if workers is None else workers)
    base, extra = divmod(max(cores, w), w)
    return [base + (1 if i < extra else 0) for i in range(w)]
