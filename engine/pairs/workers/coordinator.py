"""One process for a run's bookkeeping on the head node: the scheduler, the metrics and the head
node's cache, as plain objects behind one actor.

Why one: each was its own actor. A Ray actor is a worker process (booting one and unpickling the
app costs CPU, and a resume started several), idles at a small share of a core, and
every call between two of them is an RPC costing CPU at each end. The head cache asks the
scheduler for next-use advice and tells it what it holds after every load; every part sends
metrics. Inside one process those are method calls.

Other processes reach the parts through the typed clients of clients.py (``SchedulerClient``,
``MetricsClient``, ``NodeCacheClient``): each client method is one Ray call to a method of the
same name here. The coordinator is an async actor: every call runs on its one event loop thread,
so the scheduler's and the metrics' synchronous methods never run concurrently.
"""
from __future__ import annotations

import asyncio
import time

from ...run.metrics import Metrics
from ...run.runtime import give_back_freed_memory
from .actors import NodeCacheSpec, node_cache
from ..plan.scheduler import Scheduler
from ..plan.stealing import Course


class _InProcessScheduler:
    """The scheduler as the head node's cache sees it: the calls of ``SchedulerClient`` that a
    node cache makes, answered in this process."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler = scheduler

    async def next_uses(self, items: list, node: str | None = None) -> dict:
        return self.scheduler.next_uses(items, node)

    def l2_update(self, node: str, items: list) -> None:
        self.scheduler.l2_update(node, items)


class _InProcessMetrics:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def record(self, events: list) -> None:
        self.metrics.record(events)


class CoordinatorCore:
    """The scheduler, the metrics and (optionally) one node's cache, in one actor (a Ray
    actor: ``Coordinator``; the in-process executor runs it on a thread of its own).
    ``loader``: how the cache loads (default: Ray tasks, see ``actors.node_cache``)."""

    def __init__(self, scheduler: dict, metrics: dict, cache: NodeCacheSpec | None = None,
                 loader=None):
        self.scheduler = Scheduler(**scheduler)
        self.metrics = Metrics(**metrics)
        self.cache = None
        if cache is not None:
            self.cache = node_cache(cache, _InProcessScheduler(self.scheduler),
                                    _InProcessMetrics(self.metrics), loader)

    def rebind(self, scheduler: dict, metrics: dict, cache: NodeCacheSpec | None = None,
               loader=None) -> None:
        """Serve another run (a session reuses its warm coordinator process)."""
        self.__init__(scheduler, metrics, cache, loader)

    def ready(self) -> bool:
        return True

    def retire(self) -> None:
        """Idle in the warm pool until ``rebind`` (warm.py): let go of the run (its scheduler
        and metrics, closed by then, and the node cache, whose items may be large: 1.5 GB at
        10^6 reads) and give the memory back, before the driver's finalize
        (driver._release)."""
        self.cache = self.scheduler = self.metrics = None
        give_back_freed_memory()

    # -- the scheduler (SchedulerClient) ----------------------------------------------------
    async def request(self, actor, node, l1_added, l1_removed, advice, busy=None):
        return self.scheduler.request(actor, node, l1_added, l1_removed, advice, busy)

    async def complete_and_request(self, actor, t, entries, fields, node, l1_added, l1_removed,
                                   advice, busy=None):
        return self.scheduler.complete_and_request(actor, t, entries, fields, node, l1_added,
                                                   l1_removed, advice, busy)

    async def refill(self, node, completions, want, least, hold_s: float = 2.0):
        """A node frontier's round trip; when there is nothing to give it yet (the last tiles
        run elsewhere) the answer is held here up to ``hold_s``, checked in this process, until
        tiles come back or the run is done: idle nodes polling the head cost a round trip per
        poll, and in a run's last seconds they were most of the round trips. Never for a node
        with tiles of its own under way: their completions come through the very frontier
        waiting here."""
        sch = self.scheduler
        loads = None if sch.course is None else self.metrics.state.tiers()["source"]["loads"]
        reply = sch.refill(node, completions, want, least, loads=loads)
        if sch.stealing is not None and node in sch.stealing.paced:
            return await self._paced(node, reply, want, least, hold_s)
        holder = f"{node}/frontier"
        if any(a == holder for a, _ in sch.in_flight.values()):
            return reply  # its own tiles are under way: their completions come from it
        deadline = time.monotonic() + hold_s
        while "wait" in reply and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            if sch.stealing.remaining() or not sch.in_flight or sch.error is not None:
                reply = sch.refill(node, [], want, least, count=False)
        return reply

    async def _paced(self, node, reply, want, least, hold_s: float):
        """A node the pace held back (``stealing.Pace``: a column ahead of its slowest peer)
        waits here until a peer's grant lets it on, its own tiles under way or not: the pace
        counts grants, not completions, so what its frontier buffers meanwhile holds no one.
        Asked again every 10 ms; still held after ``hold_s``, the node asks again in 20 ms."""
        sch = self.scheduler
        deadline = time.monotonic() + hold_s
        while node in sch.stealing.paced and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            reply = sch.refill(node, [], want, least, count=False)
        if node in sch.stealing.paced and not reply.get("error") and not sch.sealed:
            # held, not done: its share is left (the scheduler says done when no tile is
            # under way anywhere, which a held node's own share makes untrue)
            reply = {"tiles": [], "wait": 0.02}
        return reply

    async def scheduling(self):
        return self.scheduler.scheduling()

    async def heartbeat(self, actor):
        return self.scheduler.heartbeat(actor)

    async def fail(self, actor, message):
        return self.scheduler.fail(actor, message)

    async def next_uses(self, items, node=None):
        return self.scheduler.next_uses(items, node)

    async def l2_update(self, node, items):
        return self.scheduler.l2_update(node, items)

    async def progress(self):
        return self.scheduler.progress()

    async def watch(self):
        """What the driver polls; with the course change once made (``stealing.Course``), so
        the progress line says it when it happens, not only summary.json at the end."""
        course = self.scheduler.course
        changed = {"course_line": Course.describe(course.changed)} \
            if course is not None and course.changed else {}
        return {**self.scheduler.watch(), **self._drain(), **changed}

    async def drain(self):
        return self._drain()

    def _drain(self) -> dict:
        """What waits for the driver to write (only when the run directory is out of reach):
        finished tiles' payloads and the metrics' JSON Lines (engine/pairs/sinks/shipped.py)."""
        shipped, files = self.scheduler.drain(), self.metrics.drain()
        return {"shipped": shipped, "files": files} if shipped or files else {}

    async def actor_lost(self, actor, reason, blame=None):
        return self.scheduler.actor_lost(actor, reason, blame)

    async def forget_node(self, node):
        return self.scheduler.forget_node(node)

    async def kept_fields(self):
        return self.scheduler.kept_fields()

    async def close(self):
        return self.scheduler.close()

    # -- the metrics (MetricsClient) --------------------------------------------------------
    async def record(self, events):
        return self.metrics.record(events)

    async def tick(self):
        return self.metrics.tick()

    async def close_metrics(self):
        return self.metrics.close()

    # -- the head node's cache (NodeCacheClient) --------------------------------------------
    async def cache_get(self, items):
        return await self.cache.get(items)

    async def cache_stats(self):
        return await self.cache.stats()

    async def cache_ready(self):
        return True

    # L3 (directory.py), for the head node's cache: as NodeCacheWorker's methods
    async def cache_connect(self, index, peers, hops):
        from .actors import connect_l3
        connect_l3(self.cache, index, peers, hops)
        return True

    async def cache_take(self, items):
        return await self.cache.take(items)

    async def cache_dir_lookup(self, items, claim=None):
        return self.cache.peers.shard_lookup(items, claim)

    async def cache_dir_record(self, node, added, removed):
        return self.cache.peers.shard_record(node, added, removed)


_made: dict = {}


def __getattr__(name):
    """``Coordinator``: the Ray actor class, made (and Ray imported) on first use."""
    if name != "Coordinator":
        raise AttributeError(name)
    if name not in _made:
        import ray
        _made[name] = ray.remote(num_cpus=0, enable_task_events=False)(CoordinatorCore)
    return _made[name]
