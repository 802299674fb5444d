"""Warm actors: the actors of a run that finished cleanly (its coordinator, node caches,
frontiers and device actors) wait, idle, for the next run on the same Ray, so a process that
runs many jobs (a REPL, a notebook, a Hydra sweep, a benchmark, a test suite) starts their
processes once.

Why: a fresh actor is a fresh Python process that imports Ray and registers with it, about a
CPU-second each, and on a small machine Ray starts only as many at once as it has cores; the
process start was most of a small run's start-up (a session's later runs, measured: RESULTS.md,
"Start-up"). A reused one is rebound to the new run
(``rebind``: every object of the old run replaced; imports, compiled kernels and the app's
warm-up stay), and between runs it holds nothing of its last run (``retire``).

Rules (``WarmPool``, no Ray here):
* an actor is handed back only by a run that finished cleanly (a failed, cancelled or
  interrupted run's actors are stopped) and is taken only for the same kind and node;
* an idle actor holds no Ray resource: a device actor that holds a GPU is stopped, not kept,
  since while it waited no other work on that Ray could have its GPU;
* actors belong to one connection to Ray (``owner``: the job and the driver's node): after
  ``ray.shutdown()`` and a new ``ray.init`` the old ones are gone, and so is the pool;
* the caller checks a taken actor by rebinding it and waiting for the answer; one that does
  not answer (killed since) is dropped and a new one started.
"""
from __future__ import annotations

from typing import Any, Hashable


class WarmPool:
    """Idle actors by (kind, node id), for one owner at a time."""

    def __init__(self):
        self.owner: Hashable | None = None
        self.idle: dict[tuple, list] = {}
        self.taken = 0      # actors reused
        self.returned = 0   # actors handed back

    def _for(self, owner: Hashable) -> None:
        if owner != self.owner:
            self.owner, self.idle = owner, {}

    def take(self, owner: Hashable, kind: str, node_id: str, resources: dict) -> Any | None:
        """An idle actor of this kind on this node, or None (always for one that would hold a
        Ray resource: none is kept)."""
        self._for(owner)
        pool = None if _holds(resources) else self.idle.get((kind, node_id))
        if not pool:
            return None
        self.taken += 1
        return pool.pop()

    def give(self, owner: Hashable, kind: str, node_id: str, resources: dict, handle) -> bool:
        """Keep ``handle`` (of a run that finished cleanly) for a later run; False when it may
        not wait idle (it holds a Ray resource): the caller stops it."""
        if _holds(resources):
            return False
        self._for(owner)
        self.idle.setdefault((kind, node_id), []).append(handle)
        self.returned += 1
        return True

    def size(self) -> int:
        return sum(len(v) for v in self.idle.values())


def _holds(resources: dict) -> bool:
    """Does an actor started with these Ray resources hold any (a GPU)?"""
    return any(resources.values())


WARM = WarmPool()  # the process's pool: actor handles are valid only in this process
