"""The Ray executor: slot actors that read (data setup, DS) or process (DP) batches.

The only module of the pipeline engine that imports Ray. Of ``slots`` slot actors, slots
``[0, n_ds)`` read and ``[n_ds, slots)`` process; ``DSDPBalancer`` moves that boundary from the
measured costs of each side. A decoded batch goes from its reader to a processor through the
object store (the reader owns it) and only the survivors come back to the driver, which feeds
``PipelineRun``. Slot actors are kept across runs of one Ray session: starting one costs about a
second. As in ``local.py``, ``run`` is the calling ``PipelineRun``, used by its driver-side calls
only (and its run directory and runtime settings), not imported.
"""
from __future__ import annotations

import os
import time
from collections import deque

import ray

from . import memory
from ..run.rundir import LOG
from ..run.runtime import init_ray
from .ordering import DSDPBalancer
from .processor import Processor, read_batch, where


@ray.remote(num_cpus=0, max_restarts=0)
class PipelineSlot:
    """One slot: reads batches (DS) or processes them (DP), whichever role the driver gives it;
    calls run one at a time, so a slot uses at most one core (``num_cpus=0``: the driver does
    the accounting)."""

    def __init__(self):
        self.runs: dict = {}
        self.kept = False  # memory.keep() in force for the configured run

    def configure(self, run_id, source, ops, method, clock, columns, keep_memory=True):
        self.runs = {run_id: (source, Processor(ops, method, clock), columns)}
        if keep_memory and not self.kept:
            self.kept = memory.keep()
        return True

    def release(self, run_id):
        self.runs.pop(run_id, None)
        if self.kept:
            memory.release()
            self.kept = False
        return True

    @ray.method(num_returns=2)
    def read(self, run_id, spec, index):
        source = self.runs[run_id][0]
        t0, c0 = time.perf_counter(), time.thread_time()
        batch = read_batch(source, spec, index)
        info = {"index": index, "records": len(batch), "wall_s": time.perf_counter() - t0,
                "cpu_s": time.thread_time() - c0}
        return batch, info

    def process(self, run_id, batch, index, order, rows, label):
        _, proc, columns = self.runs[run_id]
        t0, c0 = time.perf_counter(), time.thread_time()
        survivors, obs, used = proc.process(batch, order, rows, label, columns)
        info = {"records": len(batch), "wall_s": time.perf_counter() - t0,
                "cpu_s": time.thread_time() - c0, "order": used}
        return survivors, obs, info


_POOL: list = []


def _slot_pool(n: int) -> list:
    """``n`` slot actors, the live ones of earlier runs of this Ray session first."""
    global _POOL
    alive = []
    if _POOL:
        try:
            ray.get([a.release.remote(None) for a in _POOL], timeout=30)
            alive = list(_POOL)
        except Exception:
            alive = []
    while len(alive) < n:
        alive.append(PipelineSlot.remote())
    _POOL = alive
    return alive[:n]


def _cost_per_record(infos, clock: str) -> float:
    return sum(i[clock] for i in infos) / max(1, sum(i["records"] for i in infos))


