"""The scheduler: the mechanism around ``TilePolicy`` (which is where decisions live).

Device actors pull: ``request`` answers with a tile chosen for what that actor's L1 and its node's
L2 hold (an actor reports only what entered and left its L1 since its last call), plus next-use
advice for the actor's resident items when it asks (its L1 is about to evict: advice for
thousands of items every tile cost both ends more than the tile's work when items are small);
``complete`` records a finished tile in the append-only journal (engine/run/journal.py: the
journal, not files, says what is done) and, in the same call, hands out the actor's next tile
(``complete_and_request``). Node caches report what they hold with ``l2_update`` and ask
``next_uses`` before they evict.

Faults: the driver reports a dead actor with ``actor_lost``; its unfinished tiles go back to the
pending set, each with one more attempt counted, and a tile past ``max_retries`` fails the run
with a message naming its pairs. ``overdue`` lists tiles past their deadline so the driver can
replace the actor running them. A tile finished twice (a retry racing a slow original) is
journaled once: sinks write the same bytes either way. The first fatal error reported by any
actor stops the hand-out so the whole run fails fast with that message.
"""
from __future__ import annotations

import time

from ...run.journal import JournalWriter
from ...run.rundir import JOURNAL, RunDir
from ..items import ItemMap
from .policy import TilePolicy
from ..sinks.shipped import ShippedJournal
from ..space import Tile, TileArray
from .stealing import Course, StealingPolicy


def describe_tile(tile: Tile, row_keys, col_keys, limit: int = 6) -> str:
    """A tile in the user's words: its pairs by key (or its key ranges when it has many)."""
    rows, cols = row_keys[tile.r0:tile.r1], col_keys[tile.c0:tile.c1]
    if tile.pairs <= limit and len(rows) * len(cols) <= 4 * limit:
        return f"tile {tile.id} (pairs of {list(rows)} x {list(cols)})"
    return (f"tile {tile.id} (rows {tile.r0}..{tile.r1 - 1}: {rows[0]}..{rows[-1]}, "
            f"columns {tile.c0}..{tile.c1 - 1}: {cols[0]}..{cols[-1]})")


