"""The mechanism of hierarchical scheduling: one ``FrontierActor`` per node with device actors.

The policy (which tiles a node gets, stealing, counters) is ``stealing.py``; this is the Ray
side. A node's device actors ask their node's frontier for tiles (``FrontierClient`` has the
``SchedulerClient`` methods a device actor calls, so ``DeviceWorker`` is unchanged): a hand-out
from the local queue is a call inside the node, not a round trip to the head. When the queue is
empty, one ``Scheduler.refill`` call carries the completions buffered since the last one to the
head (which journals each exactly once: the journal, not files, says what is done) and brings the
next batch. Completions also go up when a batch's worth is buffered or the oldest waited
``flush_s``, so the journal (and a resume) never lags far behind.

A device actor lost on a live node: the driver tells its frontier, which puts the actor's tiles
first in its queue. A node lost: the head takes back the tiles its frontier held and its share
(``Scheduler.forget_node``); completions still buffered there are lost with it, so those tiles
run again (sinks write the same bytes either way).
"""
from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import numpy as np

from .clients import SchedulerClient
from ..plan.stealing import Frontier
from ..space import TileArray

INF = math.inf


@dataclass
class FrontierSpec:
    node: str                  # "node-<index>"
    scheduler: object          # SchedulerClient of the head's coordinator
    tiles: list                # space.TileArray (for next-use advice from the queue)
    row_items: np.ndarray
    col_items: np.ndarray
    batch: int = 32            # tiles asked for per round trip to the head
    devices: int = 1           # device actors on the node: the least a grant gives
    flush_s: float = 5.0       # completions wait at most this long for a round trip


class FrontierWorker:
    """One node's frontier (``stealing.Frontier``) behind an async actor."""

    def __init__(self, spec: FrontierSpec):
        self.spec = spec
        self.node = spec.node
        self.scheduler = spec.scheduler
        self.frontier = Frontier(spec.node, spec.batch)
        self.keep: set = set()
        self.lock = asyncio.Lock()
        self.error: str | None = None
        self.wait_until = 0.0   # the head had nothing to give: ask again after this
        self.wait_s = 0.05
        self.oldest = None      # when the oldest buffered completion came
        self.rows, self.cols = np.asarray(spec.row_items), np.asarray(spec.col_items)
        self.tiles = TileArray.of(spec.tiles)  # columns of ints, not an object per tile

    def rebind(self, spec: FrontierSpec) -> None:
        """Serve another run (warm.py): a new queue; the process and its imports stay."""
        self.__init__(spec)

    def retire(self) -> None:
        """Idle in the warm pool until ``rebind``: let go of the run's tiles."""
        self.spec = self.scheduler = self.frontier = None
        self.tiles, self.keep = TileArray.of([]), set()

    def ready(self) -> bool:
        return True

    async def _round_trip(self) -> None:
        """Completions up, a batch of tiles down (the only call to the head on the hand-out
        path)."""
        done = self.frontier.take_completions()
        self.oldest = None
        reply = await self.scheduler.refill(self.node, done, self.frontier.batch,
                                            self.spec.devices)
        self.frontier.refill(reply.get("tiles", []))
        self.keep.update(reply.get("keep", ()))
        if reply.get("error"):
            self.error = reply["error"]
        if reply.get("done"):
            self.frontier.finished = True
        self.wait_s = reply.get("wait", 0.05)
        if not reply.get("tiles"):
            self.wait_until = time.time() + self.wait_s

    def _advice(self, items) -> dict:
        """Next use of each item: its first position among the queued tiles (INF: none)."""
        if not items:
            return {}
        first: dict = {}
        for pos, t in enumerate(self.frontier.upcoming()):
            for i in self._items(t):
                first.setdefault(i, float(pos))
        return {int(i): first.get(int(i), INF) for i in items}

    def _items(self, t: int) -> list[int]:
        """Tile ``t``'s items (made when asked: a queue holds a batch of tiles, the run 10^6)."""
        _, r0, r1, c0, c1, _, _ = self.tiles.a[t].tolist()
        return np.unique(np.concatenate([self.rows[r0:r1], self.cols[c0:c1]])).tolist()

    async def request(self, actor, node, l1_added=(), l1_removed=(), advice=(),
                      busy=None) -> dict:
        # (``busy`` is the head's endgame rule; a frontier hands out its queue in order)
        t = self.frontier.next_tile(actor)
        if t is None and self.error is None and not self.frontier.finished:
            async with self.lock:
                t = self.frontier.next_tile(actor)
                if t is None and not self.frontier.finished and self.error is None and (
                        time.time() >= self.wait_until or self.frontier.buffered):
                    await self._round_trip()
                    t = self.frontier.next_tile(actor)
        if t is not None:
            return {"tile": t, "next_use": self._advice(advice), "keep": t in self.keep}
        if self.error is not None:
            return {"done": True, "error": self.error}
        if self.frontier.finished:
            return {"done": True}
        return {"wait": self.wait_s}

    async def complete_and_request(self, actor, t, entries, fields, node, l1_added=(),
                                   l1_removed=(), advice=(), busy=None) -> dict:
        self.frontier.complete(actor, t, (entries, fields))
        now = time.time()
        self.oldest = self.oldest or now
        if len(self.frontier.buffered) >= self.frontier.batch or now - self.oldest > \
                self.spec.flush_s:
            async with self.lock:
                if self.frontier.buffered:
                    await self._round_trip()
        return await self.request(actor, node, l1_added, l1_removed, advice)

    def actor_lost(self, actor: str) -> list:
        return self.frontier.actor_lost(actor)

    def stats(self) -> dict:
        return self.frontier.counters()


class FrontierClient(SchedulerClient):
    """What a device actor on a node with a frontier calls: hand-outs and completions
    (``request``, ``complete_and_request``, inherited) go to the frontier, heartbeats and
    failures straight to the head's scheduler."""

    __slots__ = ("scheduler",)

    def __init__(self, frontier, scheduler):
        super().__init__(frontier)
        self.scheduler = scheduler

    def __reduce__(self):
        return (FrontierClient, (self.handle, self.scheduler))

    def heartbeat(self, actor: str):
        return self.scheduler.heartbeat(actor)

    def fail(self, actor: str, message: str):
        return self.scheduler.fail(actor, message)


def use_hierarchical(setting, executor: str, nodes_with_actors: int) -> bool:
    """``hierarchical=auto`` turns node frontiers on for a Ray run with more than one node
    running device actors: on one node a frontier is one more hop and saves no round trip to
    another machine; an in-process run has no node to put one on."""
    setting = str(setting).lower()
    if setting == "false" or executor != "ray":
        return False
    return setting == "true" or nodes_with_actors > 1
