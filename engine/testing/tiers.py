"""The cache-tier contract as a base class: every tier, under every eviction rule (no Ray).

Every tier counts the same way (the run's R and the dashboard's hit rates add tiers together),
so one trace of tiles, each pinned while in flight as a device actor holds it, must leave every
tier with the same hits, misses, bytes loaded, evictions and resident entries as the
brute-force model here, written from the rules alone: a budget of bytes and/or items that holds
whenever nothing is pinned, pinned entries never evicted, and victims chosen by the eviction
rule (least recently used first; or latest next planned use first, unneeded items before all,
ties by LRU).

A tier keeps its entries in a budgeted core (``cache_cls``: ``BudgetCache``'s interface:
``keys()`` least recently used first, ``nbytes``, ``len``, ``pins(key)``, ``stats``,
``budget_items``, ``budget_bytes``, and an ``eviction`` rule object). A subclass sets
``cache_cls`` and gives ``tier(cache)``: an object with ``acquire(keys, sizes)`` and
``release(keys)`` that drives the tier over that core as the engine drives it.
"""
from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from pairflow.engine.pairs.cache.eviction import AdvisedEviction, LRUEviction, NextUseEviction

__all__ = ["TierTests", "ModelCache", "Clock", "make_trace", "BUDGETS"]

INF = math.inf

#: budgets the trace runs under: of items, of bytes, of both
BUDGETS = {"items": dict(budget_items=5), "bytes": dict(budget_bytes=40),
           "bytes-and-items": dict(budget_bytes=55, budget_items=6)}


class ModelCache:
    """Entries as plain dicts; each eviction scans every candidate for the rule's worst one."""

    def __init__(self, budget_bytes, budget_items, rule, next_use):
        self.budget_bytes, self.budget_items = budget_bytes, budget_items
        self.rule, self.next_use = rule, next_use
        self.size, self.pins, self.last_used = {}, {}, {}
        self.clock = 0
        self.hits = self.misses = self.bytes_in = self.evictions = 0

    def over(self):
        return ((self.budget_items is not None and len(self.size) > self.budget_items)
                or (self.budget_bytes is not None and sum(self.size.values()) > self.budget_bytes))

    def worst(self, candidates):
        if self.rule == "lru":
            return min(candidates, key=lambda k: self.last_used[k])
        # latest next use first; among equal next uses, the least recently used
        latest = max(self.next_use(k) for k in candidates)
        return min((k for k in candidates if self.next_use(k) == latest),
                   key=lambda k: self.last_used[k])

    def evict(self):
        while self.over():
            candidates = [k for k in self.size if self.pins[k] == 0]
            if not candidates:
                return  # the budget is soft only while pinned entries alone exceed it
            victim = self.worst(candidates)
            del self.size[victim], self.pins[victim], self.last_used[victim]
            self.evictions += 1

    def acquire(self, keys, sizes):
        for k in keys:
            self.clock += 1
            if k in self.size:
                self.hits += 1
            else:
                self.misses += 1
                self.bytes_in += sizes[k]
                self.size[k], self.pins[k] = sizes[k], 0
            self.pins[k] += 1
            self.last_used[k] = self.clock
        self.evict()

    def release(self, keys):
        for k in keys:
            self.pins[k] -= 1
        self.evict()

    def lru_order(self):
        return sorted(self.size, key=lambda k: self.last_used[k])


def make_trace(seed, n_keys=14, n_tiles=80):
    """Tiles of 2 or 3 distinct keys (a pair, or a pair and a shared item), keys of uneven size."""
    rng = np.random.default_rng(seed)
    sizes = {k: int(s) for k, s in enumerate(rng.integers(1, 12, n_keys))}
    tiles = [[int(k) for k in rng.choice(n_keys, size=int(rng.integers(2, 4)), replace=False)]
             for _ in range(n_tiles)]
    return sizes, tiles