class _Driver:
    """The driver's loop over the slots: keep readers and processors fed, collect what
    finishes, and let the balancer move the DS/DP boundary at its checkpoints."""

    def __init__(self, run, source, specs: list, pool: list, run_id: str,
                 balancing: bool):
        cfg = run.cfg
        self.run, self.source, self.specs, self.pool = run, source, specs, pool
        self.run_id, self.balancing = run_id, balancing
        self.bal: DSDPBalancer = run.balancer
        self.slots = len(pool)
        self.depth = max(1, cfg.depth)
        self.max_ready = cfg.max_ready or 2 * self.slots
        self.clock = "cpu_s" if cfg.balance_clock == "cpu" else "wall_s"
        self.inflight = {i: 0 for i in range(self.slots)}   # calls queued on each slot
        self.reading: dict = {}      # info ref -> (index, batch ref, slot)
        self.ready: deque = deque()  # (index, batch ref, records)
        self.processing: dict = {}   # result ref -> (index, slot)
        self.ds_recent: deque = deque(maxlen=8)
        self.dp_recent: deque = deque(maxlen=8)
        self.next = 0

    def submit(self) -> None:
        """Slots [0, n_ds) read, [n_ds, slots) process; a slot whose role changed finishes
        what it has queued first (its calls run one at a time)."""
        run, specs, bal = self.run, self.specs, self.bal
        for s in range(bal.n_ds):
            while (self.next < len(specs) and self.inflight[s] < self.depth
                   and len(self.ready) + len(self.reading) < self.max_ready):
                b_ref, i_ref = self.pool[s].read.remote(self.run_id, specs[self.next], self.next)
                self.reading[i_ref] = (self.next, b_ref, s)
                self.inflight[s] += 1
                self.next += 1
        for s in range(bal.n_ds, self.slots):
            while self.ready and self.inflight[s] < self.depth:
                index, b_ref, n = self.ready.popleft()
                order, rows = run.dispatch(index, n)
                ref = self.pool[s].process.remote(self.run_id, b_ref, index, order, rows,
                                                  where(self.source, index, specs[index]))
                self.processing[ref] = (index, s)
                self.inflight[s] += 1

    def collect(self, ref) -> None:
        run = self.run
        if ref in self.reading:
            index, b_ref, s = self.reading.pop(ref)
            info = ray.get(ref)
            self.inflight[s] -= 1
            self.ready.append((index, b_ref, info["records"]))
            self.ds_recent.append(info)
            run.stage["read_wall_s"] += info["wall_s"]
            run.stage["read_cpu_s"] += info["cpu_s"]
            return
        index, s = self.processing.pop(ref)
        survivors, obs, info = ray.get(ref)
        self.inflight[s] -= 1
        self.dp_recent.append(info)
        run.stage["process_wall_s"] += info["wall_s"]
        run.stage["process_cpu_s"] += info["cpu_s"]
        run.on_batch(index, info["order"], survivors, obs, info["records"])
        if (self.balancing and self.bal.due(run.batches_done) and self.ds_recent
                and self.dp_recent):
            self.bal.checkpoint(_cost_per_record(self.ds_recent, self.clock),
                                _cost_per_record(self.dp_recent, self.clock), run.batches_done)

    def loop(self) -> None:
        run = self.run
        while run.batches_done < len(self.specs):
            self.submit()
            done, _ = ray.wait(list(self.reading) + list(self.processing), num_returns=1,
                               timeout=0.5)
            for ref in done:
                self.collect(ref)
            run.snapshot(reading=len(self.reading), ready=len(self.ready),
                         processing=len(self.processing))


def run_ray(run, source, specs: list) -> dict:
    cfg = run.cfg
    t0 = time.time()
    init_ray(cfg.ray_address, cfg.num_cpus, cfg.object_store_mb,
             log_path=os.path.join(run.path, LOG))
    ray_init_s = time.time() - t0
    cpus = int(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
    slots = max(2, cfg.slots or cpus + 1)
    if cfg.ds_slots is not None and not 1 <= cfg.ds_slots <= slots - 1:
        raise ValueError(f"ds_slots must be in [1, {slots - 1}] with {slots} slots, "
                         f"got {cfg.ds_slots}")
    run.balancer = DSDPBalancer(slots, n_ds=cfg.ds_slots, cores=cpus,
                                interval0=cfg.checkpoint, max_interval=cfg.max_checkpoint)
    balancing = cfg.balance and cfg.ds_slots is None
    run.start(len(specs), slots)
    run_id = os.path.basename(run.path) + f"-{time.time_ns()}"
    t1 = time.time()
    pool = _slot_pool(slots)
    src_ref, ops_ref = ray.put(source), ray.put(list(run.p.ops))
    ray.get([a.configure.remote(run_id, src_ref, ops_ref, cfg.method, cfg.op_clock, cfg.columns,
                                cfg.keep_memory) for a in pool])
    actors_s = time.time() - t1
    try:
        run.running()
        t_compute = time.time()
        _Driver(run, source, specs, pool, run_id, balancing).loop()
        return {"executor": "ray", "slots": slots, "cpus": cpus, "balanced": balancing,
                "phases": {"ray_init_s": ray_init_s, "actors_s": actors_s,
                           "compute_s": time.time() - t_compute}}
    finally:
        try:
            ray.get([a.release.remote(run_id) for a in pool], timeout=30)
        except Exception:
            pass
