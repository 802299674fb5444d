"""Run metrics: counters per tier, per stage and per actor, and the files the dashboard reads.

Actors send batched events to one ``Metrics`` (fire and forget; it lives in the run's
coordinator, engine/pairs/workers/coordinator.py). ``MetricsState`` is the pure aggregation (tested
without Ray); ``Metrics`` appends spans and finished tiles to JSON Lines and writes a cumulative
snapshot to ``metrics.jsonl`` at most every ``interval`` seconds.

The trace is bounded (``SpanTrace``): a tile adds three spans (~360 bytes), so 10^6 tiles wrote
365 MB of trace.jsonl, and converting it to Parquet at the end held most of a GiB. Spans are
written one a line until the trace holds ``TRACE_SPANS``; after that, one line per actor, stage
and ``COALESCE_S`` seconds stands for the spans that started in it (``n`` spans, ``busy``
seconds: the sum of their durations, ``cpu`` where they had it). ``stage_seconds`` stay exact:
the aggregation sees every span.

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
#: spans written one a line before the trace coalesces them (~35 MB of trace.jsonl)
TRACE_SPANS = 100_000
#: after that, one line per actor, stage and this many seconds
COALESCE_S = 1.0


class SpanTrace:
    """Spans to a writer (``write(records)``), one a line for the first ``budget``, then
    coalesced per actor, stage and ``bucket_s`` seconds (the module's docstring). A coalesced
    line is a span (``actor``, ``stage``, ``what``, ``t0``: the first start, ``t1``: the last
    end) with ``n`` and ``busy`` (and ``cpu``) added; it is written once a later span of any
    actor starts ``2 * bucket_s`` after its window, or at ``close``."""

    def __init__(self, writer, budget: int = TRACE_SPANS, bucket_s: float = COALESCE_S):
        self.writer, self.budget, self.bucket_s = writer, budget, bucket_s
        self.written = 0        # lines, one a span, before coalescing began
        self.coalesced = 0      # spans that went into coalesced lines
        self._open: dict[tuple, dict] = {}  # (actor, stage) -> the line being filled
        self._latest = float("-inf")

    def write(self, spans: list[dict]) -> None:
        room = max(0, self.budget - self.written)
        if room:
            self.writer.write(spans[:room])
            self.written += min(room, len(spans))
            spans = spans[room:]
        if not spans:
            return
        for sp in spans:
            key = (sp.get("actor"), sp.get("stage"))
            line = self._open.get(key)
            t0, t1 = float(sp["t0"]), float(sp["t1"])
            if line is not None and t0 >= line["_start"] + self.bucket_s:
                self._emit(key)
                line = None
            if line is None:
                line = self._open[key] = {"actor": key[0], "stage": key[1], "what": "",
                                          "t0": t0, "t1": t1, "n": 0, "busy": 0.0,
                                          "_start": t0}
            line["t0"], line["t1"] = min(line["t0"], t0), max(line["t1"], t1)
            line["n"] += 1
            line["busy"] += t1 - t0
            if "cpu" in sp:
                line["cpu"] = line.get("cpu", 0.0) + float(sp["cpu"])
            self._latest = max(self._latest, t0)
            self.coalesced += 1
        for key in [k for k, v in self._open.items()
                    if v["_start"] + 2 * self.bucket_s <= self._latest]:
            self._emit(key)

    def _emit(self, key) -> None:
        line = self._open.pop(key)
        del line["_start"]
        line["what"] = f"{line['n']} spans"
        self.writer.write([line])

    def close(self) -> None:
        for key in list(self._open):
            self._emit(key)


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
        # the tiles counted, a byte a tile (a set of 10^6 ints held ~60 MiB); ids outside
        # 0..tiles_total-1 (none in a run) in a set
        self._counted = bytearray(max(0, int(tiles_total)))
        self._counted_other: set = set()

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
                if not self._count(ev["id"]):  # a retried tile counts once
                    continue
                self.tiles_done += 1
                self.pairs_done += ev["pairs"]
                a = self.actors[ev["actor"]]
                a["tiles"] += 1
                a["pairs"] += ev["pairs"]
            elif kind == "tier":
                self.tier_sources[(ev["tier"], ev["source"])] = ev["stats"]
            elif kind == "loads":
                self.load_sources[ev["source"]] = {"loads": ev["loads"], "bytes": ev["bytes"]}

    def _count(self, tile) -> bool:
        """Mark ``tile`` counted; False when it was already."""
        if isinstance(tile, int) and 0 <= tile < len(self._counted):
            if self._counted[tile]:
                return False
            self._counted[tile] = 1
            return True
        if tile in self._counted_other:
            return False
        self._counted_other.add(tile)
        return True

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
        self.metrics, self.tiles = opener(METRICS), opener(TILES)
        self.trace_file = opener(TRACE)
        self.trace = SpanTrace(self.trace_file)
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
        self.trace.close()
        for w in (self.metrics, self.trace_file, self.tiles):
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

    Arrow's JSON reader streams the file a block at a time into a Parquet writer, with the
    spans' fields as its schema (the optional ones where the file has them): the whole trace
    read as one table held several times its size at the end of a 10^6-tile run. Building the
    table from Python lists makes pyarrow import pandas, which costs a small run more than its
    compute: only a file the reader refuses (a damaged line) goes through the Python rows."""
    import mmap
    import os

    import pyarrow as pa  # not pandas (above)
    import pyarrow.json as pj
    import pyarrow.parquet as pq
    path = rundir.file(TRACE)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    fields = [("actor", pa.string()), ("stage", pa.string()), ("what", pa.string()),
              ("t0", pa.float64()), ("t1", pa.float64())]
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        fields += [(name, kind) for name, kind in (("cpu", pa.float64()), ("n", pa.int64()),
                                                   ("busy", pa.float64()))
                   if m.find(f'"{name}":'.encode()) >= 0]
    schema = pa.schema(fields)
    tmp = rundir.file(TRACE_PARQUET + ".tmp")
    rows = 0
    try:
        reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=8 << 20),
                              parse_options=pj.ParseOptions(explicit_schema=schema,
                                                            unexpected_field_behavior="ignore"))
        with pq.ParquetWriter(tmp, schema) as out:
            for batch in reader:
                rows += batch.num_rows
                out.write_batch(batch)
    except (pa.ArrowInvalid, ValueError):
        recs = read_jsonl(path)
        names = list(dict.fromkeys(k for row in recs for k in row))  # a span may lack "cpu"
        table = pa.table({name: [row.get(name) for row in recs] for name in names})
        rows = table.num_rows
        if rows:
            pq.write_table(table, tmp)
    if not rows:
        if os.path.exists(tmp):
            os.remove(tmp)
        return
    os.replace(tmp, rundir.file(TRACE_PARQUET))
