"""A synthetic all-pairs run that writes a run directory, for the dashboard tests of what the
engine cannot be made to do on cue: exact timing, metrics lines caught half-written, a directory
reused by a new run. No Ray and no scheduling: its tiles, their times and the cache counters are
made up here, but every file goes through the engine's own writers (engine/run/rundir.py's
``RunRecorder``, ``write_json``, ``dumps`` and file names; engine/run/journal.py's
``JournalWriter``), the tiles are the engine's leaves (``space.leaves``), and each tile's values
go through the engine's ``DenseMatrix`` sink, whose journal entries (region, length, CRC32) are
the real ones. tests/dashboard/test_rundir.py holds
the files against a real run's (``test_the_synthetic_writer_writes_what_the_engine_writes``).

``SyntheticRun(run_dir, ...).start()`` writes progressively from a background thread (like a live
run, including metrics lines written in two halves so readers see partial last lines);
``write_run(run_dir, ...)`` writes a whole finished run at once with made-up timestamps.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from pairflow.engine.pairs.sinks.base import SinkContext
from pairflow.engine.pairs.sinks.dense import DenseMatrix
from pairflow.engine.pairs.space import Tile, Triangle, leaves as engine_leaves
from pairflow.engine.run.journal import JournalWriter
from pairflow.engine.run.rundir import (JOURNAL, METRICS, STATUS, SUMMARY, TILE_PLAN, TILES, TRACE,
                               TRACE_PARQUET, JsonlWriter, RunDir, RunRecorder, dumps, write_json)

FIELD = "similarity"
# a matrix this many items on a side or fewer is written (zarr, through the sink) and its
# tiles journaled; a larger one (the 10,000-item run: 800 MB) is neither, as a run whose
# sinks keep nothing journals nothing
MATRIX_MAX_ITEMS = 2048


def triangle_leaves(n: int, leaf: int) -> list[dict]:
    """The leaves of the Triangle(n) pair space (i < j), as the engine cuts and writes them."""
    return [t.to_dict() for t in engine_leaves(Triangle(n), leaf)]


def similarity(tile: dict) -> np.ndarray:
    """A tile's made-up values: ((i * 7919 + j) mod 1000) / 1000 for row i, column j."""
    i = np.arange(tile["r0"], tile["r1"])[:, None]
    j = np.arange(tile["c0"], tile["c1"])[None, :]
    return ((i * 7919 + j) % 1000) / 1000.0


