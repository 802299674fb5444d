"""The host tier's contract (L2, ``pairflow.engine.pairs.cache.node_cache.NodeCache``) as a base
class, for each loader it is given (a load task on Ray, threads in-process, a fake), without Ray.

The budget is never exceeded once loads settle; an item being loaded is never evicted; hits,
misses, bytes and evictions are counted as the other tiers count them (checked against the
independent LRU model ``lru_oracle``) and reach the metrics without a later request; a second
request for an item being loaded waits for that one load; a failed load reaches its reader and
is loaded again; next-use advice is fetched before an insert evicts; an item evicted right
after its load still comes back; the read-ahead list fills idle load slots in its order, each
item once, and nothing is loaded without it but what is asked for.

Items are 0..999 (keys ``key-<i>``), item ``i`` is ``f"item-{i}"`` of ``size_of(i)`` bytes. A
subclass sets ``tier_cls`` and gives ``make_loads()``: the loader and a probe whose ``loaded``
lists the items loaded in order, whose ``delay`` (seconds, read when a load starts) and
``fail`` (items whose load fails) may be set, and whose ``most`` is the most loads under way at
once; ``answer(i)``: what ``get`` gives for item ``i`` loaded; ``check_failed(answer)``
(a coroutine): that a failed load's answer carries its error; ``raw_bytes(i)``: the bytes a
load of ``i`` reads.
"""
from __future__ import annotations

import asyncio
import random
from collections import OrderedDict

import pytest

from pairflow.engine.pairs.cache.eviction import AdvisedEviction, LRUEviction
from pairflow.engine.pairs.cache.tiers import BudgetCache
from pairflow.engine.run.metrics import EventBuffer, MetricsState

__all__ = ["HostTierTests", "INLINE", "size_of", "lru_oracle", "Events", "FakeScheduler"]

INLINE = 50  # items of at most this many bytes come back by value where the loader can choose


def size_of(item: int) -> int:
    return 10 + (item * 37) % 90  # 10..99 bytes, some inline, some by handle


class FakeScheduler:
    """The scheduler's side: next-use advice (``advice``: item -> position) and what L2 holds."""

    def __init__(self, advice=None):
        self.advice = advice or {}
        self.held: dict[str, list] = {}
        self.asked: list[list] = []

    async def next_uses(self, items, node=None):
        self.asked.append(list(items))
        return {i: self.advice.get(i, float("inf")) for i in items}

    def l2_update(self, node, items):
        self.held[node] = list(items)


class Events:
    """The metrics' end of an ``EventBuffer``: every event recorded."""

    def __init__(self):
        self.events = []

    def record(self, batch):
        self.events.extend(batch)


def lru_oracle(requests, budget_items):
    """LRU over an item budget, written independently: a request refreshes its hits, then
    inserts its misses (in request order); the misses are pinned until their load lands, every
    other entry is evictable, least recently used first."""
    resident: OrderedDict = OrderedDict()
    hits = misses = evictions = bytes_in = 0
    for items in requests:
        missing = []
        for i in items:
            if i in resident:
                hits += 1
                resident.move_to_end(i)
            else:
                misses += 1
                missing.append(i)
        for i in missing:
            resident[i] = True
            bytes_in += size_of(i)
        for victim in [k for k in resident if k not in missing]:
            if len(resident) <= budget_items:
                break
            del resident[victim]
            evictions += 1
    return {"hits": hits, "misses": misses, "evictions": evictions, "bytes_in": bytes_in}, \
        list(resident)


