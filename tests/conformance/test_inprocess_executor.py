"""The host tier's contract (``pairflow.engine.testing.host_tier.HostTierTests``) with the
in-process executor's loader instead of a fake: ``load_items`` on the executor's thread pool,
every item by value. And the ``LocalActor`` a thread runs: calls from many threads run one at a
time on its loop, in order, and can be awaited from another loop. No Ray is imported (nothing
here needs it)."""
import asyncio
import concurrent.futures as cf
import threading
import time

import pytest

from pairflow.engine.pairs.cache.node_cache import NodeCache
from pairflow.engine.pairs.workers.executor import LocalActor, _LoadThreads
from pairflow.engine.testing.host_tier import HostTierTests, size_of


class ItemsApp:
    """Items 0..999 whose value is ``item-<i>``, ``size_of(i)`` bytes; a key's parse sleeps the
    delay its load started with, and fails for the items in ``fail``."""

    def __init__(self):
        self.fail: set = set()
        self.delays: dict = {}
        self.parsed: list[int] = []
        self.lock = threading.Lock()

    def url(self, key):
        return None

    def parse(self, key, raw):
        i = int(key.split("-")[1])
        time.sleep(self.delays.get(key, 0.0))
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


class Probe:
    """The in-process loader as the contract drives it: which loads started, in order, with
    what delay, and how many ran at once."""

    def __init__(self, pool):
        self.app = ItemsApp()
        self.inner = _LoadThreads(Spec(self.app), pool)
        self.loaded: list[int] = []
        self.delay = 0.0
        self.under_way = self.most = 0
        self.lock = threading.Lock()

    @property
    def fail(self):
        return self.app.fail

    @fail.setter
    def fail(self, items):
        self.app.fail = set(items)

    def __call__(self, batch):
        self.loaded += batch
        for i in batch:
            self.app.delays[f"key-{i}"] = self.delay
        with self.lock:
            self.under_way += 1
            self.most = max(self.most, self.under_way)
        handles, infos = self.inner(batch)
        infos.future.add_done_callback(self._done)
        return handles, infos

    def _done(self, _):
        with self.lock:
            self.under_way -= 1


@pytest.fixture
def pool():
    with cf.ThreadPoolExecutor(2) as p:
        yield p


class TestNodeCacheLoadThreads(HostTierTests):
    tier_cls = NodeCache

    @pytest.fixture(autouse=True)
    def _pool_for_loads(self, pool):
        self._pool = pool

    def make_loads(self):
        probe = Probe(self._pool)
        return probe, probe

    def answer(self, item):
        return ("value", f"item-{item}")  # in-process: every item by value

    async def check_failed(self, answer):
        kind, handle = answer
        assert kind == "ref"  # no value: the handle carries the error to whoever reads it
        with pytest.raises(OSError, match="key-2"):
            await handle

    def raw_bytes(self, item):
        return 0  # the items have no URL: nothing is read


def test_every_handle_of_a_load_resolves_to_its_own_item(pool):
    """A load's handles, read before the node cache has made its entries values, are the
    items (not the load's infos), in the batch's order; a failed load raises in each."""
    async def main():
        app = ItemsApp()
        app.delays = {f"key-{i}": 0.05 for i in (7, 3, 9)}
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
