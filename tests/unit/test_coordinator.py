"""The call form shared by a coordinator's parts, without Ray: a local part answers like an actor
handle (``.method.remote(...)``, awaitable), a remote part turns into one ``call`` on its actor."""
import asyncio
import pickle

from engine.pairs.coordinator import LocalPart, Part


class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k=1):
        self.n += k
        return self.n

    async def later(self, k):
        await asyncio.sleep(0)
        return self.add(k)


def test_local_part_runs_sync_methods_at_once_and_can_be_awaited():
    c = Counter()
    part = LocalPart(c)
    out = part.add.remote(2)  # fire and forget: already done
    assert c.n == 2

    async def main():
        return await out, await part.add.remote(k=3)

    assert asyncio.run(main()) == (2, 5)


def test_local_part_runs_async_methods_as_tasks_of_the_loop():
    c = Counter()

    async def main():
        fut = LocalPart(c).later.remote(4)
        return await fut

    assert asyncio.run(main()) == 4 and c.n == 4


class FakeHandle:
    """Records what an actor handle would be asked to run."""

    def __init__(self):
        self.calls = []
        self.call = self

    def remote(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "ref"


def test_part_is_one_call_on_the_coordinator_naming_part_and_method():
    h = FakeHandle()
    assert Part(h, "scheduler").complete.remote("dev-0", 7, entries=[]) == "ref"
    assert h.calls == [(("scheduler", "complete", "dev-0", 7), {"entries": []})]


def test_parts_pickle_and_hide_no_dunder_lookups():
    p = pickle.loads(pickle.dumps(Part("handle", "metrics")))
    assert (p.handle, p.part) == ("handle", "metrics")
    assert not hasattr(LocalPart(Counter()), "__missing_dunder__")
