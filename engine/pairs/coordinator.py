"""One process for a run's bookkeeping on the head node: the scheduler, the metrics and the head
node's cache, as plain objects behind one actor.

Why one: each was its own actor. A Ray actor is a worker process (booting one and unpickling the
app cost ~0.5-1 s of CPU, on 2 cores a resume started five), idles at ~1 % of a core, and every
call between two of them is an RPC costing ~0.4 ms of CPU at each end. The head cache asks the
scheduler for next-use advice and tells it what it holds after every load; every part sends
metrics. Inside one process those are method calls.

Parts are reached with the call form of an actor handle, so a device actor, a node cache on
another node or the driver need not know which process a part lives in:

    Part(coordinator, "scheduler").progress.remote()     # another process: one Ray call
    LocalPart(scheduler).progress.remote()               # same process: a method call

Both return something to ``await`` (or, for ``Part``, to ``ray.get``). The coordinator is an
async actor: every call runs on its one event loop thread, so the scheduler's and metrics'
synchronous methods never run concurrently, as when each had ``max_concurrency=1``.
"""
from __future__ import annotations

import asyncio
import inspect

import ray

from ..run.metrics import Metrics
from .scheduler import Scheduler
from .workers import NodeCache


class _Done:
    """An already-finished result that can be awaited (what a local call returns)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __await__(self):
        return self.value
        yield  # a generator: ``await`` gets the value without suspending


class _Method:
    __slots__ = ("call", "name")

    def __init__(self, call, name: str):
        self.call, self.name = call, name

    def remote(self, *args, **kwargs):
        return self.call(self.name, args, kwargs)


class _CallForm:
    """``part.method.remote(*args, **kwargs)`` turned into ``self._call(method, args, kwargs)``."""

    __slots__ = ()

    def _call(self, name: str, args, kwargs):
        raise NotImplementedError

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Method(self._call, name)


class LocalPart(_CallForm):
    """A part in this process, called like an actor handle."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def _call(self, name: str, args, kwargs):
        out = getattr(self.obj, name)(*args, **kwargs)
        if inspect.iscoroutine(out):  # an async method runs as a task of this event loop
            return asyncio.ensure_future(out)
        return _Done(out)


class Part(_CallForm):
    """A part of a ``Coordinator`` seen from another process: ``part.method.remote(...)`` is
    one Ray call to the coordinator, returning an ObjectRef."""

    __slots__ = ("handle", "part")

    def __init__(self, handle, part: str):
        self.handle, self.part = handle, part

    def __reduce__(self):
        return (Part, (self.handle, self.part))

    def _call(self, name: str, args, kwargs):
        return self.handle.call.remote(self.part, name, *args, **kwargs)


# enable_task_events=False on the engine's actors and tasks: Ray otherwise records every call's
# state changes and ships them to the GCS for its dashboard and state API, which pairflow does
# not read (its own metrics and trace are in the run directory)
@ray.remote(num_cpus=0, enable_task_events=False)
class Coordinator:
    """The scheduler, the metrics and (optionally) one node's cache, in one actor."""

    def __init__(self, scheduler: dict, metrics: dict, cache: dict | None = None):
        self.parts: dict = {"metrics": Metrics(**metrics), "scheduler": Scheduler(**scheduler)}
        if cache is not None:
            self.parts["cache"] = NodeCache(**cache, scheduler=LocalPart(self.parts["scheduler"]),
                                            metrics=LocalPart(self.parts["metrics"]))

    async def call(self, part: str, method: str, *args, **kwargs):
        out = getattr(self.parts[part], method)(*args, **kwargs)
        if inspect.isawaitable(out):
            out = await out
        return out

    def ready(self) -> bool:
        return True


# a node's cache where no coordinator is: on every node but the head
NodeCacheActor = ray.remote(num_cpus=0, enable_task_events=False)(NodeCache)
