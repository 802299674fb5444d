"""The cache-tier contract, run by every tier under every eviction rule (no Ray).

Every tier counts the same way (the run's R and the dashboard's hit rates add tiers together),
so one trace of tiles, each pinned while in flight as a device actor holds it, must leave every
tier with the same hits, misses, bytes loaded, evictions and resident entries as a brute-force
model written here from the rules alone: a budget of bytes and/or items that holds whenever
nothing is pinned, pinned entries never evicted, and victims chosen by the eviction rule (least
recently used first; or latest next planned use first, unneeded items before all, ties by LRU).
"""
from __future__ import annotations

import asyncio
import bisect
import math

import numpy as np
import pytest

from pairflow.engine.pairs.policy import AdvisedEviction, LRUEviction, NextUseEviction
from pairflow.engine.pairs.tiers import BudgetCache, TileCache

INF = math.inf


# -- the brute-force model ----------------------------------------------------------------------

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


# -- the tiers, each driven the way the engine drives it ----------------------------------------

class BudgetCacheTier:
    """The synchronous core as the host tier (NodeCache) uses it: look up each key of a tile,
    insert the missing ones pinned without evicting, then shrink once for the whole tile, so no
    key of the tile is evicted before it is pinned."""

    def __init__(self, cache: BudgetCache):
        self.cache = cache

    def acquire(self, keys, sizes):
        for k in keys:
            if self.cache.lookup(k) is None:
                self.cache.put(k, f"item-{k}", sizes[k], pin=True, shrink=False)
            else:
                self.cache.pin(k)
        self.cache.shrink()

    def release(self, keys):
        for k in keys:
            self.cache.unpin(k)
        self.cache.shrink()


class TileCacheTier:
    """The asynchronous device tier: one transaction per tile, loads through the loader."""

    def __init__(self, cache: BudgetCache):
        self.loop = asyncio.new_event_loop()
        self.sizes = {}

        async def loader(keys):
            await asyncio.sleep(0)
            return {k: f"item-{k}" for k in keys}

        self.tile_cache = TileCache(cache, loader, lambda value: self.sizes[value])
        self.cache = cache

    def acquire(self, keys, sizes):
        self.sizes.update({f"item-{k}": s for k, s in sizes.items()})
        got = self.loop.run_until_complete(self.tile_cache.acquire(keys))
        assert got == {k: f"item-{k}" for k in keys}

    def release(self, keys):
        self.tile_cache.release(keys)


TIERS = {"BudgetCache": BudgetCacheTier, "TileCache": TileCacheTier}
BUDGETS = {"items": dict(budget_items=5), "bytes": dict(budget_bytes=40),
           "bytes-and-items": dict(budget_bytes=55, budget_items=6)}


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
        """What the engine's TilePolicy gives a NextUseEviction: a table, looked up."""
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


def _eviction(rule, clock):
    """``advised`` is what a device actor runs: next-use advice fetched before the tile (here
    for every resident key, so it must evict exactly as next-use does)."""
    if rule == "lru":
        return LRUEviction()
    return NextUseEviction(clock.advice()) if rule == "next_use" else AdvisedEviction()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("budget", sorted(BUDGETS))