class Scheduler:
    def __init__(self, run_dir: str, tiles: list[dict], row_items, col_items, order: list[int],
                 window: int = 8, locality: bool = True, journal_fsync_s: float = 1.0,
                 done_tiles: list[int] | None = None, deadlines: list[float] | None = None,
                 max_retries: int = 2, keep_fields: list[int] | None = None,
                 row_keys=(), col_keys=(), journal: bool = True, ship: bool = False,
                 silent_after_s: float = float("inf"), hierarchical: dict | None = None,
                 clock=time.time):
        # ``clock``: the wall clock deadlines and liveness are measured on (a test's counter)
        self.clock = clock
        self.tiles = TileArray.of(tiles)  # columns of ints, not an object per tile
        self.policy = TilePolicy(self.tiles, ItemMap(row_items, col_items), order, window,
                                 locality)
        for t in done_tiles or []:
            self.policy.complete(t)
        # ship: the run directory is out of reach; tiles' payloads wait for the driver
        self.shipped = ShippedJournal() if ship else None
        self.journal = self.shipped or (
            JournalWriter(RunDir(run_dir).file(JOURNAL), journal_fsync_s) if journal else None)
        self.l2: dict[str, set] = {}
        self.l1: dict[str, set] = {}  # actor -> what its L1 holds, kept from reported changes
        self.in_flight: dict[int, tuple[str, float]] = {}  # tile -> (actor, started)
        self.attempts: dict[int, int] = {}
        self.last_done: dict[str, float] = {}  # actor -> when it last completed a tile
        self.deadlines = deadlines or [float("inf")] * len(self.tiles)
        self.max_retries = max_retries
        self.keep = set(keep_fields or ())
        self.kept: dict[int, dict] = {}
        self.row_keys, self.col_keys = list(row_keys), list(col_keys)
        self.error: str | None = None
        self.sealed = False  # closed: nothing more is journaled or handed out (``close``)
        self.completed = int(self.policy.done.sum())
        self.excluded: set[str] = set()
        # liveness: when each actor was last heard of (any call or heartbeat), and those
        # that were told the run is done (they stop calling)
        self.silent_after_s = silent_after_s
        self.last_seen: dict[str, float] = {}
        self.finished_actors: set[str] = set()
        # hierarchical scheduling (engine/pairs/workers/frontier.py): node frontiers ``refill`` in
        # batches; ``hierarchical``: {"nodes": [...], "seed": int}
        self.stealing = None if hierarchical is None else StealingPolicy(
            order, hierarchical["nodes"], hierarchical.get("seed", 0), done_tiles or (),
            hierarchical.get("shares"), hierarchical.get("pace"))
        # a dealt run that loads more than its simulation falls back to contiguous shares of
        # the one plan (``stealing.Course``; ``loads`` come with the frontiers' refills)
        h = hierarchical or {}
        self.fallback = h.get("fallback")
        self.course = Course(**h["course"]) if h.get("course") and self.fallback else None
        self.steal_times: list[float] = []
        self.t0 = self.clock()
        self.handout_calls = 0  # round trips to the head that hand out tiles (either mode)

    def request(self, actor: str, node: str, l1_added=(), l1_removed=(), advice=(),
                busy: int | None = None) -> dict:
        """A tile for ``actor``. ``l1_added``/``l1_removed``: what entered and left its L1
        since its previous call; ``advice``: items to return next-use advice for; ``busy``:
        how many of its tiles wait for or are in compute (a tile being written does not hold
        its device; None: count every tile it has not completed)."""
        self.handout_calls += 1
        l1 = self.l1.setdefault(actor, set())
        l1.difference_update(l1_removed)
        l1.update(l1_added)
        self.last_seen[actor] = self.clock()
        if self.error is not None:
            self.finished_actors.add(actor)
            return {"done": True, "error": self.error}
        if self.sealed:
            self.finished_actors.add(actor)
            return {"done": True}
        if actor in self.excluded:
            self.finished_actors.add(actor)
            return {"done": True}
        running = busy if busy is not None else \
            sum(1 for a, _ in self.in_flight.values() if a == actor)
        if self.policy.hold_back(len(self.l1), running):
            return {"wait": 0.05}  # the actor asks again when its tile is done
        t = self.policy.next_tile(l1, self.l2.get(node, ()))
        if t is None:
            if self.in_flight:  # a tile may still come back (its actor lost): ask again soon
                # polls back off with the number of actors: each one costs the coordinator CPU
                return {"wait": min(0.25, max(0.01, 0.002 * len(self.l1)))}
            self.finished_actors.add(actor)
            return {"done": True}
        self.in_flight[t] = (actor, self.clock())
        return {"tile": t, "next_use": self.policy.next_uses(advice),
                "keep": t in self.keep}

    def complete(self, actor: str, t: int, entries: list[dict], fields: dict | None = None) -> None:
        if fields is not None and t not in self.kept:
            self.kept[t] = {"actor": actor, "fields": fields}
        if self.policy.done[t] or self.sealed:
            # written twice (a retry): sinks are idempotent, the journal keeps one line; after
            # ``close`` a tile is not done, and a resume computes it again
            return
        if self.journal is not None:
            self.journal.append(t, actor, entries)
        self.policy.complete(t)
        if self.stealing is not None:
            self.stealing.complete(t)
        self.in_flight.pop(t, None)
        self.last_done[actor] = self.clock()
        self.completed += 1

    def complete_and_request(self, actor: str, t: int, entries: list[dict], fields: dict | None,
                             node: str, l1_added=(), l1_removed=(), advice=(),
                             busy: int | None = None) -> dict:
        """``complete`` then ``request`` in one round trip: an actor finishing a tile always
        wants the next one, and each Ray call costs about a millisecond of CPU on both ends."""
        self.complete(actor, t, entries, fields)
        return self.request(actor, node, l1_added, l1_removed, advice, busy)

    def refill(self, node: str, completions: list, want: int, least: int = 1,
               count: bool = True, loads: int | None = None) -> dict:
        """A node frontier's one round trip: the completions it buffered (each
        ``(tile, actor, (entries, fields))``), then up to ``want`` tiles for it
        (``StealingPolicy.take``: its share, lost nodes' work, or stolen work). ``count``:
        False for the coordinator's re-checks of a held answer (not a round trip)."""
        self.handout_calls += count
        for t, actor, (entries, fields) in completions:
            self.complete(actor, t, entries, fields)
        if self.error is not None:
            return {"done": True, "error": self.error}
        if self.sealed:
            return {"tiles": [], "done": True}
        if self.course is not None and loads is not None:
            changed = self.course.check(self.completed / max(1, len(self.tiles)), loads)
            if changed:
                changed.update(tiles=self.stealing.redeal(self.fallback),
                               t=round(self.clock() - self.t0, 3))
        before = len(self.stealing.steals)
        tiles = self.stealing.take(node, want, least, count)
        for s in self.stealing.steals[before:]:
            s["t"] = self.clock() - self.t0
        now, holder = self.clock(), f"{node}/frontier"
        for t in tiles:
            self.policy.assign(t)
            self.in_flight[t] = (holder, now)
        if tiles:
            return {"tiles": tiles, "keep": [t for t in tiles if t in self.keep]}
        if self.in_flight:  # a tile may still come back (its node lost): ask again later
            return {"tiles": [], "wait": 0.25}
        return {"tiles": [], "done": True}

    def scheduling(self) -> dict:
        """Hand-out counters for summary.json: steals, round trips to the head."""
        out = {"hierarchical": self.stealing is not None, "head_round_trips": self.handout_calls,
               "tiles": len(self.tiles)}
        if self.stealing is not None:
            c = self.stealing.counters()
            out.update(steals=c["steals"], per_node=c["per_node"], steal_log=self.stealing.steals,
                       paced=c["paced"])
            # null: no course to watch (not dealt); false: kept; else the change made
            out["course_change"] = None if self.course is None else \
                (self.course.changed or False)
            if self.course is not None and self.course.drift:  # past the margin, course kept
                out["course_drift"] = self.course.drift
        else:
            out.update(steals=0, per_node={}, steal_log=[])
        return out

    def fail(self, actor: str, message: str) -> None:
        if self.error is None:
            self.error = message

    def actor_lost(self, actor: str, reason: str, blame: list[int] | None = None) -> list[int]:
        """Requeue the unfinished tiles of a dead actor; fail a tile past its retries. Each
        tile is charged an attempt, or with ``blame`` (the tile an actor was killed for, past
        its deadline) only those: the tiles that waited behind it are not at fault, and a
        hung tile would otherwise spend their retries."""
        self.excluded.add(actor)
        self.l1.pop(actor, None)
        lost = [t for t, (a, _) in self.in_flight.items() if a == actor]
        if self.stealing is not None and lost:
            self.stealing.give_back(lost)
        for t in (lost if blame is None else [t for t in lost if t in blame]):
            self.attempts[t] = self.attempts.get(t, 0) + 1
            if self.attempts[t] > self.max_retries and self.error is None:
                self.error = (f"{describe_tile(self.tiles[t], self.row_keys, self.col_keys)} "
                              f"failed on {self.attempts[t]} attempts (max_retries="
                              f"{self.max_retries}); last: {reason}")
        for t in lost:
            del self.in_flight[t]
            self.policy.requeue(t)
        return lost

    def heartbeat(self, actor: str) -> None:
        self.last_seen[actor] = self.clock()

    def silent(self) -> list[tuple[str, float]]:
        """Actors still working that have not been heard of for ``silent_after_s``: stopped
        or wedged processes (a live actor beats while its compare runs)."""
        now = self.clock()
        if self.completed == len(self.tiles):  # frontiers tell no actor "done" here
            return []
        return [(a, now - seen) for a, seen in self.last_seen.items()
                if a not in self.finished_actors and a not in self.excluded
                and now - seen > self.silent_after_s]

    def overdue(self) -> list[tuple]:
        """(tile, holder, elapsed, deadline) of the tiles past their deadline. A holder runs
        one compare at a time: of its tiles only the oldest is charged, from the later of its
        hand-out and the holder's last completion (the tiles behind it wait for the compare,
        and their clocks have not started). An actor that completes nothing for that long is
        stuck, and is killed for its oldest tile, not for one queued behind a hung one."""
        now = self.clock()
        running: dict[str, tuple[float, int]] = {}
        for t, (a, t0) in self.in_flight.items():
            if a not in running or t0 < running[a][0]:
                running[a] = (t0, t)
        out = []
        for a, (t0, t) in running.items():
            start = max(t0, self.last_done.get(a, t0))
            if now - start > self.deadlines[t]:
                out.append((t, a, now - start, self.deadlines[t]))
        return sorted(out)

    def forget_node(self, node: str) -> None:
        self.l2.pop(node, None)
        if self.stealing is not None:  # the tiles its frontier held, then its share, go back
            self.actor_lost(f"{node}/frontier", f"node {node} lost")
            self.stealing.lose(node)

    def l2_update(self, node: str, items: list[int]) -> None:
        self.l2[node] = set(items)

    def next_uses(self, items: list[int], node: str | None = None) -> dict:
        """Plan positions of the items' next uses; with node frontiers, in ``node``'s own work
        (``StealingPolicy.next_uses``), else in the run's one plan."""
        if self.stealing is not None and node in self.stealing.shares:
            return self.stealing.next_uses(node, items, self.policy.tile_items)
        return self.policy.next_uses(items)

    def kept_fields(self) -> dict:
        return self.kept

    def progress(self) -> dict:
        return {"done": self.completed, "total": len(self.tiles),
                "in_flight": len(self.in_flight), "error": self.error,
                "retries": sum(self.attempts.values())}

    def watch(self) -> dict:
        """``progress`` and ``overdue`` in one call: what the driver polls."""
        return {**self.progress(), "overdue": self.overdue(), "silent": self.silent(),
                "silent_after_s": self.silent_after_s}

    def drain(self) -> list:
        """Finished tiles' payloads not yet handed to the driver (``ship`` only)."""
        return self.shipped.drain() if self.shipped is not None else []

    def close(self) -> dict:
        """Close the journal; the seconds it cost: appending on the hand-out path
        (``journal_s``, what it adds to the run's wall time) and fsyncing beside it. Once it
        returns nothing more is journaled, so a run stopped mid-way (cancel, Ctrl-C) calls it
        before it kills its actors: a kill takes effect some time after it is sent."""
        sealed, self.sealed = self.sealed, True
        if self.journal is None:
            return {"journal_s": 0.0, "journal_fsync_s": 0.0}
        if not sealed:
            self.journal.close()
        return {"journal_s": self.journal.append_seconds,
                "journal_fsync_s": self.journal.fsync_seconds}
