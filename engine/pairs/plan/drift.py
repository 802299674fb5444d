"""What a tile costs an actor, for the simulator's nodes that run apart (``simulate``).

Why its own home: the costs (an L3 ask, a take, how much a node's speed wanders) are
measurements of a machine, not rules of the policy; the simulator and the planner take them as
given (``sizing.plan_run`` fills the measured stage costs in).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass


# What L3 costs an actor on this project's machine (4 one-CPU Ray nodes on 2 shared cores,
# issue 57's runs): an L2 miss asks the directory (a call to a shard on another node, once per
# tile with misses), and an item taken from a peer is a call to it and a pull of the object.
L3_ASK_S = 0.010
L3_TAKE_S = 0.008
# How much one tile's time varies on an actor (its coefficient of variation): a node's share of
# the cores, other work, Ray's own threads (issue 57's runs); successive tiles' times are
# correlated (``JITTER_RHO``).
JITTER = 0.8
JITTER_RHO = 0.5


@dataclass(frozen=True)
class Timing:
    """What a tile costs an actor, so nodes may run apart as they do on a cluster.

    Without it the simulator runs the actors in lockstep (one tile each in turn), which is
    what a run of equal nodes sharing nothing does; with L3 it is not. A node that takes an
    item from a peer pays a lookup, a call and a pull, one that loads pays a parse, and every
    node's speed wanders (``jitter``): the nodes drift apart, and a node more than its room of
    streamed columns behind the one that loaded a column finds it evicted there and loads it
    again (issue 57; measured: RESULTS.md, "Scaling grid"). A paced deal (``stealing.Pace``)
    with a column of slack (2 leaves of room) stays within 10 % of lockstep for any jitter and
    a take no dearer than a load (a drawn test); with a room of 1 the costs decide (takes much
    dearer than loads: up to 1.4x), which the planner's timed simulation of each room weighs.
    The grid's paced runs came within 1.14x of their simulation once the directory's claims
    stopped nodes asking together from each loading a column."""

    t_tile: float = 0.02        # a tile's fixed cost (hand-out, write: config.tile_overhead_s)
    t_pair: float = 1e-4        # compare, per pair
    t_load: float = 1e-3        # a load from storage, per item (read and parse)
    t_ask: float = L3_ASK_S     # an L3 lookup, per tile with L2 misses
    t_take: float = L3_TAKE_S   # an item taken from a peer
    jitter: float = JITTER      # the coefficient of variation of a tile's time on an actor
    rho: float = JITTER_RHO     # how much of one tile's deviation the next keeps
    seed: int = 0

    def noise(self, n_actors: int):
        """Each actor's next speed factor (mean 1): correlated log-normal draws."""
        rng = random.Random(self.seed)
        sigma = math.sqrt(math.log(1.0 + self.jitter ** 2))
        z = [rng.gauss(0.0, 1.0) for _ in range(n_actors)]
        fresh = math.sqrt(max(0.0, 1.0 - self.rho ** 2))

        def draw(a: int) -> float:
            z[a] = self.rho * z[a] + fresh * rng.gauss(0.0, 1.0)
            return math.exp(sigma * z[a] - sigma * sigma / 2)
        return draw

    def tile_s(self, pairs: int, loads: int, asks: int, takes: int) -> float:
        return self.t_tile + pairs * self.t_pair + loads * self.t_load + asks * self.t_ask + \
            takes * self.t_take
