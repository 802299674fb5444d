"""Run metrics: counters per tier, per stage and per actor, and the files the dashboard reads.

Actors send batched events to one ``Metrics`` (fire and forget; it lives in the run's
coordinator, engine/pairs/workers/coordinator.py). ``MetricsState`` is the pure aggregation (tested
without Ray); ``Metrics`` appends spans and finished tiles to JSON Lines and writes a cumulative
snapshot to ``metrics.jsonl`` at most every ``interval`` seconds.

Event kinds:
  {"kind": "span", "actor", "stage", "what", "t0", "t1"[, "cpu"]} a stage ran (load, parse, ...)
  {"kind": "tile_start", "id", "actor", "t"}                   a tile's items are being acquired
  {"kind": "tile", "id", "actor", "t_start", "t_end", "pairs"}  a tile finished
  {"kind": "tier", "source", "tier", "stats": {...}}           cumulative counters of one cache
  {"kind": "loads", "source", "loads", "bytes"}                  cumulative source loads of a node
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict

from .shipping import Outbox
from .rundir import METRICS, TILES, TRACE, TRACE_PARQUET, JsonlWriter, RunDir, read_jsonl

STAGES = ("load", "parse", "preprocess", "compare", "postprocess", "write")


class MetricsState:
    def __init__(self, n_items: int, tiles_total: int, pairs_total: int, bound_R: float | None,
                 initial_tiles: int = 0, initial_pairs: int = 0):
        self.n_items, self.tiles_total, self.pairs_total = n_items, tiles_total, pairs_total
        self.bound_R = bound_R
        self.t_start = time.time()
        self.tiles_done = initial_tiles  # a resumed run starts from what it reused
        self.pairs_done = initial_pairs
        self.stage_seconds = defaultdict(float)
        self.tier_sources: dict[tuple, dict] = {}
        self.load_sources: dict[str, dict] = {}
        self.actors: dict[str, dict] = defaultdict(
            lambda: {"tiles": 0, "pairs": 0, "busy_s": 0.0, "running": []})
        self._active_since: dict[str, float] = {}
        self.counted_tiles: set = set()

    def add(self, events) -> None:
        for ev in events:
            kind = ev.get("kind")
            if kind == "span":
                self.stage_seconds[ev["stage"]] += ev["t1"] - ev["t0"]
            elif kind == "tile_start":
                a = self.actors[ev["actor"]]
                if not a["running"]:
                    self._active_since[ev["actor"]] = ev["t"]
                a["running"].append(ev["id"])
            elif kind == "tile":
                a = self.actors[ev["actor"]]
                if ev["id"] in a["running"]:
                    a["running"].remove(ev["id"])
                    if not a["running"]:  # busy = wall time with at least one tile under way
                        a["busy_s"] += ev["t_end"] - self._active_since.pop(ev["actor"],
                                                                            ev["t_end"])
                if ev["id"] in self.counted_tiles:  # a retried tile counts once
                    continue
                self.counted_tiles.add(ev["id"])
                self.tiles_done += 1
                self.pairs_done += ev["pairs"]
                a = self.actors[ev["actor"]]
                a["tiles"] += 1
                a["pairs"] += ev["pairs"]
            elif kind == "tier":
                self.tier_sources[(ev["tier"], ev["source"])] = ev["stats"]
            elif kind == "loads":
                self.load_sources[ev["source"]] = {"loads": ev["loads"], "bytes": ev["bytes"]}

    def tiers(self) -> dict:
        out: dict = {}
        for (tier, _src), stats in self.tier_sources.items():
            agg = out.setdefault(tier, {"hits": 0, "misses": 0, "bytes_in": 0, "evictions": 0,
                                        "waits": 0})
            for k in agg:
                agg[k] += stats.get(k, 0)
        loads = sum(v["loads"] for v in self.load_sources.values())
        out["source"] = {"loads": loads,
                         "bytes": sum(v["bytes"] for v in self.load_sources.values())}
        return out

    def _actors(self, now: float) -> dict:
        out = {}
        for name, a in self.actors.items():
            busy = a["busy_s"] + (now - self._active_since[name] if a["running"] else 0.0)
            out[name] = {**a, "running": list(a["running"]), "busy_s": busy}
        return out

    def snapshot(self) -> dict:
        tiers = self.tiers()
        loads = tiers["source"]["loads"]
        now = time.time()
        return {"t": now, "elapsed": now - self.t_start, "tiles_done": self.tiles_done,
                "tiles_total": self.tiles_total, "pairs_done": self.pairs_done,
                "pairs_total": self.pairs_total, "loads": loads, "n_items": self.n_items,
                "R": loads / max(1, self.n_items), "bound_R": self.bound_R, "tiers": tiers,
                "stage_seconds": {s: round(self.stage_seconds.get(s, 0.0), 6) for s in STAGES},
                "actors": self._actors(now)}


class Metrics:
    def __init__(self, run_dir: str, n_items: int, tiles_total: int, pairs_total: int,
                 bound_R: float | None, interval: float = 0.5, initial_tiles: int = 0,
                 initial_pairs: int = 0, outbox: bool = False):
        """``outbox``: the run directory is out of this process's reach; records wait in
        ``self.outbox`` until the driver drains and appends them."""
        self.run = RunDir(run_dir)
        self.state = MetricsState(n_items, tiles_total, pairs_total, bound_R, initial_tiles,
                                  initial_pairs)
        self.outbox = Outbox() if outbox else None
        opener = self.outbox.writer if outbox else (lambda name: JsonlWriter(self.run.file(name)))
        self.metrics, self.trace, self.tiles = opener(METRICS), opener(TRACE), opener(TILES)
        self.interval = interval
        self._last = 0.0

    def record(self, events: list) -> None:
        self.state.add(events)
        self.trace.write([{k: v for k, v in e.items() if k != "kind"}
                          for e in events if e.get("kind") == "span"])
        self.tiles.write([{k: v for k, v in e.items() if k != "kind"}
                          for e in events if e.get("kind") == "tile"])
        if time.time() - self._last >= self.interval:  # a snapshot only when one is due
            self.tick()

    def tick(self, force: bool = False) -> dict:
        now = time.time()
        snap = self.state.snapshot()
        if force or now - self._last >= self.interval:
            self.metrics.write([snap])
            self._last = now
        return snap

    def drain(self) -> dict:
        """Records waiting for the driver, by file name (``outbox`` only)."""
        return self.outbox.drain() if self.outbox is not None else {}

    def close(self) -> dict:
        snap = self.tick(force=True)
        for w in (self.metrics, self.trace, self.tiles):
            w.close()
        return snap


class EventBuffer:
    """Batches events in an actor and sends them every ``interval`` seconds (fire and forget).

    ``metrics``: anything with ``record(events)`` returning an awaitable or None (a client of
    the run's ``Metrics``, or None to drop events).

    No event waits longer than about ``interval``: on an event loop (the async actors) an event
    that does not go out at once schedules a flush. Flushing only on the next ``add`` left a
    cache's loads in the buffer for as long as no one asked it for anything, and the progress
    line showed R = 0.00 for most of a run whose items were all loaded in its first second."""

    def __init__(self, metrics, interval: float = 0.5):
        self.metrics, self.interval = metrics, interval
        self.events: list = []
        self._last = time.time()
        self._timer = None
        # compute threads add spans while the event loop flushes: the batch is swapped out
        # under this lock, so no event is appended to a batch already sent
        self._lock = threading.Lock()

    def add(self, event: dict) -> None:
        with self._lock:
            self.events.append(event)
            due = time.time() - self._last >= self.interval
        if due:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a thread without a loop: the next add or flush sends it
                return
            self._timer = loop.call_later(max(0.0, self._last + self.interval - time.time()),
                                          self._flush_later)

    def _flush_later(self) -> None:
        self._timer = None
        self.flush()  # fire and forget, as from add

    def span(self, actor: str, stage: str, what, t0: float, t1: float,
             cpu: float | None = None) -> None:
        event = {"kind": "span", "actor": actor, "stage": stage, "what": str(what),
                 "t0": t0, "t1": t1}
        if cpu is not None:  # the thread's CPU seconds: wall minus waiting (GIL, cores)
            event["cpu"] = cpu
        self.add(event)

    def flush(self):
        timer = self._timer
        if timer is not None and _on_a_loop():  # the timer is the loop's: cancel it there only
            timer.cancel()
            self._timer = None
        with self._lock:
            self._last = time.time()
            batch, self.events = self.events, []
        if not batch or self.metrics is None:  # no metrics: events are dropped, not kept
            return None
        return self.metrics.record(batch)


def _on_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def trace_to_parquet(rundir: RunDir) -> None:
    """Copy the stage spans to Parquet at the end of a run (the JSON Lines stay).

    Arrow's JSON reader reads the file as it is: building the table from Python lists makes
    pyarrow import pandas, which costs a small run more than its compute. A file the reader
    refuses (a field whose type changes between blocks) goes through the Python rows."""
    import os

    import pyarrow as pa  # not pandas (above)
    import pyarrow.json as pj
    import pyarrow.parquet as pq
    path = rundir.file(TRACE)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    try:
        table = pj.read_json(path, read_options=pj.ReadOptions(
            block_size=min(2**31 - 1, max(1 << 20, os.path.getsize(path) + 1))))
    except (pa.ArrowInvalid, ValueError):
        rows = read_jsonl(path)
        if not rows:
            return
        names = list(dict.fromkeys(k for row in rows for k in row))  # a span may lack "cpu"
        table = pa.table({name: [row.get(name) for row in rows] for name in names})
    if table.num_rows == 0:
        return
    tmp = rundir.file(TRACE_PARQUET + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, rundir.file(TRACE_PARQUET))