class HostTierTests:
    """Subclass, set ``tier_cls`` and give the hooks above; see the module's docstring."""

    tier_cls: type

    def make_loads(self):
        raise NotImplementedError("a subclass gives (load, probe)")

    def answer(self, item):
        raise NotImplementedError

    async def check_failed(self, answer):
        raise NotImplementedError

    def raw_bytes(self, item) -> int:
        raise NotImplementedError

    def make(self, budget_items=None, budget_bytes=None, eviction=None, load_batch=4,
             advice=None, read_ahead=None, interval=None, n_items=1000):
        load, probe = self.make_loads()
        sched, events = FakeScheduler(advice), Events()
        buffer = EventBuffer(events) if interval is None else EventBuffer(events, interval)
        cache = self.tier_cls("node-0", [f"key-{i}" for i in range(n_items)],
                              BudgetCache(budget_bytes, budget_items, eviction or LRUEviction()),
                              load, sched, buffer, load_batch=load_batch, load_slots=2,
                              read_ahead=read_ahead)
        return cache, probe, sched, events

    async def settle(self, cache):
        """Until the loads under way are accounted."""
        for _ in range(5):
            await asyncio.sleep(0.001)
        for _ in range(5000):
            if not cache._pending:
                break
            await asyncio.sleep(0.001)

    @pytest.mark.parametrize("seed", range(6))
    @pytest.mark.parametrize("budget", [("items", 7), ("bytes", 300)])
    def test_budget_never_exceeded_once_loads_settle(self, seed, budget):
        kind, limit = budget
        kw = {"budget_items": limit} if kind == "items" else {"budget_bytes": limit}
        rng = random.Random(seed)

        async def main():
            cache, _, _, _ = self.make(**kw)
            for _ in range(40):
                items = rng.sample(range(30), rng.randint(1, 4))
                got = await cache.get(items)
                assert set(got) == set(items)
                await self.settle(cache)
                assert len(cache.cache) <= limit if kind == "items" else \
                    cache.cache.nbytes <= limit
        asyncio.run(main())

    def test_an_item_being_loaded_is_never_evicted(self):
        async def main():
            cache, probe, _, _ = self.make(budget_items=2)
            probe.delay = 0.5  # far longer than the loads below, even on a busy machine
            slow = asyncio.ensure_future(cache.get([0]))
            await asyncio.sleep(0)  # its load is under way: a pinned placeholder
            probe.delay = 0.0
            for i in range(1, 8):  # fill and overflow the budget around it
                await cache.get([i])
                await asyncio.sleep(0.005)
                assert not slow.done(), "the slow load must still be under way"
                assert 0 in cache.cache, "a pinned entry was evicted"
            got = await slow
            assert got[0] == self.answer(0)
            await self.settle(cache)
            assert len(cache.cache) <= 2
        asyncio.run(main())

    @pytest.mark.parametrize("seed", range(5))
    def test_counters_match_an_independent_lru_model(self, seed):
        rng = random.Random(seed)
        requests = [rng.sample(range(20), rng.randint(1, 3)) for _ in range(60)]
        want, resident = lru_oracle(requests, budget_items=6)

        async def main():
            cache, probe, _, events = self.make(budget_items=6)
            for items in requests:
                got = await cache.get(items)
                assert got == {i: self.answer(i) for i in items}
                await self.settle(cache)
                assert len(cache.cache) <= 6
            return cache, probe, await cache.stats(), events

        cache, probe, stats, events = asyncio.run(main())
        assert {k: stats[k] for k in want} == want
        assert sorted(cache.cache.keys()) == sorted(resident)
        assert stats["loads"] == want["misses"] == len(probe.loaded)
        assert stats["bytes"] == sum(self.raw_bytes(i) for i in probe.loaded)
        # the metrics see the same counters under the tier's name, as L1's are seen
        tier = [e for e in events.events if e["kind"] == "tier"][-1]
        assert tier["tier"] == "L2" and tier["stats"] == {k: stats[k] for k in tier["stats"]}

    def test_a_second_request_waits_for_the_load_under_way(self):
        async def main():
            cache, probe, _, _ = self.make(budget_items=10)
            probe.delay = 0.05
            first, second = await asyncio.gather(cache.get([3, 4]), cache.get([4, 5]))
            return cache, probe, first, second

        cache, probe, first, second = asyncio.run(main())
        assert sorted(probe.loaded) == [3, 4, 5], "item 4 must be loaded once"
        assert first[4] == second[4] == self.answer(4)
        assert first[3] == self.answer(3)
        assert cache.cache.stats.misses == 3 and cache.cache.stats.hits == 1

    def test_a_failed_load_reaches_its_reader_and_is_loaded_again(self):
        async def main():
            cache, probe, _, _ = self.make(budget_items=10)
            probe.fail = {2}
            got = await cache.get([2])
            await self.check_failed(got[2])
            await self.settle(cache)
            assert 2 not in cache.cache
            probe.fail = set()
            assert (await cache.get([2]))[2] == self.answer(2)
            return probe

        assert asyncio.run(main()).loaded == [2, 2]

    def test_next_use_advice_is_fetched_before_inserting_evicts(self):
        """With the scheduler's advice, the item needed latest (or never) goes first."""
        async def main():
            advice = {0: 5.0, 1: float("inf"), 2: 1.0, 3: 0.0}
            cache, _, sched, _ = self.make(budget_items=3, eviction=AdvisedEviction(),
                                           advice=advice)
            await cache.get([0, 1, 2])
            await self.settle(cache)
            sched.asked.clear()
            await cache.get([3])
            await self.settle(cache)
            return cache, sched

        cache, sched = asyncio.run(main())
        assert sched.asked and 3 in sched.asked[0]
        assert sorted(cache.cache.keys()) == [0, 2, 3]
        assert sched.held["node-0"] == cache.cache.keys()

    def test_loads_reach_the_metrics_without_a_later_request(self):
        """A run that loads every item in its first moments and then asks its host tier for
        nothing more: the loads must still reach the metrics while it runs (they waited in the
        event buffer for a next request, and the progress line showed R = 0.00 to the end)."""
        async def main():
            cache, _, _, events = self.make(budget_items=16, interval=0.05, n_items=16)
            await cache.get(list(range(16)))
            await asyncio.sleep(0.5)  # ten intervals, and no other request
            state = MetricsState(n_items=16, tiles_total=1, pairs_total=1, bound_R=1.0)
            state.add(events.events)
            return state.snapshot()

        snap = asyncio.run(main())
        assert snap["loads"] == 16 and snap["R"] == 1.0

    def test_an_item_evicted_right_after_its_load_still_comes_back(self):
        """A host tier of one item asked for two small ones: the second load's accounting evicts
        the first before the request reads them back. The request must still get both (on Ray
        not the load's handle, whose value is the list of infos: a device actor compared those
        dicts, "int() argument must be ... not 'dict'")."""
        async def main():
            cache, _, _, _ = self.make(budget_items=1, load_batch=1)
            small = [i for i in range(40) if size_of(i) <= INLINE][:2]
            got = await cache.get(small)
            return small, got, len(cache.cache)

        small, got, resident = asyncio.run(main())
        assert resident <= 1
        assert got == {i: self.answer(i) for i in small}

    def test_read_ahead_fills_idle_load_slots_in_order_and_loads_each_item_once(self):
        """What is asked for is loaded at once; the slots it leaves idle (2 here) load the
        read-ahead list in its order; nothing is loaded twice and no more than 2 loads run at a
        time."""
        ahead = [5, 3, 9, 1, 7, 2]

        async def main():
            cache, probe, _, _ = self.make(budget_items=20, load_batch=1, read_ahead=ahead,
                                           n_items=20)
            probe.delay = 0.01
            got = await cache.get([3])
            for _ in range(50):
                await asyncio.sleep(0.01)
            again = await cache.get([9, 2])
            return cache, probe, got, again

        cache, probe, got, again = asyncio.run(main())
        assert probe.loaded == [3, 5, 9, 1, 7, 2]  # the request first
        assert probe.most <= 2
        assert got[3] == self.answer(3) and cache.loads == 6
        assert again == {9: self.answer(9), 2: self.answer(2)}
        assert cache.cache.stats.hits == 2

    def test_without_a_read_ahead_list_only_what_is_asked_for_is_loaded(self):
        async def main():
            cache, probe, _, _ = self.make(budget_items=10)
            probe.delay = 0.01
            await cache.get([4])
            for _ in range(10):
                await asyncio.sleep(0.01)
            return probe

        assert asyncio.run(main()).loaded == [4]