@pytest.mark.parametrize("rule", ["lru", "next_use", "advised"])
@pytest.mark.parametrize("tier_name", sorted(TIERS))
def test_a_tier_counts_evicts_and_keeps_its_budget_as_the_model(tier_name, rule, budget, seed):
    sizes, tiles = make_trace(seed)
    clock = Clock(tiles)
    cache = BudgetCache(**BUDGETS[budget], eviction=_eviction(rule, clock))
    tier = TIERS[tier_name](cache)
    model = ModelCache(BUDGETS[budget].get("budget_bytes"), BUDGETS[budget].get("budget_items"),
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


@pytest.mark.parametrize("tier_name", sorted(TIERS))
def test_pinned_entries_alone_may_exceed_the_budget_then_release_shrinks(tier_name):
    cache = BudgetCache(budget_items=2, budget_bytes=100)
    tier = TIERS[tier_name](cache)
    sizes = {1: 30, 2: 30, 3: 60}
    tier.acquire([1, 2, 3], sizes)  # one tile needs more than the budget: it still gets it all
    assert sorted(cache.keys()) == [1, 2, 3] and cache.stats.evictions == 0
    tier.release([1, 2, 3])
    assert len(cache) <= 2 and cache.nbytes <= 100
    assert cache.keys() == [2, 3], "the least recently used goes until both budgets hold"


# -- rules of the synchronous core (BudgetCache) ----------------------------------------------

def test_lru_eviction_under_item_budget():
    c = BudgetCache(budget_items=2)
    c.put("a", 1, 10)
    c.put("b", 2, 10)
    c.lookup("a")
    assert c.put("c", 3, 10) == ["b"]
    assert c.keys() == ["a", "c"]
    assert (c.stats.hits, c.stats.misses, c.stats.evictions) == (1, 0, 1)


def test_byte_budget_and_pins():
    c = BudgetCache(budget_bytes=25)
    c.put("a", 1, 10, pin=True)
    c.put("b", 2, 10)
    evicted = c.put("c", 3, 10)
    assert evicted == ["b"], "pinned entries are never evicted"
    c.unpin("a")
    assert c.put("d", 4, 10) == ["a"]
    with pytest.raises(KeyError):
        c.unpin("d")


def test_next_use_eviction_prefers_items_never_used_again():
    uses = {"a": 5, "b": float("inf"), "c": 1}
    c = BudgetCache(budget_items=2, eviction=NextUseEviction(lambda ks: {k: uses[k] for k in ks}))
    c.put("a", 1, 1)
    c.put("b", 1, 1)
    c.put("c", 1, 1)
    assert set(c.keys()) == {"a", "c"}, "b is needed by no pending tile"
    uses["d"] = 3
    c.put("d", 1, 1)
    assert set(c.keys()) == {"c", "d"}, "a's next use (5) is the latest"


def test_deferred_shrink_evicts_once_for_a_batch():
    """Inserts with shrink=False then one shrink(): the same victims as shrinking per insert,
    but the policy ranks the candidates once."""
    calls = []

    class Counting(LRUEviction):
        def victims(self, candidates):
            calls.append(len(candidates))
            return super().victims(candidates)

    c = BudgetCache(budget_items=3, eviction=Counting())
    for k in "abc":
        c.put(k, k, 1)
    for k in "def":
        assert c.put(k, k, 1, shrink=False) == []
    assert len(c) == 6 and calls == []
    assert c.shrink() == ["a", "b", "c"] and c.keys() == ["d", "e", "f"]
    assert calls == [6] and c.stats.evictions == 3


def test_oldest_lists_unpinned_keys_least_recent_first():
    c = BudgetCache()
    for k in "abcd":
        c.put(k, k, 1)
    c.pin("a")
    c.lookup("b")  # b becomes the most recent
    assert c.oldest(2) == ["c", "d"] and c.oldest(10) == ["c", "d", "b"]


# -- rules of the asynchronous front (TileCache): one load per key, one step per tile ---------

def run(coro):
    return asyncio.new_event_loop().run_until_complete(coro)


def test_concurrent_requests_share_one_load():
    loads = []

    async def loader(keys):
        loads.append(list(keys))
        await asyncio.sleep(0.05)
        return {k: k * 10 for k in keys}

    async def main():
        tc = TileCache(BudgetCache(budget_items=10), loader, lambda v: 1)
        r1, r2 = await asyncio.gather(tc.acquire([1, 2]), tc.acquire([2, 3]))
        assert r1 == {1: 10, 2: 20} and r2 == {2: 20, 3: 30}
        tc.release([1, 2])
        tc.release([2, 3])
        assert tc.stats.waits == 1
        return tc

    run(main())
    assert sorted(k for batch in loads for k in batch) == [1, 2, 3], "key 2 loaded once"


def test_pinned_entries_survive_pressure_and_release_frees_them():
    async def loader(keys):
        await asyncio.sleep(0.01)
        return {k: k for k in keys}

    async def main():
        tc = TileCache(BudgetCache(budget_items=2), loader, lambda v: 1)
        await tc.acquire([1, 2])
        got = await tc.acquire([3])  # over budget while 1 and 2 are pinned: budget is soft
        assert got == {3: 3}
        assert set(tc.resident()) == {1, 2, 3}
        tc.release([1, 2])
        tc.release([3])
        assert len(tc.resident()) == 2
    run(main())


def test_a_tile_acquires_all_keys_in_one_step():
    """Two tiles racing for overlapping keys never interleave half-acquired states."""
    order = []

    async def loader(keys):
        order.append(tuple(keys))
        await asyncio.sleep(0)
        return {k: k for k in keys}

    async def main():
        tc = TileCache(BudgetCache(budget_items=100), loader, lambda v: 1)
        await asyncio.gather(tc.acquire([1, 2, 3]), tc.acquire([3, 4, 5]))
        return tc

    run(main())
    assert order == [(1, 2, 3), (4, 5)], "the second tile joins key 3's load and loads the rest"


def test_a_failed_load_reaches_every_waiter_and_leaves_nothing_behind():
    async def loader(keys):
        await asyncio.sleep(0.01)
        raise ValueError("bad file")

    async def main():
        tc = TileCache(BudgetCache(budget_items=4), loader, lambda v: 1)
        res = await asyncio.gather(tc.acquire([1]), tc.acquire([1]), return_exceptions=True)
        assert all(isinstance(r, ValueError) for r in res)
        assert tc.resident() == [] and len(tc.cache) == 0
    run(main())


@pytest.mark.parametrize("fault", ["sizeof raises", "a key missing"])
def test_a_failure_after_the_loader_returns_reaches_every_waiter_at_once(fault):
    """The loader returned, but a value cannot be sized or is missing: every waiter fails at
    once instead of waiting for ever (a device actor waited until its tile's deadline)."""
    async def loader(keys):
        await asyncio.sleep(0.01)
        values = {k: k for k in keys}
        if fault == "a key missing":
            values.pop(keys[-1])
        return values

    def sizeof(value):
        if fault == "sizeof raises" and value == 2:
            raise TypeError("cannot size item 2")
        return 1

    async def main():
        tc = TileCache(BudgetCache(budget_items=4), loader, sizeof)
        res = await asyncio.wait_for(
            asyncio.gather(tc.acquire([1, 2]), tc.acquire([2]), return_exceptions=True), 5)
        assert all(isinstance(r, (TypeError, LookupError)) for r in res), res
        assert tc.resident() == [] and len(tc.cache) == 0
    run(main())
