"""Operator order for filter pipelines, and the data-setup/processing balance: pure policy.

Nothing here knows about Ray, batches or time; the mechanism (``engine.pipeline``) feeds
measurements in (``engine.pipeline.measure``) and asks for decisions, so every rule can be tested
on synthetic numbers.

* ``OrderPolicy``: given the operators' dependencies (``after=``) and their stats, the order that
  minimises the expected work  sum_i c_i * prod_{filters j before i} p_j. For independent filters
  that is ascending ``c / (1 - p)``; with dependencies (a map must precede the filters that read
  its columns) the order is found exactly by dynamic programming over the dependency-closed
  subsets (the product over a set does not depend on the set's order, so the DP is exact), and by
  a greedy rank rule with one step of look-ahead through maps when there are too many subsets.
* ``DSDPBalancer``: HEP-Frame's data-setup/data-processing checkpoints: at each checkpoint the
  split of slots between reading and processing moves one slot toward the split that maximises
  throughput from the measured per-record costs.
* ``Backoff``: when a decision is looked at again. Re-planning the order and the DS/DP
  checkpoints share it: soon after a change, twice as late each time the decision holds.
* ``heft_order``: a HEFT-like static list schedule (priority = upward rank: own cost plus the
  longest path below), the baseline a DAG scheduler that ignores selectivity would choose.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

MAP, FILTER = "map", "filter"


@dataclass(frozen=True)
class OpSpec:
    """What the policy knows about an operator: its name, kind and dependencies."""

    name: str
    kind: str = FILTER            # "map" (pass rate 1, adds columns) or "filter"
    after: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in (MAP, FILTER):
            raise ValueError(f"operator {self.name!r}: kind must be 'map' or 'filter', "
                             f"got {self.kind!r}")


# -- the dependency graph ----------------------------------------------------------------------

def check_dag(ops: Sequence[OpSpec]) -> None:
    """Unique names, known dependencies, no cycles; raises ValueError naming the operator."""
    names = [o.name for o in ops]
    seen: set = set()
    for n in names:
        if n in seen:
            raise ValueError(f"two operators are named {n!r}")
        seen.add(n)
    for o in ops:
        for d in o.after:
            if d not in seen:
                raise ValueError(f"operator {o.name!r} runs after {d!r}, which is not an "
                                 f"operator of this pipeline (known: {names})")
            if d == o.name:
                raise ValueError(f"operator {o.name!r} depends on itself")
    topological(ops)


def topological(ops: Sequence[OpSpec], order: Sequence[str] | None = None) -> list[str]:
    """A dependency-respecting order that keeps ``order`` (default: the listed order) wherever
    the dependencies allow: repeatedly the first operator whose dependencies have all run."""
    by = {o.name: o for o in ops}
    pending = list(order) if order is not None else [o.name for o in ops]
    if sorted(pending) != sorted(by):
        raise ValueError(f"an order must name every operator once: got {list(pending)}, "
                         f"operators are {sorted(by)}")
    done: set = set()
    out: list[str] = []
    while pending:
        for k, name in enumerate(pending):
            if all(d in done for d in by[name].after):
                out.append(name)
                done.add(name)
                del pending[k]
                break
        else:
            raise ValueError(f"the dependencies of {pending} form a cycle")
    return out


def is_valid_order(ops: Sequence[OpSpec], order: Sequence[str]) -> bool:
    by = {o.name: o for o in ops}
    if sorted(order) != sorted(by):
        return False
    pos = {n: i for i, n in enumerate(order)}
    return all(pos[d] < pos[o.name] for o in ops for d in o.after)


def ancestors(ops: Sequence[OpSpec]) -> dict[str, frozenset]:
    """Every operator's transitive dependencies."""
    by = {o.name: o for o in ops}
    memo: dict[str, frozenset] = {}

    def visit(name: str) -> frozenset:
        if name not in memo:
            acc: set = set()
            for d in by[name].after:
                acc.add(d)
                acc |= visit(d)
            memo[name] = frozenset(acc)
        return memo[name]

    for o in ops:
        visit(o.name)
    return memo


