"""The farm's Ray side: one ``FarmWorker`` per core running the tool on the units it is given,
and one ``NodeWriter`` per node holding that node's double-buffered stream files.

A worker prepares its node's shared files on its first unit (``shared.prepare_node``: only the
first worker of the node fetches them from the object store, the others find them ready), reads
its unit's bytes from the input file, runs the tool, and hands the outputs to its node's writer.
It does not wait for the writer: its result carries the append's reference, and the driver counts
the unit finished only once that append has returned (a failed append is a failed run of the
unit, retried), then journals it once the writer says its blocks are on disk. Waiting here held
the core idle for a writer round trip per unit.
"""
from __future__ import annotations

import os
import socket
import time

import ray

from .shared import prepare_node, scratch_dir
from .spec import FarmSpec
from .tool import run_unit
from .units import Unit, read_unit
from .writer import BlockWriter


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

    def append(self, unit: int, record: int, outputs: dict[str, bytes]) -> None:
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


@ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)
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
        out = {**base, "ok": result.ok, "seconds": result.seconds, "t_end": time.time(),
               "returncode": result.returncode, "error": result.error,
               "stderr": result.stderr, "bytes_in": len(data)}
        if result.ok:  # the driver waits for the append, not this core
            out["written"] = self.writer.append.remote(u.uid, u.first, result.outputs)
            out["bytes_out"] = sum(len(b) for b in result.outputs.values())
        return out
