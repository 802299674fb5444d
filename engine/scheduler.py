"""The scheduler actor: the mechanism around ``TilePolicy`` (which is where decisions live).

Device actors pull: ``request`` answers with a tile chosen for what that actor's L1 and its node's
L2 hold, plus next-use advice for the actor's resident items; ``complete`` records a finished
tile in the append-only journal (the journal, not files, says what is done). Node caches report
what they hold with ``l2_update`` and ask ``next_uses`` before they evict. The first fatal error
reported by any actor stops the hand-out so the whole run fails fast with that message.
"""
from __future__ import annotations

import time

import ray

from .policy import ItemMap, TilePolicy
from .rundir import JsonlWriter, RunDir
from .space import Tile


@ray.remote(num_cpus=0, max_concurrency=1)
class Scheduler:
    def __init__(self, run_dir: str, tiles: list[dict], row_items, col_items, order: list[int],
                 window: int = 8, locality: bool = True, journal_fsync_s: float = 1.0,
                 done_tiles: list[int] | None = None):
        self.tiles = [Tile(**t) for t in tiles]
        self.policy = TilePolicy(self.tiles, ItemMap(row_items, col_items), order, window,
                                 locality)
        for t in done_tiles or []:
            self.policy.complete(t)
        self.run = RunDir(run_dir)
        self.journal = JsonlWriter(self.run.file("journal.jsonl"))
        self.journal_fsync_s = journal_fsync_s
        self._last_sync = time.time()
        self.l2: dict[str, set] = {}
        self.in_flight: dict[int, str] = {}
        self.error: str | None = None
        self.completed = int(self.policy.done.sum())

    def request(self, actor: str, node: str, l1_items: list[int]) -> dict:
        if self.error is not None:
            return {"done": True, "error": self.error}
        t = self.policy.next_tile(l1_items, self.l2.get(node, ()))
        if t is None:
            if self.in_flight:
                return {"wait": 0.05}
            return {"done": True}
        self.in_flight[t] = actor
        tile = self.tiles[t]
        return {"tile": t, "bounds": (tile.r0, tile.r1, tile.c0, tile.c1),
                "next_use": self.policy.next_uses(l1_items)}

    def complete(self, actor: str, t: int, entries: list[dict]) -> None:
        if self.policy.done[t]:
            return  # written twice (a retry): sinks are idempotent, the journal keeps one line
        self.journal.write([{"tile": t, "actor": actor, **e} for e in entries])
        if time.time() - self._last_sync >= self.journal_fsync_s:
            import os
            os.fsync(self.journal.fh.fileno())
            self._last_sync = time.time()
        self.policy.complete(t)
        self.in_flight.pop(t, None)
        self.completed += 1

    def fail(self, actor: str, message: str) -> None:
        if self.error is None:
            self.error = message

    def l2_update(self, node: str, items: list[int]) -> None:
        self.l2[node] = set(items)

    def next_uses(self, items: list[int]) -> dict:
        return self.policy.next_uses(items)

    def progress(self) -> dict:
        return {"done": self.completed, "total": len(self.tiles),
                "in_flight": len(self.in_flight), "error": self.error}

    def close(self) -> None:
        self.journal.close()