def expected_cost(ops: Sequence[OpSpec], order: Sequence[str], cost: Mapping[str, float],
                  pass_rate: Mapping[str, float]) -> float:
    """Expected work per input record of running ``order``: sum_i c_i * prod_{j<i} p_j."""
    kinds = {o.name: o.kind for o in ops}
    total, frac = 0.0, 1.0
    for name in order:
        total += cost[name] * frac
        if kinds[name] == FILTER:
            frac *= pass_rate[name]
    return total


def estimates(ops: Sequence[OpSpec], stats: Mapping[str, object]) -> tuple[dict, dict]:
    """(cost, pass_rate) per operator from ``OperatorStats`` (anything with ``cost_s`` and
    ``pass_rate``) or ``(cost, pass_rate)`` pairs.

    An operator with no measurement yet gets the mean measured cost and a pass rate of 1, which
    puts it late, where it is measured without risking much work.
    """
    cost: dict[str, float | None] = {}
    rate: dict[str, float | None] = {}
    for o in ops:
        s = stats.get(o.name)
        if s is None:
            c = p = None
        elif hasattr(s, "pass_rate"):
            c, p = s.cost_s, s.pass_rate
        else:
            c, p = s
        cost[o.name] = None if c is None else max(0.0, float(c))
        rate[o.name] = 1.0 if o.kind == MAP else (None if p is None else
                                                   min(1.0, max(0.0, float(p))))
    known = [c for c in cost.values() if c is not None]
    fill = float(np.mean(known)) if known else 1.0
    cost = {k: (fill if v is None else v) for k, v in cost.items()}
    rate = {k: (1.0 if v is None else v) for k, v in rate.items()}
    return cost, rate


# -- the order ---------------------------------------------------------------------------------

