"""Typed clients of a run's actors: what device actors, node caches and the driver call.

The scheduler, the metrics and the head node's cache live in one ``Coordinator`` actor
(coordinator.py says why one). A client turns each of their methods into one Ray call to the
actor holding them and returns its ObjectRef (to ``await`` in an actor, ``ray.get`` in the
driver): a method a caller may use is spelled here once, with its arguments, instead of being
looked up by name at run time. Clients are small picklable values, so they travel inside actor
specs. Nothing here imports Ray: a handle is anything whose methods have ``.remote``.
"""
from __future__ import annotations


class SchedulerClient:
    """The run's ``Scheduler`` in the coordinator (engine/pairs/plan/scheduler.py)."""

    __slots__ = ("handle",)

    def __init__(self, coordinator):
        self.handle = coordinator

    def __reduce__(self):
        return (SchedulerClient, (self.handle,))

    # device actors: one call per tile (complete_and_request), request when idle
    def request(self, actor: str, node: str, l1_added=(), l1_removed=(), advice=(),
                busy: int | None = None):
        return self.handle.request.remote(actor, node, l1_added, l1_removed, advice, busy)

    def complete_and_request(self, actor: str, t: int, entries: list, fields, node: str,
                             l1_added=(), l1_removed=(), advice=(), busy: int | None = None):
        return self.handle.complete_and_request.remote(actor, t, entries, fields, node,
                                                       l1_added, l1_removed, advice, busy)

    def heartbeat(self, actor: str):
        return self.handle.heartbeat.remote(actor)

    # node frontiers (hierarchical scheduling, frontier.py): completions up, tiles down
    def refill(self, node: str, completions: list, want: int, least: int = 1):
        return self.handle.refill.remote(node, completions, want, least)

    def scheduling(self):
        return self.handle.scheduling.remote()

    def fail(self, actor: str, message: str):
        return self.handle.fail.remote(actor, message)

    # node caches
    def next_uses(self, items: list, node: str | None = None):
        return self.handle.next_uses.remote(items, node)

    def l2_update(self, node: str, items: list):
        return self.handle.l2_update.remote(node, items)

    # the driver
    def progress(self):
        return self.handle.progress.remote()

    def watch(self):
        return self.handle.watch.remote()

    def drain(self):
        return self.handle.drain.remote()

    def actor_lost(self, actor: str, reason: str, blame: list[int] | None = None):
        return self.handle.actor_lost.remote(actor, reason, blame)

    def forget_node(self, node: str):
        return self.handle.forget_node.remote(node)

    def kept_fields(self):
        return self.handle.kept_fields.remote()

    def close(self):
        return self.handle.close.remote()


class MetricsClient:
    """The run's ``Metrics`` in the coordinator (engine/run/metrics.py)."""

    __slots__ = ("handle",)

    def __init__(self, coordinator):
        self.handle = coordinator

    def __reduce__(self):
        return (MetricsClient, (self.handle,))

    def record(self, events: list):
        return self.handle.record.remote(events)

    def tick(self):
        return self.handle.tick.remote()

    def close(self):
        return self.handle.close_metrics.remote()


class NodeCacheClient:
    """A node's L2 (``node_cache.NodeCache``): in its own ``NodeCacheActor``, or, on the head node,
    inside the coordinator (``in_coordinator``), whose methods for it are ``cache_*``."""

    __slots__ = ("handle", "in_coordinator")

    def __init__(self, handle, in_coordinator: bool = False):
        self.handle, self.in_coordinator = handle, in_coordinator

    def __reduce__(self):
        return (NodeCacheClient, (self.handle, self.in_coordinator))

    def get(self, items: list):
        h = self.handle
        return (h.cache_get if self.in_coordinator else h.get).remote(items)

    def stats(self):
        h = self.handle
        return (h.cache_stats if self.in_coordinator else h.stats).remote()

    def ready(self):
        h = self.handle
        return (h.cache_ready if self.in_coordinator else h.ready).remote()

    # L3 (directory.py): one call per shard or peer per batch of items
    def connect(self, index: int, peers: list, hops: int):
        h = self.handle
        return (h.cache_connect if self.in_coordinator else h.connect).remote(index, peers, hops)

    def take(self, items: list):
        h = self.handle
        return (h.cache_take if self.in_coordinator else h.take).remote(items)

    def dir_lookup(self, items: list, claim: int | None = None):
        h = self.handle
        return (h.cache_dir_lookup if self.in_coordinator else h.dir_lookup).remote(items, claim)

    def dir_record(self, node: int, added: list, removed: list):
        h = self.handle
        return (h.cache_dir_record if self.in_coordinator else h.dir_record).remote(
            node, added, removed)
