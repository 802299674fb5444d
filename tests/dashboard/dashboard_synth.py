"""A synthetic all-pairs run that writes a run directory in the documented format
(docs/run-directory.md), for the dashboard tests.  No Ray, no engine: it only writes files.

``SyntheticRun(run_dir, ...).start()`` writes progressively from a background thread (like a live
run, including metrics lines written in two halves so readers see partial last lines);
``write_run(run_dir, ...)`` writes a whole run at once with made-up timestamps (a finished run,
or a failed one with ``fail_after=k``).
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
    metrics.jsonl every ``snapshot_s``.  ``fail_after`` = k: the run fails after k tiles.
    """

    def __init__(self, run_dir, *, n_items=32, leaf_items=4, actors=("dev-0", "dev-1"), duration_s=8.0,
                 snapshot_s=0.25, host_cache_items=8, device_cache_items=6, realtime=True, fail_after=None,
                 convert_trace=False, with_pipeline=False, t_start=None, start_delay_s=0.0):
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
        self.fail_after = fail_after
        self.convert_trace = convert_trace
        self.with_pipeline = with_pipeline
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
            f"app:\n  name: jaccard\n  k: 21\ndata:\n  inputs: synthetic/*.fa\nscheduler:\n  leaf_items: {self.leaf}\n"
            f"cache:\n  host_items: {S}\n")
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

        per_tile = self.duration_s / max(1, len(leaves))
        # cache simulation: L1 per actor (LRU of S1), L2 shared (LRU of S)
        l1 = {a: OrderedDict() for a in self.actors}
        l2: OrderedDict = OrderedDict()
        seen: set = set()
        c = {"L1": dict(hits=0, misses=0, bytes_in=0, evictions=0), "L2": dict(hits=0, misses=0, bytes_in=0,
                                                                               evictions=0),
             "L3": dict(hits=0, misses=0, hops={"1": {"asks": 0, "hits": 0}, "2": {"asks": 0, "hits": 0}}),
             "source": dict(loads=0, bytes=0)}
        stage_s = {s: 0.0 for s in ("load", "parse", "preprocess", "compare", "postprocess", "write")}
        act = {a: {"tiles": 0, "pairs": 0, "busy_s": 0.0, "running": []} for a in self.actors}
        item_bytes = 1 << 20
        tiles_done = pairs_done = 0
        next_snap = t0 + self.snapshot_s
        actor_free = {a: t0 for a in self.actors}

        def snapshot(now: float) -> None:
            loads = c["source"]["loads"]
            self._append("metrics.jsonl", {
                "t": now, "elapsed": now - t0, "tiles_done": tiles_done, "tiles_total": len(leaves),
                "pairs_done": pairs_done, "pairs_total": pairs_total, "loads": loads, "n_items": n,
                "R": loads / n, "tiers": json.loads(json.dumps(c)), "stage_seconds": dict(stage_s),
                "actors": {a: dict(v) for a, v in act.items()}}, split=True)

        def touch(actor, item, t):
            """Return the stages needed to make item resident in actor's L1."""
            if item in l1[actor]:
                l1[actor].move_to_end(item)
                c["L1"]["hits"] += 1
                return []
            c["L1"]["misses"] += 1
            c["L1"]["bytes_in"] += item_bytes
            l1[actor][item] = True
            if len(l1[actor]) > self.S1:
                l1[actor].popitem(last=False)
                c["L1"]["evictions"] += 1
            if item in l2:
                l2.move_to_end(item)
                c["L2"]["hits"] += 1
                return ["preprocess"]
            c["L2"]["misses"] += 1
            c["L2"]["bytes_in"] += item_bytes
            l2[item] = True
            if len(l2) > S:
                l2.popitem(last=False)
                c["L2"]["evictions"] += 1
            # L3: the directory knows another node holding even items seen before (hop 1 or 2)
            c["L3"]["hops"]["1"]["asks"] += 1
            if item in seen and item % 2 == 0:
                c["L3"]["hits"] += 1
                hop = "1" if item % 4 == 0 else "2"
                if hop == "2":
                    c["L3"]["hops"]["2"]["asks"] += 1
                c["L3"]["hops"][hop]["hits"] += 1
                return ["preprocess"]
            c["L3"]["misses"] += 1
            seen.add(item)
            c["source"]["loads"] += 1
            c["source"]["bytes"] += item_bytes
            return ["load", "parse", "preprocess"]

        if self.with_pipeline:
            self._append("pipeline.jsonl", {"t": t0, "order": ["length_ratio", "sketch", "exact"],
                                            "ops": {"length_ratio": {"cost_s": 1e-6, "pass_rate": 0.9, "records_in": 0},
                                                    "sketch": {"cost_s": 2e-4, "pass_rate": 0.5, "records_in": 0},
                                                    "exact": {"cost_s": 5e-3, "pass_rate": 1.0, "records_in": 0}}})
        for k, tile in enumerate(leaves):
            if self.fail_after is not None and k >= self.fail_after:
                now = self._now()
                snapshot(now)
                self._status("failed", error=(
                    f"RuntimeError: tile {tile['id']} failed on {self.actors[k % len(self.actors)]}: "
                    "cannot parse genome_07.fa record 3: invalid character 'J'\n"
                    "Traceback (most recent call last):\n  File \"apps/jaccard.py\", line 42, in parse\n"
                    "ValueError: invalid character 'J'"))
                return
            # the actor that is free first takes the tile (dev-0 is faster: 2/3 of the time)
            actor = min(self.actors, key=lambda a: actor_free[a])
            speed = 1.0 if actor == self.actors[0] else 1.6
            ts = max(actor_free[actor], self._now() if self.realtime else t0)
            act[actor]["running"] = [tile["id"]]
            items = sorted(set(range(tile["r0"], tile["r1"])) | set(range(tile["c0"], tile["c1"])))
            t = ts
            spans = []
            for item in items:
                for stage in touch(actor, item, t):
                    dur = {"load": 0.02, "parse": 0.015, "preprocess": 0.005}[stage] * per_tile * speed
                    spans.append({"actor": actor, "stage": stage, "what": f"genome_{item:02d}", "t0": t, "t1": t + dur})
                    stage_s[stage] += dur
                    t += dur
            dur = 0.5 * per_tile * speed
            spans.append({"actor": actor, "stage": "compare", "what": str(tile["id"]), "t0": t, "t1": t + dur})
            stage_s["compare"] += dur
            t += dur
            for stage, frac in (("postprocess", 0.05), ("write", 0.05)):
                dur = frac * per_tile * speed
                spans.append({"actor": actor, "stage": stage, "what": str(tile["id"]), "t0": t, "t1": t + dur})
                stage_s[stage] += dur
                t += dur
            t_end = max(t, ts + per_tile * speed * len(self.actors) * 0.8)
            actor_free[actor] = t_end
            # snapshots due before this tile ends
            while next_snap < t_end:
                self._sleep_until(next_snap)
                snapshot(next_snap if not self.realtime else time.time())
                next_snap += self.snapshot_s
            self._sleep_until(t_end)
            for sp in spans:
                self._append("trace.jsonl", sp)
            tiles_done += 1
            pairs_done += tile["pairs"]
            act[actor]["tiles"] += 1
            act[actor]["pairs"] += tile["pairs"]
            act[actor]["busy_s"] += t - ts
            act[actor]["running"] = []
            self._append("tiles.jsonl", {"id": tile["id"], "actor": actor, "t_start": ts, "t_end": t_end,
                                         "pairs": tile["pairs"]})
            self._append("journal.jsonl", {"tile": tile["id"], "sink": "matrix", "location": "result/matrix.zarr",
                                           "length": tile["pairs"] * 4, "crc32": (tile["id"] * 2654435761) & 0xFFFFFFFF})
            if self.with_pipeline and k % 4 == 3:
                f = (k + 1) / len(leaves)
                self._append("pipeline.jsonl", {
                    "t": self._now(), "order": ["length_ratio", "sketch", "exact"] if f < 0.5 else
                    ["sketch", "length_ratio", "exact"],
                    "ops": {"length_ratio": {"cost_s": 1e-6, "pass_rate": 0.9 - 0.3 * f, "records_in": pairs_done},
                            "sketch": {"cost_s": 2e-4 * (1 - 0.5 * f), "pass_rate": 0.5 - 0.2 * f,
                                       "records_in": pairs_done},
                            "exact": {"cost_s": 5e-3, "pass_rate": 1.0, "records_in": pairs_done // 2}}})
        end = self._now()
        snapshot(end)
        loads = c["source"]["loads"]
        if self.convert_trace:
            import pyarrow as pa
            import pyarrow.parquet as pq

            rows = [json.loads(x) for x in (self.d / "trace.jsonl").read_text().splitlines() if x.strip()]
            pq.write_table(pa.Table.from_pylist(rows), self.d / "trace.parquet.tmp")
            os.replace(self.d / "trace.parquet.tmp", self.d / "trace.parquet")
            (self.d / "trace.jsonl").unlink()
        _atomic_json(self.d / "summary.json", {
            "wall_s": end - t0, "R": loads / n, "loads": loads, "n_items": n, "tiles_done": tiles_done,
            "pairs_done": pairs_done, "bound_R": 1 + n / (2 * S),
            "tiers": {k: {kk: vv for kk, vv in v.items() if kk != "hops"} for k, v in c.items()},
            "results": {"matrix": "result/matrix.zarr"}})
        self._status("finished")


def write_run(run_dir, **kw) -> SyntheticRun:
    """Write a whole run immediately (virtual clock ending now)."""
    kw.setdefault("duration_s", 20.0)
    kw.setdefault("t_start", time.time() - 2 * kw["duration_s"])
    r = SyntheticRun(run_dir, realtime=False, **kw)
    r._run()
    return r
