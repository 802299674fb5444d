"""The local executor: every batch read and processed in the driver's own process, no Ray.

For small data, tests, the pair prefilter in front of an all-pairs run, and any run whose work
does not repay starting Ray (``placement.py``). Batches run on ``threads`` worker threads at
once (default: the CPUs): a worker reads a batch and runs it through the operators; numpy's
and awkward's kernels release the GIL, so a columnar selection keeps every core busy without
another process, a serialised batch or a second import of its libraries. Everything that
decides (``PipelineRun``: orders, statistics, sinks) stays on the calling thread: a worker gets
the order and a pure sample rule when its batch is submitted (``dispatch_plan``) and hands
back survivors and observations. A callable operator clock (a test's counter of the work done)
is one clock for the whole process, so such a run uses one worker.

``run`` is the ``PipelineRun`` (run.py) that calls the executor with itself; an executor uses
only its driver-side calls (``start``, ``running``, ``dispatch_plan``, ``on_batch``,
``snapshot``, the ``stage`` clocks) and imports nothing of run.py, which imports the executor
it picks.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from .processor import Processor, read_batch, where


def local_threads(requested: int | None, clock, n_batches: int) -> int:
    """Worker threads: the requested number or the CPUs, one for a callable clock, never more
    than there are batches."""
    if callable(clock):
        return 1
    return max(1, min(int(requested or os.cpu_count() or 1), n_batches))


def run_local(run, source, specs: list, first: dict | None = None) -> dict:
    """``first``: batch 0 already read (by the probe, ``first["batch"]``) and its read times."""
    cfg = run.cfg
    threads = local_threads(cfg.threads, cfg.op_clock, len(specs))
    mine = threading.local()
    columns = cfg.columns

    def work(index, spec, order, rows_of):
        proc = getattr(mine, "proc", None)
        if proc is None:
            proc = mine.proc = Processor(run.p.ops, cfg.method, cfg.op_clock)
        t0, c0 = time.perf_counter(), time.thread_time()
        if index == 0 and first is not None and first.get("batch") is not None:
            batch = first["batch"]
            t0, c0 = t0 - first["wall_s"], c0 - first["cpu_s"]
        else:
            batch = read_batch(source, spec, index)
        t1, c1 = time.perf_counter(), time.thread_time()
        survivors, obs, used = proc.process(batch, order, rows_of(len(batch)),
                                            where(source, index, spec), columns)
        t2, c2 = time.perf_counter(), time.thread_time()
        return survivors, obs, used, len(batch), (t1 - t0, c1 - c0, t2 - t1, c2 - c1)

    run.start(len(specs), None)
    run.running()
    pool = ThreadPoolExecutor(threads, thread_name_prefix="pairflow-batch")
    pending: dict = {}
    nxt = 0
    try:
        while nxt < len(specs) or pending:
            while nxt < len(specs) and len(pending) < threads:
                order, rows_of = run.dispatch_plan(nxt)
                pending[pool.submit(work, nxt, specs[nxt], order, rows_of)] = nxt
                nxt += 1
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=pending.get):
                index = pending.pop(fut)
                survivors, obs, used, n, (rw, rc, pw, pc) = fut.result()
                run.stage["read_wall_s"] += rw
                run.stage["read_cpu_s"] += rc
                run.stage["process_wall_s"] += pw
                run.stage["process_cpu_s"] += pc
                run.on_batch(index, used, survivors, obs, n)
                run.snapshot()
    finally:
        pool.shutdown(wait=not pending, cancel_futures=True)
    return {"executor": "local", "threads": threads}
