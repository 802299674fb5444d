"""What the planner chose for a run and why (``PlanChoice``), and the names it chooses among:
the ways of sharing a run between nodes (``share_modes``), the (plan, eviction) candidates and
the pick of the fewest loads. Why its own home: these are the planner's vocabulary, read by the
driver and summary.json without the simulator (``simulate.choose_plan`` makes the choice).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..cache.eviction import EVICTIONS
from .policy import PLANS

BASELINE = ("zorder", "lru")


@dataclass(frozen=True)
class PlanChoice:
    """The plan and eviction a run uses, and why: the simulated R of every candidate; on
    several nodes with frontiers, how the run is shared between them (``shares``) and what
    each way of sharing was simulated to load (``modes``)."""

    plan: str
    eviction: str
    simulated: dict = field(default_factory=dict)  # "plan/eviction" -> simulated R
    note: str = ""                                  # what was simulated, or why nothing was
    shares: str = "one"   # one | shared | contiguous | dealt (SHARE_MODES)
    modes: dict = field(default_factory=dict)  # mode -> {"candidate", "R", "lockstep_R"}
    one_node_R: float | None = None  # one node with the same host tier (what not to exceed)
    # what the simulation was given (leaf, host tier, L1, actors, ...): a check can replay it
    simulated_with: dict = field(default_factory=dict)

    @property
    def R(self) -> float | None:
        """The R the run is expected to load: with nodes drifting apart (``Timing``) where the
        run's way of sharing was simulated so, else in lockstep."""
        mode = self.modes.get(self.shares)
        if mode and mode.get("candidate") == f"{self.plan}/{self.eviction}":
            return mode["R"]
        return self.simulated.get(f"{self.plan}/{self.eviction}")

    @property
    def room(self) -> int | None:
        """Dealt: the leaves each node keeps for streamed columns (``StripePlan.deal_room``;
        None: its default)."""
        return (self.modes.get("dealt") or {}).get("room") if self.shares == "dealt" else None

    @property
    def pace(self) -> int | None:
        """Dealt: the lead in tiles a node may run ahead of the slowest (``stealing.Pace``;
        None: not paced)."""
        return (self.modes.get("dealt") or {}).get("pace") if self.shares == "dealt" else None

    def to_dict(self) -> dict:
        out = {"plan": self.plan, "eviction": self.eviction, "simulated_R": dict(self.simulated),
               "room": self.room, "pace": self.pace,
               "baseline": "/".join(BASELINE), "note": self.note, "line": self.describe(),
               "shares": self.shares, "expected_R": self.R,
               "simulated_with": dict(self.simulated_with)}
        if self.modes:
            out["modes"] = {k: dict(v) for k, v in self.modes.items()}
        if self.one_node_R is not None:
            out["one_node_R"] = self.one_node_R
        return out

    def describe(self) -> str:
        """One line for the console: the choice, and what it beat."""
        head = f"plan: {self.plan} with {self.eviction} eviction"
        if self.shares in ("contiguous", "dealt"):
            cut = self.modes.get(self.shares, {}).get("cuts") == "stripes"
            head += f", {self.shares} shares" + (" cut at stripes" if cut else "")
            if self.pace:
                head += f" paced ({self.pace} tiles ahead at most, room {self.room})"
        if not self.simulated:
            return f"{head} ({self.note})" if self.note else head
        chosen = f"{self.plan}/{self.eviction}"
        others = ", ".join(f"{k} {r:.2f}" for k, r in self.simulated.items() if k != chosen)
        mode = self.modes.get(self.shares, {})
        if mode.get("timed"):  # the candidates were ranked in lockstep, the ways of sharing not
            line = (f"{head}: simulated R {self.R:.2f} with the nodes drifting apart (in "
                    f"lockstep {mode['lockstep_R']:.2f}" + (f", vs {others})" if others else ")"))
        else:
            line = f"{head}: simulated R {self.R:.2f}" + (f" (vs {others})" if others else "")
        other_modes = ", ".join(f"{m} {v['R']:.2f}" for m, v in self.modes.items()
                                if m != self.shares)
        if other_modes:
            line += f"; {other_modes} shares"
        if self.one_node_R is not None:
            line += f"; one node {self.one_node_R:.2f}"
        return line + (f"; {self.note}" if self.note else "")


# How a run on several nodes is shared out: ``shared`` one plan every node pulls from (no node
# frontiers), ``contiguous`` each node a contiguous run of the one plan (node frontiers), and
# with L3 ``dealt``: stripes as wide as every node's host tier, streamed in step
# (``StripePlan.deal``). One node: ``one``.
SHARE_MODES = ("one", "shared", "contiguous", "dealt")
# the timed simulations (``Timing``) of each way of sharing are averaged over this many seeds
TIMED_SEEDS = 2
# a dealt run is paced (``stealing.Pace``: no node a streamed column ahead of the slowest), and
# the planner simulates it with this many leaves of each node's host tier kept for streamed
# columns (``StripePlan.deal_room``), running the least loading: less room is a wider stripe,
# more is slack for the drift the pace leaves. A room of 1 (the column under way only) is a
# candidate since the directory's claims (``directory.DirectoryShard.lookup``): paced nodes
# asking for a column together loaded it each, which made a room of 1 drift 1.28x past its
# simulation; with claims the grid's tier-4 cells at 3 and 4 nodes ran room 1 within 1.14x
# of it, at R 2.32 where room 2 measured 2.61 (RESULTS.md "Scaling grid")
DEAL_ROOMS = (1, 2, 3)


def share_modes(nodes: int, l3: bool, frontiers: bool) -> list[str]:
    """The ways of sharing a run between ``nodes`` that its mechanism can run, preferred
    first: one plan on one node; one plan pulled by all without node frontiers; with them
    contiguous shares, and with L3 also stripes dealt across the cluster."""
    if nodes <= 1:
        return ["one"]
    if not frontiers:
        return ["shared"]
    return ["dealt", "contiguous"] if l3 else ["contiguous"]


def _deal_arg(mode: str):
    return {"one": False, "shared": False, "contiguous": "contiguous", "dealt": True,
            "stripes": "stripes"}[mode]


def candidates(plan: str, eviction: str, weighted: bool = False) -> list[tuple[str, str]]:
    """The (plan, eviction) pairs a run may use, in order of preference: ``auto`` stands for
    every registered name. Tiles cut by pair weights cannot be striped (the stripe plan wants
    one tile per leaf block); for them Z-order comes first, the order such runs always had."""
    for name, reg in ((plan, PLANS), (eviction, EVICTIONS)):
        if name != "auto" and name not in reg.factories:
            raise ValueError(f"unknown {reg.kind} {name!r}: choose auto or "
                             + ", ".join(repr(n) for n in reg.factories))
    plans = list(PLANS.factories) if plan == "auto" else [plan]
    if weighted:
        plans = sorted((p for p in plans if p != "stripe"), key=lambda p: p != "zorder") \
            or ["zorder"]
    evictions = list(EVICTIONS.factories) if eviction == "auto" else [eviction]
    return [(p, e) for p in plans for e in evictions]


def pick(loads: dict) -> tuple[str, str]:
    """The candidate with the fewest simulated loads; on a tie the first (the preferred one).
    ``loads``: (plan, eviction) -> loads, in order of preference."""
    if not loads:
        raise ValueError("no candidate plan to pick from")
    order = list(loads)
    return min(order, key=lambda c: (loads[c], order.index(c)))
