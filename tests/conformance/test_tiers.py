"""The cache-tier contract (``pairflow.engine.testing.tiers.TierTests``) run by the device tier
(``TileCache``) and the synchronous core the host tier uses (``BudgetCache``), each driven as
the engine drives it; then the rules particular to each (no Ray)."""
from __future__ import annotations

import asyncio

import pytest

from pairflow.engine.pairs.cache.eviction import LRUEviction, NextUseEviction
from pairflow.engine.pairs.cache.tiers import BudgetCache, TileCache
from pairflow.engine.testing.tiers import TierTests


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


class TestBudgetCache(TierTests):
    cache_cls = BudgetCache

    def tier(self, cache):
        return BudgetCacheTier(cache)


class TestTileCache(TierTests):
    cache_cls = BudgetCache

    def tier(self, cache):
        return TileCacheTier(cache)


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
