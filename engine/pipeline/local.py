"""The local executor: every batch read and processed in the driver's own process, in order.

No Ray: for small data, tests, and the pair prefilter in front of an all-pairs run, where
starting actors would cost more than the work.

``run`` is the ``PipelineRun`` (run.py) that calls the executor with itself; an executor uses
only its driver-side calls (``start``, ``running``, ``dispatch``, ``on_batch``, ``snapshot``, the
``stage`` clocks) and imports nothing of run.py, which imports the executor it picks.
"""
from __future__ import annotations

import time

from .processor import Processor, read_batch, where


def run_local(run, source, specs: list, first: dict | None = None) -> dict:
    """``first``: batch 0 already read (by the executor choice's probe) and its read times."""
    proc = Processor(run.p.ops, run.cfg.method, run.cfg.op_clock)
    run.start(len(specs), None)
    run.running()
    for index, spec in enumerate(specs):
        t0, c0 = time.perf_counter(), time.thread_time()
        if index == 0 and first is not None:
            batch = first["batch"]
            t0, c0 = t0 - first["wall_s"], c0 - first["cpu_s"]
        else:
            batch = read_batch(source, spec, index)
        t1, c1 = time.perf_counter(), time.thread_time()
        order, rows = run.dispatch(index, len(batch))
        survivors, obs, order = proc.process(batch, order, rows, where(source, index, spec),
                                             run.cfg.columns)
        t2, c2 = time.perf_counter(), time.thread_time()
        run.stage["read_wall_s"] += t1 - t0
        run.stage["read_cpu_s"] += c1 - c0
        run.stage["process_wall_s"] += t2 - t1
        run.stage["process_cpu_s"] += c2 - c1
        run.on_batch(index, order, survivors, obs, len(batch))
        run.snapshot()
    return {"executor": "local"}