class OrderPolicy:
    """The order of least expected work, given dependencies and measurements.

    ``method``: ``"auto"`` (exact when the dependency-closed subsets number at most
    ``max_states``, greedy otherwise), ``"exact"`` or ``"greedy"``. Ties keep the written order.
    """

    def __init__(self, ops: Sequence[OpSpec], method: str = "auto", max_states: int = 100_000):
        check_dag(ops)
        if method not in ("auto", "exact", "greedy"):
            raise ValueError(f"method must be auto, exact or greedy, got {method!r}")
        self.ops = list(ops)
        self.method = method
        self.max_states = max_states
        self.names = [o.name for o in ops]
        self.written = topological(ops)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.dep_mask = [sum(1 << self.index[d] for d in o.after) for o in ops]
        self.is_filter = [o.kind == FILTER for o in ops]
        self.last_method = None

    def order(self, stats: Mapping[str, object]) -> list[str]:
        cost, rate = estimates(self.ops, stats)
        c = [cost[n] for n in self.names]
        p = [rate[n] if f else 1.0 for n, f in zip(self.names, self.is_filter)]
        if self.method in ("auto", "exact"):
            out = self._exact(c, p, limit=None if self.method == "exact" else self.max_states)
            if out is not None:
                self.last_method = "exact"
                return out
        self.last_method = "greedy"
        return self._greedy(c, p)

    def expected_cost(self, order: Sequence[str], stats: Mapping[str, object]) -> float:
        cost, rate = estimates(self.ops, stats)
        return expected_cost(self.ops, order, cost, rate)

    def _exact(self, c: list, p: list, limit: int | None) -> list[str] | None:
        """Forward DP over dependency-closed subsets (bitmasks); None if over ``limit``."""
        n = len(c)
        layer: dict[int, float] = {0: 0.0}
        prod: dict[int, float] = {0: 1.0}
        back: dict[int, tuple[int, int]] = {}
        states = 1
        full = (1 << n) - 1
        for _ in range(n):
            nxt: dict[int, float] = {}
            for s, val in layer.items():
                frac = prod[s]
                for i in range(n):  # written index order: ties keep the first found
                    bit = 1 << i
                    if s & bit or self.dep_mask[i] & ~s:
                        continue
                    t = s | bit
                    v = val + c[i] * frac
                    old = nxt.get(t)
                    if old is None or v < old - 1e-15 * max(1.0, abs(old)):
                        if old is None:
                            states += 1
                            if limit is not None and states > limit:
                                return None
                            prod[t] = frac * p[i]
                        nxt[t] = v
                        back[t] = (s, i)
            layer = nxt
        if full not in layer:
            raise ValueError("no order satisfies the dependencies")
        out, s = [], full
        while s:
            prev, i = back[s]
            out.append(self.names[i])
            s = prev
        out.reverse()
        return self._prefer_written(out, c, p)

    def _prefer_written(self, order: list[str], c: list, p: list) -> list[str]:
        """Among orders of equal expected work, the written one (stable, and avoids churn)."""
        cost = {n: c[i] for i, n in enumerate(self.names)}
        rate = {n: p[i] for i, n in enumerate(self.names)}
        best = expected_cost(self.ops, order, cost, rate)
        mine = expected_cost(self.ops, self.written, cost, rate)
        return list(self.written) if mine <= best * (1 + 1e-12) else order

    def _greedy(self, c: list, p: list) -> list[str]:
        """Repeatedly the ready operator of least rank c/(1-p); a ready map is ranked by what it
        unlocks: (c_map + c_f) / (1 - p_f) for the best filter f it alone makes ready."""
        n = len(c)
        done = 0
        out: list[str] = []

        def rank(ci: float, pi: float) -> float:
            return ci / (1.0 - pi) if pi < 1.0 else math.inf

        while len(out) < n:
            best, best_r = None, math.inf
            for i in range(n):
                if done >> i & 1 or self.dep_mask[i] & ~done:
                    continue
                if self.is_filter[i]:
                    r = rank(c[i], p[i])
                else:
                    after = done | (1 << i)
                    r = math.inf
                    for j in range(n):
                        if (not after >> j & 1 and self.is_filter[j]
                                and self.dep_mask[j] & (1 << i) and not self.dep_mask[j] & ~after):
                            r = min(r, rank(c[i] + c[j], p[j]))
                if best is None or r < best_r:
                    best, best_r = i, r
            if best_r == math.inf:  # nothing gains: keep the written order among the ready ops
                best = next(self.index[nm] for nm in self.written
                            if not done >> self.index[nm] & 1
                            and not self.dep_mask[self.index[nm]] & ~done)
            done |= 1 << best
            out.append(self.names[best])
        return out


def heft_order(ops: Sequence[OpSpec], cost: Mapping[str, float]) -> list[str]:
    """HEFT-like list schedule on one processor: operators by decreasing upward rank (own cost
    plus the most expensive path through its dependents), dependencies respected. It sees costs
    but not pass rates, as a DAG scheduler would."""
    check_dag(ops)
    children: dict[str, list[str]] = {o.name: [] for o in ops}
    for o in ops:
        for d in o.after:
            children[d].append(o.name)
    memo: dict[str, float] = {}

    def up(name: str) -> float:
        if name not in memo:
            memo[name] = cost[name] + max((up(ch) for ch in children[name]), default=0.0)
        return memo[name]

    written = {o.name: i for i, o in enumerate(ops)}
    pri = sorted(written, key=lambda n: (-up(n), written[n]))
    return topological(ops, pri)


def brute_force_best(ops: Sequence[OpSpec], cost: Mapping[str, float],
                     pass_rate: Mapping[str, float]) -> tuple[list[str], float]:
    """Every valid order tried (for tests and benchmarks on a handful of operators)."""
    import itertools
    best, best_v = None, math.inf
    for perm in itertools.permutations([o.name for o in ops]):
        if not is_valid_order(ops, perm):
            continue
        v = expected_cost(ops, perm, cost, pass_rate)
        if v < best_v - 1e-15:
            best, best_v = list(perm), v
    return best, best_v


# -- when to look again ------------------------------------------------------------------------

