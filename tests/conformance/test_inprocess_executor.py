"""The L2 tier's contract (test_node_cache.py) with the in-process executor's loader instead of a
fake: ``load_items`` on the executor's thread pool, every item by value. The budget holds once
loads settle, the counters match the independent LRU model, a second request waits for the load
under way, a failed load reaches its reader and is loaded again. And the ``LocalActor`` a thread
runs: calls from many threads run one at a time on its loop, in order, and can be awaited from
another loop. No Ray is imported (nothing here needs it)."""
import asyncio
import concurrent.futures as cf
import random
import threading
import time

import pytest

from pairflow.engine.pairs.workers.executor import LocalActor, _LoadThreads
from pairflow.engine.pairs.cache.eviction import LRUEviction
from pairflow.engine.pairs.cache.node_cache import NodeCache
from pairflow.engine.pairs.cache.tiers import BudgetCache
from pairflow.engine.run.metrics import EventBuffer
from tests.conformance.test_node_cache import (Events, FakeScheduler, lru_oracle, settle,
                                               size_of)


class ItemsApp:
    """Items 0..999 whose value is ``item-<i>``, ``size_of(i)`` bytes; some fail or are slow."""

    def __init__(self):
        self.fail: set = set()
        self.delay = 0.0
        self.parsed: list[int] = []
        self.lock = threading.Lock()

    def url(self, key):
        return None

    def parse(self, key, raw):
        i = int(key.split("-")[1])
        time.sleep(self.delay)
        with self.lock:
            self.parsed.append(i)
        if i in self.fail:
            raise OSError(f"load of {key} failed")
        return f"item-{i}"

    def item_nbytes(self, item):
        return size_of(int(item.split("-")[1]))


class Spec:  # the fields of actors.NodeCacheSpec the loader reads
    def __init__(self, app):
        self.app, self.item_keys = app, [f"key-{i}" for i in range(1000)]
        self.preprocess_on, self.inline_bytes = None, 64 * 1024


@pytest.fixture
def pool():
    with cf.ThreadPoolExecutor(2) as p:
        yield p


def make(pool, budget_items, load_batch=4):
    app, sched, events = ItemsApp(), FakeScheduler(), Events()
    cache = NodeCache("node-0", Spec(app).item_keys,
                      BudgetCache(None, budget_items, LRUEviction()),
                      _LoadThreads(Spec(app), pool), sched, EventBuffer(events),
                      load_batch=load_batch, load_slots=2)
    return cache, app, events


@pytest.mark.parametrize("seed", range(4))
def test_counters_and_residents_match_the_lru_model_and_the_budget_holds(pool, seed):
    rng = random.Random(seed)
    requests = [rng.sample(range(20), rng.randint(1, 3)) for _ in range(50)]
    want, resident = lru_oracle(requests, budget_items=6)

    async def main():
        cache, app, events = make(pool, 6)
        for items in requests:
            got = await cache.get(items)
            assert got == {i: ("value", f"item-{i}") for i in items}  # by value, in-process
            await settle()
            while cache._pending:  # the thread pool's loads land on this loop
                await asyncio.sleep(0.001)
            assert len(cache.cache) <= 6
        return cache, app, await cache.stats(), events

    cache, app, stats, events = asyncio.run(main())
    assert {k: stats[k] for k in want} == want
    assert sorted(cache.cache.keys()) == sorted(resident)
    assert stats["loads"] == want["misses"] == len(app.parsed)
    tier = [e for e in events.events if e["kind"] == "tier"][-1]
    assert tier["tier"] == "L2" and tier["stats"] == {k: stats[k] for k in tier["stats"]}


def test_a_second_request_waits_for_the_load_under_way(pool):
    async def main():
        cache, app, _ = make(pool, 10)
        app.delay = 0.05
        first, second = await asyncio.gather(cache.get([3, 4]), cache.get([4, 5]))
        return cache, app, first, second

    cache, app, first, second = asyncio.run(main())
    assert sorted(app.parsed) == [3, 4, 5], "item 4 must be loaded once"
    assert first[4] == second[4] == ("value", "item-4")
    assert cache.cache.stats.misses == 3 and cache.cache.stats.hits == 1


def test_every_handle_of_a_load_resolves_to_its_own_item(pool):
    """A load's handles, read before the node cache has made its entries values, are the
    items (not the load's infos), in the batch's order; a failed load raises in each."""
    async def main():
        app = ItemsApp()
        app.delay = 0.05
        handles, infos = _LoadThreads(Spec(app), pool)([7, 3, 9])
        got = [await h for h in handles]
        app.fail = {5}
        bad, _ = _LoadThreads(Spec(app), pool)([4, 5])
        errors = []
        for h in bad:
            with pytest.raises(OSError, match="key-5"):
                await h
            errors.append(True)
        return got, [i["value"] for i in await infos], errors

    got, values, errors = asyncio.run(main())
    assert got == values == ["item-7", "item-3", "item-9"]
    assert errors == [True, True]


def test_a_failed_load_reaches_its_reader_and_is_loaded_again(pool):
    async def main():
        cache, app, _ = make(pool, 10)
        app.fail = {2}
        got = await cache.get([2])
        kind, handle = got[2]
        assert kind == "ref"  # no value: the handle carries the error to whoever reads it
        with pytest.raises(OSError, match="key-2"):
            await handle
        await settle()
        assert 2 not in cache.cache
        app.fail = set()
        assert (await cache.get([2]))[2] == ("value", "item-2")
        return app

    assert asyncio.run(main()).parsed == [2, 2]


class Counter:
    """A read-modify-write that loses updates unless its calls run one at a time."""

    def __init__(self):
        self.value = 0

    def add(self, who):
        v = self.value
        time.sleep(0)  # another thread would get the GIL here
        self.value = v + 1
        return self.value

    async def later(self, x):  # a coroutine method: awaited on the actor's loop
        await asyncio.sleep(0.001)
        return x * 2

    def loop_thread(self):
        return threading.current_thread().name


def test_a_local_actor_runs_calls_on_its_own_thread_one_at_a_time_in_order():
    """As the coordinator's Ray actor runs its synchronous methods: on one event loop thread,
    so calls from many device threads never interleave, and one caller's calls keep their
    order; a ref is awaitable from another thread's loop."""
    actor = LocalActor("counter", Counter)
    try:
        assert actor.loop_thread.remote().result(5) == "pairflow-counter"
        results: dict = {}

        def caller(who):
            results[who] = [r.result(5) for r in [actor.add.remote(who) for _ in range(50)]]
        threads = [threading.Thread(target=caller, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(v for vs in results.values() for v in vs) == list(range(1, 201))
        assert all(vs == sorted(vs) for vs in results.values())

        async def from_another_loop():
            return await asyncio.gather(*(actor.later.remote(i) for i in range(5)))
        assert asyncio.run(from_another_loop()) == [0, 2, 4, 6, 8]
    finally:
        actor.stop()
    assert not actor.thread.is_alive()
