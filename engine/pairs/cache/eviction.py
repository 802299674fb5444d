"""Which item a cache tier evicts: the eviction rules every tier takes, free of Ray.

``LRUEviction`` is the baseline; ``NextUseEviction`` evicts by the plan position of an item's
next use (``plan.policy.TilePolicy.next_uses``; an item no pending tile needs goes first), which
the engine can do because it knows every future pair; ``AdvisedEviction`` is next-use eviction
inside an actor, from advice the scheduler sent (an actor cannot block on asking). One registry
(``EVICTIONS``), so a config name means one thing. Plain classes over keys, so that the
simulator (``plan/simulate.py``) and the Ray actors share exactly the same decisions.
"""
from __future__ import annotations

import math
from typing import Callable

from ...run.registry import Registry

INF = math.inf


class LRUEviction:
    """Evict the least recently used unpinned entry: the baseline."""

    name = "lru"

    def victims(self, candidates_lru_first: list) -> list:
        return list(candidates_lru_first)


class NextUseEviction:
    """Evict by next planned use, latest first; an item no pending tile needs goes first.

    ``next_use`` maps keys to plan positions (``TilePolicy.next_uses``). Ties fall back to LRU.
    """

    name = "next_use"

    def __init__(self, next_use: Callable[[list], dict]):
        self.next_use = next_use

    def victims(self, candidates_lru_first: list) -> list:
        if not candidates_lru_first:
            return []
        uses = self.next_use(candidates_lru_first)
        rank = {k: i for i, k in enumerate(candidates_lru_first)}
        return sorted(candidates_lru_first, key=lambda k: (-uses.get(k, INF), rank[k]))


class AdvisedEviction(NextUseEviction):
    """Next-use eviction from advice fetched just before evicting (an actor cannot block).
    ``unknown``: the next use assumed for an item without advice (INF: evicted first; -1:
    kept, for a cache that asks advice only about its least recently used items)."""

    def __init__(self, unknown: float = INF):
        self.advice: dict = {}
        super().__init__(lambda keys: {k: self.advice.get(k, unknown) for k in keys})


# with ``next_use`` (the simulator, beside its TilePolicy) next-use eviction asks the policy
# itself; without (an actor) it evicts by the advice last received
EVICTIONS = Registry("eviction", {
    "next_use": lambda next_use=None, unknown=INF:
        NextUseEviction(next_use) if next_use is not None else AdvisedEviction(unknown),
    "lru": lambda next_use=None, unknown=INF: LRUEviction(),
})


def make_eviction(name: str, next_use: Callable[[list], dict] | None = None,
                  unknown: float = INF):
    return EVICTIONS.make(name, next_use=next_use, unknown=unknown)