class SyntheticRun(threading.Thread):
    """Writes a Jaccard-like all-pairs run into ``run_dir``.

    ``duration_s`` is the (real, when ``realtime``) time the tiles take; snapshots go to
    metrics.jsonl every ``snapshot_s``.
    """

    def __init__(self, run_dir, *, n_items=32, leaf_items=4, actors=("node-0/dev-0", "node-0/dev-1"),
                 duration_s=8.0, snapshot_s=0.25, host_cache_items=8, device_cache_items=6, realtime=True,
                 t_start=None, start_delay_s=0.0):
        super().__init__(daemon=True, name="synthetic-run")
        self.d = Path(run_dir)
        self.n = n_items
        self.leaf = leaf_items
        self.actors = list(actors)
        self.duration_s = duration_s
        self.snapshot_s = snapshot_s
        self.S = host_cache_items
        self.S1 = device_cache_items
        self.realtime = realtime
        self.t_start = t_start
        self.start_delay_s = start_delay_s
        self.leaves = triangle_leaves(n_items, leaf_items)
        self.error: BaseException | None = None
        self.done = threading.Event()

    # the clock: real time, or a virtual clock for write-at-once runs
    def _now(self) -> float:
        return time.time() if self.realtime else self._vt

    def _sleep_until(self, t: float) -> None:
        if self.realtime:
            dt = t - time.time()
            if dt > 0:
                time.sleep(dt)
        else:
            self._vt = max(self._vt, t)

    def _append(self, name: str, obj: dict, split: bool = False) -> None:
        """One JSON line through the run's writer of that file (``JsonlWriter``); ``split``:
        in two halves, a moment apart, so a reader polling meanwhile sees a partial line."""
        out = self._writers[name]
        if not (split and self.realtime):
            out.write([obj])
            return
        line = dumps(obj) + "\n"
        half = len(line) // 2
        out.fh.write(line[:half])
        out.fh.flush()
        time.sleep(0.03)  # a reader polling now sees a partial last line
        out.fh.write(line[half:])
        out.fh.flush()

    def _status(self, state: str, error: str | None = None) -> None:
        # RunDir.set_status's record, at this run's (possibly virtual) time
        now = self._now()
        write_json(self.rundir.file(STATUS), {
            "state": state, "error": error, "updated": now,
            "finished": now if state in ("finished", "failed") else None})

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - surfaced to the test through .error
            self.error = e
        finally:
            self.done.set()

    def _sink(self) -> DenseMatrix | None:
        """The engine's dense sink over this run's space (None: a matrix too large to keep)."""
        n = self.n
        if n > MATRIX_MAX_ITEMS:
            return None
        keys = [f"genome_{i:02d}" for i in range(n)]
        sink = DenseMatrix(fields=[FIELD], diagonal={FIELD: 1.0})
        sink.open(SinkContext(self.rundir.result_dir, Triangle(n), self.leaf, keys, keys,
                              {FIELD: "float64"}))
        return sink

    def _write_tile(self, sink: DenseMatrix, tile: dict) -> list[dict]:
        """The tile's values through the sink; its journal entries, as the sink makes them."""
        t = Tile(**tile)
        mask = Triangle(self.n).mask(t.r0, t.r1, t.c0, t.c1)
        return sink.write_tile(t, {FIELD: similarity(tile)}, mask)

    def _run(self) -> None:
        if self.start_delay_s and self.realtime:
            time.sleep(self.start_delay_s)
        self.rundir = RunDir(str(self.d)).create()
        recorder = RunRecorder(self.rundir)
        t0 = self.t_start if self.t_start is not None else time.time()
        self._vt = t0
        n, S = self.n, self.S
        leaves = self.leaves
        pairs_total = sum(t["pairs"] for t in leaves)
        recorder.write_config({
            "allpairs": {"leaf_items": self.leaf, "host_cache_items": S, "plan": "zorder",
                         "eviction": "lru"},
            "app": {"app": "jaccard", "k": 21}})
        meta = {"kind": "allpairs", "app": "jaccard",
                "space": {"type": "Triangle", "n_rows": n, "n_cols": n, "pairs": pairs_total},
                "n_items": n, "keys_sample": [f"genome_{i:02d}" for i in range(min(n, 50))],
                "leaf_items": self.leaf, "tiles_total": len(leaves), "pairs_total": pairs_total,
                "actors": [{"id": a, "node": a.split("/")[0], "device": "cpu"}
                           for a in self.actors],
                "host_cache_items": S, "bound_R": 1 + n / (2 * S), "plan": "zorder",
                "eviction": "lru", "sinks": ["dense"], "started": t0}
        recorder.write_meta(meta)
        write_json(self.rundir.file(TILE_PLAN), leaves)  # the Z-order plan: the leaves' order
        self._status("starting")
        sink = self._sink()
        self._writers = {name: JsonlWriter(self.rundir.file(name))
                         for name in (METRICS, TRACE, TILES)}
        journal = JournalWriter(self.rundir.file(JOURNAL)) if sink is not None else None
        self._status("running")
        try:
            end, tiers, tiles_done, pairs_done = self._emit(t0, journal, sink)
        finally:
            if journal is not None:
                journal.close()
            for w in self._writers.values():
                w.close()
        loads = tiers.get("source", {}).get("loads", 0)
        import pyarrow as pa  # the engine copies the trace to Parquet at the end and keeps the JSONL
        import pyarrow.parquet as pq

        from pairflow.engine.run.rundir import read_jsonl
        rows = read_jsonl(self.rundir.file(TRACE))
        pq.write_table(pa.Table.from_pylist(rows), self.rundir.file(TRACE_PARQUET) + ".tmp")
        Path(self.rundir.file(TRACE_PARQUET) + ".tmp").replace(self.rundir.file(TRACE_PARQUET))
        outputs = {"dense": sink.finalize()} if sink is not None else {}
        recorder.write_summary({
            "app": "jaccard", "n_items": n, "tiles_total": len(leaves),
            "tiles_journaled": tiles_done if sink is not None else 0, "pairs_total": pairs_total, "leaf_items": self.leaf,
            "wall_s": end - t0, "R": loads / n, "loads": loads, "bound_R": 1 + n / (2 * S),
            "host_cache_items": S, "plan": "zorder", "eviction": "lru", "tiers": tiers,
            "outputs": outputs})
        self._status("finished")

    def _emit(self, t0: float, journal: JournalWriter | None, sink: DenseMatrix | None):
        """The run's tiles and snapshots in time order: (end, tiers, tiles, pairs done)."""
        n, S = self.n, self.S
        leaves = self.leaves
        pairs_total = sum(t["pairs"] for t in leaves)
        plan = self._plan()  # tiles with actor, times (relative, scaled to duration_s) and counter deltas
        cum: dict[tuple, float] = {}
        stage_s = {s: 0.0 for s in ("load", "parse", "preprocess", "compare", "postprocess", "write")}
        act = {a: {"tiles": 0, "pairs": 0, "busy_s": 0.0} for a in self.actors}
        tiles_done = pairs_done = 0
        next_snap = t0 + self.snapshot_s

        def snapshot(now: float) -> None:
            tiers = _unflatten(cum)
            for tier in ("L1", "L2"):
                for k in ("hits", "misses", "bytes_in", "evictions", "waits"):
                    tiers.setdefault(tier, {}).setdefault(k, 0)
            tiers.setdefault("source", {}).setdefault("loads", 0)
            tiers["source"].setdefault("bytes", 0)
            loads = tiers["source"]["loads"]
            running = {a: [] for a in self.actors}
            for e in plan:
                if t0 + e["ts"] <= now < t0 + e["te"]:
                    running[e["actor"]].append(e["tile"]["id"])
            self._append(METRICS, {
                "t": now, "elapsed": now - t0, "tiles_done": tiles_done, "tiles_total": len(leaves),
                "pairs_done": pairs_done, "pairs_total": pairs_total, "loads": loads, "n_items": n,
                "R": loads / n, "bound_R": 1 + n / (2 * S), "tiers": tiers, "stage_seconds": dict(stage_s),
                "actors": {a: {**v, "running": running[a]} for a, v in act.items()}}, split=True)

        for e in sorted(plan, key=lambda e: e["te"]):
            tile, actor, t_end = e["tile"], e["actor"], t0 + e["te"]
            while next_snap < t_end:
                self._sleep_until(next_snap)
                snapshot(time.time() if self.realtime else next_snap)
                next_snap += self.snapshot_s
            self._sleep_until(t_end)
            for sp in e["spans"]:
                self._append(TRACE, {**sp, "t0": t0 + sp["t0"], "t1": t0 + sp["t1"]})
                stage_s[sp["stage"]] += sp["t1"] - sp["t0"]
            for key, dv in e["delta"].items():
                cum[key] = cum.get(key, 0) + dv
            tiles_done += 1
            pairs_done += tile["pairs"]
            act[actor]["tiles"] += 1
            act[actor]["pairs"] += tile["pairs"]
            act[actor]["busy_s"] += e["busy"]
            self._append(TILES, {"id": tile["id"], "actor": actor, "t_start": t0 + e["ts"],
                                 "t_end": t_end, "pairs": tile["pairs"]})
            if sink is not None:
                journal.append(tile["id"], actor, self._write_tile(sink, tile))
        end = self._now()
        snapshot(end)
        return end, _unflatten(cum), tiles_done, pairs_done

    def _plan(self) -> list[dict]:
        """Simulate the run: the first free actor takes the next leaf (dev-0 is 1.6x faster), an
        LRU L1 per actor and a shared LRU L2 decide what is loaded.  Times are relative and scaled
        so that the run lasts ``duration_s``."""
        l1 = {a: OrderedDict() for a in self.actors}
        l2: OrderedDict = OrderedDict()
        c: dict[tuple, float] = {}
        item_bytes = 1 << 20

        def inc(*key, by=1):
            c[key] = c.get(key, 0) + by

        def touch(actor, item):
            if item in l1[actor]:
                l1[actor].move_to_end(item)
                inc("L1", "hits")
                return []
            inc("L1", "misses")
            inc("L1", "bytes_in", by=item_bytes)
            l1[actor][item] = True
            if len(l1[actor]) > self.S1:
                l1[actor].popitem(last=False)
                inc("L1", "evictions")
            if item in l2:
                l2.move_to_end(item)
                inc("L2", "hits")
                return ["preprocess"]
            inc("L2", "misses")
            inc("L2", "bytes_in", by=item_bytes)
            l2[item] = True
            if len(l2) > self.S:
                l2.popitem(last=False)
                inc("L2", "evictions")
            inc("source", "loads")
            inc("source", "bytes", by=item_bytes)
            return ["load", "parse", "preprocess"]

        cost = {"load": 0.04, "parse": 0.03, "preprocess": 0.01, "compare": 1.0, "postprocess": 0.1, "write": 0.1}
        free = {a: 0.0 for a in self.actors}
        plan = []
        for tile in self.leaves:
            actor = min(self.actors, key=lambda a: (free[a], self.actors.index(a)))
            speed = 1.0 if actor == self.actors[0] else 1.6
            before = dict(c)
            t = ts = free[actor]
            spans = []
            items = sorted(set(range(tile["r0"], tile["r1"])) | set(range(tile["c0"], tile["c1"])))
            for item in items:
                for stage in touch(actor, item):
                    dur = cost[stage] * speed
                    key = f"genome_{item:02d}"  # load and parse on the node's loader, as the
                    # engine's node cache records them; preprocess on the device actor
                    who, what = (actor, key) if stage == "preprocess" else \
                        (f"{actor.split('/')[0]}/loader", f"1 items ({key} .. {key})")
                    spans.append({"actor": who, "stage": stage, "what": what, "t0": t, "t1": t + dur})
                    t += dur
            for stage in ("compare", "postprocess", "write"):
                dur = cost[stage] * speed * (tile["pairs"] / 16 if stage == "compare" else 1)
                spans.append({"actor": actor, "stage": stage, "what": f"tile {tile['id']}", "t0": t, "t1": t + dur})
                t += dur
            idle = 0.25 * (t - ts)  # waiting for the scheduler / results
            free[actor] = t + idle
            plan.append({"tile": tile, "actor": actor, "ts": ts, "te": t, "busy": t - ts, "spans": spans,
                         "delta": {k: v - before.get(k, 0) for k, v in c.items() if v != before.get(k, 0)}})
        scale = self.duration_s / max(e["te"] for e in plan)
        for e in plan:
            e["ts"] *= scale
            e["te"] *= scale
            e["busy"] *= scale
            for sp in e["spans"]:
                sp["t0"] *= scale
                sp["t1"] *= scale
        return plan


def _unflatten(flat: dict[tuple, float]) -> dict:
    out: dict = {}
    for key, v in flat.items():
        d = out
        for k in key[:-1]:
            d = d.setdefault(k, {})
        d[key[-1]] = v
    return out


def write_run(run_dir, **kw) -> SyntheticRun:
    """Write a whole run immediately (virtual clock ending now)."""
    kw.setdefault("duration_s", 20.0)
    kw.setdefault("t_start", time.time() - 2 * kw["duration_s"])
    r = SyntheticRun(run_dir, realtime=False, **kw)
    r._run()
    return r
