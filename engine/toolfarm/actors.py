"""The farm's Ray side: one ``FarmWorker`` per core running the tool on the units it is given,
and one ``NodeWriter`` per node holding that node's double-buffered stream files.

A worker prepares its node's shared files before the run starts (``shared.prepare_node``: only
the first worker of the node fetches them from the object store, the others find them ready).
Then one call, ``exchange``, is the driver's whole conversation with it: the call brings the
units the worker may queue next and returns what happened since the last one. A thread of the
worker's own runs the queued units one after another (reads the unit's bytes, runs the tool,
sends the outputs to the node's writer in batches), so the next tool starts the moment the last
one exits; a second thread waits for the writer's acknowledgements. Every core here also runs its share of
the farm's bookkeeping, and with every core running a tool each millisecond of it is taken from
a tool: one Ray task and one append per unit, with the driver waiting on each append's reference
(owned by the worker), cost the tools a share of their speed: hence one ``exchange`` and
batched appends (the farm against the tools' own threads, measured: benchmarks/RESULTS.md,
"Tool farm"). The driver counts a unit finished only once its append is acknowledged (a failed
append is a failed run of the unit, retried), and journals it once the writer says its blocks
are on disk.
"""
from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections import deque

import ray

from .shared import prepare_node, scratch_dir
from .spec import FarmSpec
from .tool import run_unit
from .units import Unit, read_unit
from .writer import BlockWriter


APPEND_BYTES = 1 << 20  # a worker's batch of outputs goes to the writer at this size
APPEND_S = 0.5          # or this age


@ray.remote(num_cpus=0, max_concurrency=8)
class NodeWriter:
    """One ``BlockWriter`` per stream, files ``result/STREAM/NAME`` (``.partial`` until the
    run finishes). Threaded: appends from the node's workers and the driver's drains overlap."""

    def __init__(self, result_dir: str, streams: list[str], name: str, flush_bytes: int,
                 flush_s: float):
        self.writers = {s: BlockWriter(os.path.join(result_dir, s, name), s, flush_bytes,
                                       flush_s) for s in streams}

    def ready(self) -> bool:
        """Up: awaited with the workers' ``ready``, so the writer's process start is over
        before the clock starts, not spent beside the first units' tools."""
        return True

    def append(self, blocks: list[tuple[int, int, dict[str, bytes]]]) -> None:
        """Units' outputs, each as (unit, first record, {stream: bytes})."""
        for unit, record, outputs in blocks:
            for stream, w in self.writers.items():
                w.append(unit, record, outputs.get(stream, b""))

    def drain(self) -> list[dict]:
        return [e for w in self.writers.values() for e in w.drain()]

    def close(self) -> dict:
        entries = [e for w in self.writers.values() for e in w.close()]
        stats = {s: {"bytes": w.written_bytes, "flushes": w.flushes, "file": w.location}
                 for s, w in self.writers.items()}
        return {"entries": entries, "stats": stats}

    def remove_scratch(self, root: str, farm_digest: str) -> None:
        """The run is over: the node's copy of the shared files goes."""
        import shutil
        shutil.rmtree(scratch_dir(root, farm_digest, ray.get_runtime_context().get_node_id()),
                      ignore_errors=True)


@ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0, max_concurrency=2)
class FarmWorker:
    def __init__(self, name: str, spec: dict, inputs: list[str], shared: list[dict],
                 volumes: list | None, scratch_root: str, farm_digest: str, values: dict,
                 writer):
        self.name = name
        self.spec = FarmSpec(**spec)
        self.inputs = inputs
        self.shared = shared[0]          # name -> {"path", "digest", "ref"} (ref not resolved)
        self.volumes = [tuple(v) for v in volumes] if volumes else None
        self.values, self.writer = values, writer
        self.node = ray.get_runtime_context().get_node_id()
        self.scratch = scratch_dir(scratch_root, farm_digest, self.node)
        self.prepared: dict | None = None
        self.todo: deque = deque()                  # units given, run in order (under cond)
        self.cond = threading.Condition()
        self.acks: queue.Queue = queue.Queue()      # outputs for the writer (None: send now)
        self.events: queue.Queue = queue.Queue()    # what the next exchange reports
        self.threads: list[threading.Thread] = []
        self.given = self.ran = 0                   # units given / run (ok or not)

    def ready(self) -> dict:
        """Up, with the node's shared files in place (prepared before the clock starts)."""
        info = {"worker": self.name, "node": self.node, "host": socket.gethostname(),
                "pid": os.getpid()}
        try:
            prep = self._prepare()
        except Exception as exc:
            return {**info, "error": f"node preparation failed: {exc}"}
        return {**info, "fetched_bytes": prep.get("fetched_bytes", 0),
                "prepare_s": prep.get("seconds", 0.0) if prep.get("prepared") else 0.0}

    def _prepare(self) -> dict:
        if self.prepared is None:
            self.prepared = prepare_node(self.scratch, self.shared, self.spec.prepare,
                                         self.volumes, self.spec.segment,
                                         lambda ref: ray.get(ref), self.values)
        return self.prepared

    def exchange(self, units: list[list[int]], wait_s: float = 0.5) -> list[tuple]:
        """Queue ``units`` behind those given before; return every event since the last
        exchange: ``("ran", result)`` when the tool finished a unit (ok or not), then
        ``("written", unit)`` or ``("write_failed", unit, error)`` when the writer answered
        its append. Returns once the driver is needed (nothing queued behind the running unit,
        a run or a write failed, or this worker is idle), else after ``wait_s``: a worker with
        two units queued calls the driver once every two units."""
        if not self.threads:
            self.threads = [threading.Thread(target=f, name=n, daemon=True) for f, n in
                            ((self._run_given, "farm-units"), (self._ack, "farm-acks"))]
            for t in self.threads:
                t.start()
        with self.cond:
            self.todo.extend(units)
            self.given += len(units)
            self.cond.notify()
        deadline, out = time.monotonic() + wait_s, []
        while True:
            try:
                out.append(self.events.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                return out
            while not self.events.empty():
                out.append(self.events.get_nowait())
            ran = [e for e in out if e[0] == "ran"]
            if self.given - self.ran <= (1 if ran else 0) or \
                    any(e[0] == "write_failed" for e in out) or \
                    any(not e[1]["ok"] for e in ran):
                return out

    def give_back(self, n: int) -> list[list[int]]:
        """Up to ``n`` queued units, never started (the last queued first out), for an idle
        worker: they are no longer this worker's."""
        with self.cond:
            back = [self.todo.pop() for _ in range(min(n, len(self.todo)))]
            self.given -= len(back)
        return back[::-1]

    def _run_given(self) -> None:
        while True:
            with self.cond:
                while not self.todo:
                    self.cond.wait()
                unit = self.todo.popleft()
            try:
                res = self.run(unit)
            except BaseException as exc:  # an event for every unit given, whatever happens
                res = {"unit": unit[0], "worker": self.name, "node": self.node, "ok": False,
                       "seconds": 0.0, "error": f"{type(exc).__name__}: {exc}"[:2000],
                       "returncode": None, "stderr": ""}
            outputs = res.pop("outputs", None)
            self.ran += 1
            self.events.put(("ran", res))  # before its append's answer, always
            if outputs is not None:  # the other thread sends it: the next tool starts now
                self.acks.put((res["unit"], Unit.from_list(unit).first, outputs))
            if not self.todo:
                self.acks.put(None)  # nothing queued: the driver may be waiting for these

    def _ack(self) -> None:
        """Send outputs to the writer in batches, each sent at ``APPEND_BYTES``, at
        ``APPEND_S`` old, or when nothing is queued to run; then report the writer's answer."""
        while True:
            first = self.acks.get()
            if first is None:
                continue
            batch, size = [first], sum(len(b) for b in first[2].values())
            deadline = time.monotonic() + APPEND_S
            while size < APPEND_BYTES:
                try:
                    block = self.acks.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if block is None:
                    break
                batch.append(block)
                size += sum(len(b) for b in block[2].values())
            try:
                ray.get(self.writer.append.remote(batch))
                for unit, _, _ in batch:
                    self.events.put(("written", unit))
            except Exception as exc:  # the writer failed (disk full, its node lost)
                for unit, _, _ in batch:
                    self.events.put(("write_failed", unit, f"writing the output failed: {exc}"))

    def run(self, unit: list[int]) -> dict:
        u = Unit.from_list(unit)
        t0 = time.time()
        base = {"unit": u.uid, "worker": self.name, "node": self.node, "t_start": t0}
        try:
            prep = self._prepare()
        except Exception as exc:
            return {**base, "ok": False, "error": f"node preparation failed: {exc}",
                    "returncode": None, "stderr": "", "seconds": time.time() - t0}
        try:
            data = read_unit(self.inputs[u.file], u)
            result = run_unit(self.spec, data, prep["paths"], self.scratch, self.values)
        except Exception as exc:  # unreadable input, a merge that cannot parse the output
            return {**base, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                    "returncode": None, "stderr": "", "seconds": time.time() - t0}
        out = {**base, "ok": result.ok, "seconds": result.seconds, "cpu_s": result.cpu_s,
               "t_end": time.time(),
               "returncode": result.returncode, "error": result.error,
               "stderr": result.stderr, "bytes_in": len(data)}
        if result.ok:  # to the writer, in a batch (``_run_given``)
            out["outputs"] = result.outputs
            out["bytes_out"] = sum(len(b) for b in result.outputs.values())
        return out