class Clock:
    """The plan position a next-use rule sees: the tile being acquired or the one after."""

    def __init__(self, tiles):
        self.tiles, self.now = tiles, 0

    def next_use_scan(self, key):
        """Brute force: walk the rest of the plan."""
        for pos in range(self.now + 1, len(self.tiles)):
            if key in self.tiles[pos]:
                return pos
        return INF

    def advice(self):
        """What the engine's planner gives a next-use rule: a table, looked up."""
        positions: dict = {}
        for pos, keys in enumerate(self.tiles):
            for k in keys:
                positions.setdefault(k, []).append(pos)

        def lookup(keys):
            out = {}
            for k in keys:
                later = positions.get(k, [])
                i = bisect.bisect_right(later, self.now)
                out[k] = later[i] if i < len(later) else INF
            return out
        return lookup


def eviction(rule, clock):
    """``advised`` is what a device actor runs: next-use advice fetched before the tile (here
    for every resident key, so it must evict exactly as next-use does)."""
    if rule == "lru":
        return LRUEviction()
    return NextUseEviction(clock.advice()) if rule == "next_use" else AdvisedEviction()


class TierTests:
    """Subclass, set ``cache_cls`` and give ``tier(cache)``; see the module's docstring."""

    cache_cls: type

    def tier(self, cache):
        raise NotImplementedError("a subclass drives its tier over ``cache``")

    @pytest.mark.parametrize("seed", [0, 1, 2])
    @pytest.mark.parametrize("budget", sorted(BUDGETS))
    @pytest.mark.parametrize("rule", ["lru", "next_use", "advised"])
    def test_a_tier_counts_evicts_and_keeps_its_budget_as_the_model(self, rule, budget, seed):
        sizes, tiles = make_trace(seed)
        clock = Clock(tiles)
        cache = self.cache_cls(**BUDGETS[budget], eviction=eviction(rule, clock))
        tier = self.tier(cache)
        model = ModelCache(BUDGETS[budget].get("budget_bytes"),
                           BUDGETS[budget].get("budget_items"),
                           "lru" if rule == "lru" else "next_use", clock.next_use_scan)
        in_flight: list = []  # two tiles pinned at once, as an actor with in_flight=2 holds them
        evictions_seen = 0
        for pos, keys in enumerate(tiles):
            clock.now = pos
            if rule == "advised":
                cache.eviction.advice = clock.advice()(set(sizes))
            tier.acquire(keys, sizes)
            model.acquire(keys, sizes)
            in_flight.append(keys)
            pinned = {k for t in in_flight for k in t}
            assert pinned <= set(cache.keys()), "a pinned entry was evicted"
            if len(in_flight) == 2:
                tier.release(in_flight[0])
                model.release(in_flight.pop(0))
            assert cache.keys() == model.lru_order(), pos
            assert cache.nbytes == sum(model.size.values())
            stats = cache.stats
            assert (stats.hits, stats.misses, stats.bytes_in, stats.evictions) == \
                (model.hits, model.misses, model.bytes_in, model.evictions), pos
            assert stats.evictions >= evictions_seen
            evictions_seen = stats.evictions
            unpinned = [k for k in cache.keys() if cache.pins(k) == 0]
            if unpinned:  # over budget only while the pinned entries alone fill it
                assert cache.budget_items is None or len(cache) <= cache.budget_items
                assert cache.budget_bytes is None or cache.nbytes <= cache.budget_bytes
        for keys in in_flight:
            tier.release(keys)
            model.release(keys)
        assert cache.keys() == model.lru_order()
        assert cache.budget_items is None or len(cache) <= cache.budget_items
        assert cache.budget_bytes is None or cache.nbytes <= cache.budget_bytes
        assert model.evictions > 0 and model.hits > 0, "the trace must exercise eviction and reuse"

    def test_pinned_entries_alone_may_exceed_the_budget_then_release_shrinks(self):
        cache = self.cache_cls(budget_items=2, budget_bytes=100)
        tier = self.tier(cache)
        sizes = {1: 30, 2: 30, 3: 60}
        tier.acquire([1, 2, 3], sizes)  # one tile needs more than the budget: it gets it all
        assert sorted(cache.keys()) == [1, 2, 3] and cache.stats.evictions == 0
        tier.release([1, 2, 3])
        assert len(cache) <= 2 and cache.nbytes <= 100
        assert cache.keys() == [2, 3], "the least recently used goes until both budgets hold"