@dataclass
class Backoff:
    """When to re-examine a decision, counted in finished batches.

    Looking again costs (planning an order competes with the work on a small machine) and a
    decision that held is likely to hold, so: after a change, look again ``first`` batches later;
    each time the decision holds, wait twice as long, up to ``most``. ``due(done)`` says whether
    the batch count has reached the next look; ``update(changed, done)`` sets the next one.
    """

    first: int
    most: int
    start: int | None = None     # the first look (default: after ``first`` batches)
    interval: int = field(init=False)
    next_at: int = field(init=False)

    def __post_init__(self):
        self.interval = self.first
        self.next_at = self.first if self.start is None else self.start

    def due(self, done: int) -> bool:
        return done >= self.next_at

    def update(self, changed: bool, done: int) -> int:
        """Returns the new interval."""
        self.interval = self.first if changed else min(self.most, 2 * self.interval)
        self.next_at = done + self.interval
        return self.interval


# -- data setup vs processing ------------------------------------------------------------------

@dataclass
class DSDPBalancer:
    """How many of ``slots`` concurrent slots read/decode (DS) and how many process (DP).

    ``checkpoint(ds_cost, dp_cost)`` takes the measured CPU seconds per record of reading and
    of processing. The best split maximises the modelled throughput
    min(min(n_ds, C) / ds_cost, min(n_dp, C) / dp_cost, C / (ds_cost + dp_cost)) with C = ``cores``
    (slots beyond the cores only time-share them; ``cores=None``: every slot is a core, as in
    HEP-Frame's thread model); the split moves one slot toward it when that gains more than
    ``tolerance``. When the next checkpoint is due follows ``Backoff(interval0, max_interval)``.
    """

    slots: int
    n_ds: int | None = None
    cores: int | None = None
    interval0: int = 2
    max_interval: int = 64
    tolerance: float = 0.05
    history: list = field(init=False, default_factory=list)
    backoff: Backoff = field(init=False, repr=False)

    def __post_init__(self):
        if self.slots < 2:
            raise ValueError(f"DS/DP balancing needs at least 2 slots, got {self.slots}")
        if self.n_ds is None:
            self.n_ds = self.slots // 2
        if not 1 <= self.n_ds <= self.slots - 1:
            raise ValueError(f"n_ds must be in [1, {self.slots - 1}], got {self.n_ds}")
        self.backoff = Backoff(self.interval0, self.max_interval)

    @property
    def interval(self) -> int:
        return self.backoff.interval

    @property
    def next_at(self) -> int:
        return self.backoff.next_at

    @property
    def n_dp(self) -> int:
        return self.slots - self.n_ds

    def throughput(self, n_ds: int, ds_cost: float, dp_cost: float) -> float:
        ds_cost, dp_cost = max(ds_cost, 1e-12), max(dp_cost, 1e-12)
        c = self.cores or self.slots
        return min(min(n_ds, c) / ds_cost, min(self.slots - n_ds, c) / dp_cost,
                   c / (ds_cost + dp_cost))

    def target(self, ds_cost: float, dp_cost: float) -> int:
        best = max(range(1, self.slots), key=lambda k: (self.throughput(k, ds_cost, dp_cost),
                                                        -abs(k - self.n_ds)))
        return best

    def due(self, batches_done: int) -> bool:
        return self.backoff.due(batches_done)

    def checkpoint(self, ds_cost: float, dp_cost: float, batches_done: int = 0) -> bool:
        """Returns True when the split changed."""
        tgt = self.target(ds_cost, dp_cost)
        now = self.throughput(self.n_ds, ds_cost, dp_cost)
        step = self.n_ds + (1 if tgt > self.n_ds else -1) if tgt != self.n_ds else self.n_ds
        gain = self.throughput(step, ds_cost, dp_cost) / max(now, 1e-300) - 1.0
        changed = step != self.n_ds and gain > self.tolerance
        if changed:
            self.n_ds = step
        self.backoff.update(changed, batches_done)
        self.history.append({"batches": batches_done, "ds_cost_s": ds_cost,
                             "dp_cost_s": dp_cost, "n_ds": self.n_ds, "n_dp": self.n_dp,
                             "target": tgt, "changed": changed, "interval": self.interval})
        return changed
