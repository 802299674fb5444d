"""The host tier's contract (``pairflow.engine.testing.host_tier.HostTierTests``) run by the L2
``NodeCache`` with a fake loader instead of Ray tasks: one handle per item, small items' values
in their infos (the others kept by handle, as a load task's ObjectRefs), after ``delay``.
``test_directory.py`` joins node caches with this loader; ``test_inprocess_executor.py`` runs
the same contract with the in-process executor's loader."""
import asyncio

from pairflow.engine.pairs.cache.node_cache import NodeCache
from pairflow.engine.testing.host_tier import INLINE, HostTierTests, size_of


class FakeLoads:
    """A load task per batch: one handle per item and, after ``delay`` (as it was when the
    load started), their infos; ``fail``: items whose batch fails."""

    def __init__(self, delay: float = 0.0, fail=()):
        self.batches: list[list[int]] = []
        self.delay, self.fail = delay, set(fail)
        self.under_way = self.most = 0

    def __call__(self, batch):
        self.batches.append(list(batch))
        return [f"handle-{i}" for i in batch], self._infos(list(batch), self.delay)

    async def _infos(self, batch, delay):
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        try:
            await asyncio.sleep(delay)
            if self.fail & set(batch):
                raise OSError("load failed")
            infos = []
            for i in batch:
                info = {"raw_bytes": 1000 + i, "nbytes": size_of(i), "load": (0.0, 1.0),
                        "parse": (1.0, 2.0)}
                if size_of(i) <= INLINE:
                    info["value"] = f"item-{i}"
                infos.append(info)
            return infos
        finally:
            self.under_way -= 1

    @property
    def loaded(self) -> list[int]:
        return [i for b in self.batches for i in b]


class TestNodeCacheFakeLoads(HostTierTests):
    tier_cls = NodeCache

    def make_loads(self):
        loads = FakeLoads()
        return loads, loads

    def answer(self, item):
        return ("value", f"item-{item}") if size_of(item) <= INLINE else ("ref", f"handle-{item}")

    async def check_failed(self, answer):
        assert answer == ("ref", "handle-2")  # the handle carries the error to the reader

    def raw_bytes(self, item):
        return 1000 + item
