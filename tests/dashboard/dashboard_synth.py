"""A synthetic all-pairs run that writes a run directory in the documented format
(docs/run-directory.md), for the dashboard tests of what the engine cannot be made to do on cue:
exact timing, metrics lines caught half-written, a directory reused by a new run. No Ray, no
engine: it only writes files, and only the fields a real all-pairs run writes (tiers L1, L2 and
source; actors named node/device; the journal entries of the dense sink).

``SyntheticRun(run_dir, ...).start()`` writes progressively from a background thread (like a live
run, including metrics lines written in two halves so readers see partial last lines);
``write_run(run_dir, ...)`` writes a whole finished run at once with made-up timestamps.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path


def triangle_leaves(n: int, leaf: int) -> list[dict]:
    """Quadtree leaves of the Triangle(n) pair space (i < j), in Z-order, empty quadrants dropped."""
    out: list[dict] = []

    def pairs(r0, r1, c0, c1):
        tot = 0
        for i in range(r0, r1):
            lo = max(c0, i + 1)
            if lo < c1:
                tot += c1 - lo
        return tot

    def rec(r0, r1, c0, c1, depth):
        p = pairs(r0, r1, c0, c1)
        if p == 0:
            return
        if max(r1 - r0, c1 - c0) <= leaf:
            out.append({"id": len(out), "r0": r0, "r1": r1, "c0": c0, "c1": c1, "pairs": p, "depth": depth})
            return
        rm, cm = (r0 + r1) // 2, (c0 + c1) // 2
        for a, b, c, d in ((r0, rm, c0, cm), (r0, rm, cm, c1), (rm, r1, c0, cm), (rm, r1, cm, c1)):
            if a < b and c < d:
                rec(a, b, c, d, depth + 1)

    rec(0, n, 0, n, 0)
    return out


def _atomic_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


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
        line = json.dumps(obj) + "\n"
        with open(self.d / name, "a") as f:
            if split and self.realtime:
                half = len(line) // 2
                f.write(line[:half])
                f.flush()
                time.sleep(0.03)  # a reader polling now sees a partial last line
                f.write(line[half:])
            else:
                f.write(line)

    def _status(self, state: str, error: str | None = None) -> None:
        now = self._now()
        _atomic_json(self.d / "status.json", {"state": state, "error": error, "updated": now,
                                             "finished": now if state in ("finished", "failed") else None})

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - surfaced to the test through .error
            self.error = e
        finally:
            self.done.set()

    def _run(self) -> None:
        if self.start_delay_s and self.realtime:
            time.sleep(self.start_delay_s)
        self.d.mkdir(parents=True, exist_ok=True)
        t0 = self.t_start if self.t_start is not None else time.time()
        self._vt = t0
        n, S = self.n, self.S
        leaves = self.leaves
        pairs_total = sum(t["pairs"] for t in leaves)
        (self.d / "config.yaml").write_text(
            f"allpairs:\n  leaf_items: {self.leaf}\n  host_cache_items: {S}\n  plan: stripe\n"
            f"  eviction: next_use\napp:\n  app: jaccard\n  k: 21\n")
        meta = {"kind": "allpairs", "app": "jaccard",
                "space": {"type": "Triangle", "n_rows": n, "n_cols": n, "pairs": pairs_total},
                "n_items": n, "keys_sample": [f"genome_{i:02d}" for i in range(min(n, 50))],
                "leaf_items": self.leaf, "tiles_total": len(leaves), "pairs_total": pairs_total,
                "actors": [{"id": a, "node": "node-0", "device": "cpu"} for a in self.actors],
                "host_cache_items": S, "bound_R": 1 + n / (2 * S), "started": t0}
        _atomic_json(self.d / "meta.json", meta)
        _atomic_json(self.d / "tiles.json", leaves)
        self._status("starting")
        self._status("running")

        plan = self._plan()  # tiles with actor, times (relative, scaled to duration_s) and counter deltas
        # ---- emit, in time order: tile completions and snapshots every snapshot_s
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
            loads = tiers.get("source", {}).get("loads", 0)
            running = {a: [] for a in self.actors}
            for e in plan:
                if t0 + e["ts"] <= now < t0 + e["te"]:
                    running[e["actor"]].append(e["tile"]["id"])
            self._append("metrics.jsonl", {
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
                self._append("trace.jsonl", {**sp, "t0": t0 + sp["t0"], "t1": t0 + sp["t1"]})
                stage_s[sp["stage"]] += sp["t1"] - sp["t0"]
            for key, dv in e["delta"].items():
                cum[key] = cum.get(key, 0) + dv
            tiles_done += 1
            pairs_done += tile["pairs"]
            act[actor]["tiles"] += 1
            act[actor]["pairs"] += tile["pairs"]
            act[actor]["busy_s"] += e["busy"]
            self._append("tiles.jsonl", {"id": tile["id"], "actor": actor, "t_start": t0 + e["ts"], "t_end": t_end,
                                         "pairs": tile["pairs"]})
            self._append("journal.jsonl", {
                "tile": tile["id"], "actor": actor, "sink": "dense", "location": "matrix.zarr/similarity",
                "region": [tile["r0"], tile["r1"], tile["c0"], tile["c1"]], "length": tile["pairs"] * 8,
                "crc32": (tile["id"] * 2654435761) & 0xFFFFFFFF})
        end = self._now()
        snapshot(end)
        tiers = _unflatten(cum)
        loads = tiers.get("source", {}).get("loads", 0)
        import pyarrow as pa  # the engine copies the trace to Parquet at the end and keeps the JSONL
        import pyarrow.parquet as pq

        rows = [json.loads(x) for x in (self.d / "trace.jsonl").read_text().splitlines() if x.strip()]
        pq.write_table(pa.Table.from_pylist(rows), self.d / "trace.parquet.tmp")
        os.replace(self.d / "trace.parquet.tmp", self.d / "trace.parquet")
        _atomic_json(self.d / "summary.json", {
            "wall_s": end - t0, "R": loads / n, "loads": loads, "n_items": n, "tiles_done": tiles_done,
            "pairs_done": pairs_done, "bound_R": 1 + n / (2 * S),
            "tiers": tiers, "outputs": {"dense": str(self.d / "result" / "matrix.zarr")}})
        self._status("finished")

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
                    spans.append({"actor": actor, "stage": stage, "what": f"genome_{item:02d}", "t0": t, "t1": t + dur})
                    t += dur
            for stage in ("compare", "postprocess", "write"):
                dur = cost[stage] * speed * (tile["pairs"] / 16 if stage == "compare" else 1)
                spans.append({"actor": actor, "stage": stage, "what": str(tile["id"]), "t0": t, "t1": t + dur})
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
