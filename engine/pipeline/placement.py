"""In this process or on Ray: a pipeline's executor, chosen from its work by the rule all-pairs
runs and farms follow (``engine.run.executor_choice.choose``).

Starting Ray costs seconds; the default ``pairflow app=hep`` (2,421 events, one batch) has a
fraction of one of operator time. So before dispatching anything, a run of several batches
whose executor is ``auto`` (or whose batch size is, ``sizing.py``) reads its first batch and
runs samples of two sizes of it through every operator (what the adaptive run's first batch
does anyway): read and operator seconds per record, the operators' fixed cost per call, and
the cost per record of the order the run would take, scaled to the source's record count and
divided by the CPUs. A source that does not say how many records it holds (no
``num_entries``, no ``records`` in its ``describe()``) gives no estimate: Ray, as an all-pairs
run without a probe. A source of one batch runs in-process under ``auto`` unprobed. In-process,
the probed batch is not read again unless the batches were re-cut.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..run.executor_choice import choose
from .processor import Processor, read_batch, where
from .protocol import describe_source

EXECUTORS = ("auto", "local", "inprocess", "ray")  # local and inprocess: the same, no Ray


def pipeline_executor(executor: str, ray_address: str | None, estimate_s: float | None,
                      max_s: float, ray_up: bool = False, n_batches: int | None = None) -> str:
    """``"local"`` (in this process) or ``"ray"``; pure (``ray_up``: the caller's
    ``ray_is_up()``). A source of one batch runs in this process under ``auto`` (no cluster
    named, no Ray up) whatever its size: one batch runs on one worker either way, so Ray's
    start could not be repaid, and nothing needs probing."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if executor == "auto" and n_batches == 1 and not ray_address and not ray_up:
        return "local"
    kind = choose("inprocess" if executor == "local" else executor, ray_address, estimate_s,
                  max_s, ray_up)
    return "local" if kind == "inprocess" else kind


def records_total(source, specs: list, first_len: int) -> int | None:
    """The source's record count when it says (or holds one batch only); None when unknown."""
    n = getattr(source, "num_entries", None)
    if callable(n):
        n = n()
    if n is None:
        n = describe_source(source).get("records")
    if n is None and len(specs) == 1:
        n = first_len
    return None if n is None else int(n)


def work_estimate_s(read_s: float, n_read: int, fixed_s: float, per_record_s: float,
                    total: int | None, n_batches: int, cpus: int) -> float | None:
    """Seconds of work per CPU: reading (``read_s`` for ``n_read`` records) and the operators
    (``fixed_s`` per batch, ``per_record_s`` per record: every operator on the records that
    passed its dependencies, as the sample runs them) over the source's ``total`` records in
    ``n_batches`` batches, divided by the CPUs; None when the total is unknown."""
    if total is None or n_read <= 0:
        return None
    work = read_s / n_read * total + fixed_s * n_batches + per_record_s * total
    return work / max(1, cpus)


def _bytes(batch) -> int:
    return int(sum(getattr(v, "nbytes", 0) for v in batch.columns.values()))


def probe(run, source, specs: list) -> dict:
    """Read batch 0 and time samples of two sizes of it through every operator (thread CPU
    time, which time-sharing a busy machine inflates less than the wall clock): each
    operator's fixed cost per call (awkward's, numpy's: ms a call whatever its size) is told
    apart from its cost per record, so a tiny sample does not scale its fixed cost up to the
    whole source. The first pass only warms (imports, caches). The cost per record is that of
    the order the run would take (the policy's order from the sample's costs and pass rates;
    a fixed run's own order), not of every operator on every record: a heavy operator behind
    tight cuts sees a few records in a hundred. Returns the first batch with its read times
    (for the local executor to use) and the measurements ``work_estimate_s`` and
    ``BatchSizer`` take."""
    cfg = run.cfg
    t0, c0 = time.perf_counter(), time.thread_time()
    batch = read_batch(source, specs[0], 0)
    out = {"batch": batch, "wall_s": time.perf_counter() - t0, "cpu_s": time.thread_time() - c0}
    n = len(batch)
    # reading per record from a second batch where there is one: the first read also opens
    # the file and parses its metadata (seconds for a 10^6-event file), once per run
    read_s, read_n = out["cpu_s"], n
    if len(specs) > 1:
        c1 = time.thread_time()
        read_n = len(read_batch(source, specs[1], 1))
        read_s = time.thread_time() - c1
    proc, label = Processor(run.p.ops, cfg.method, "cpu"), where(source, 0, specs[0])
    small = run.boot_sample.rows(0, n)
    big = np.arange(min(n, max(8 * len(small), 256)), dtype=np.int64)
    runs = [{o[0]: o for o in proc._sample(batch, rows, label)} for rows in (small, small, big)]
    small_obs, big_obs = runs[1], runs[2]
    fixed, cost, rate = 0.0, {}, {}
    for name, (_, n_big, passed, t_big, _) in big_obs.items():
        _, n_small, _, t_small, _ = small_obs.get(name, (name, 0, 0, 0.0, True))
        per = (t_big - t_small) / (n_big - n_small) if n_big > n_small else t_big / n_big
        per = max(0.0, per)
        fixed += max(0.0, min(t_small, t_big) - per * n_small)
        cost[name], rate[name] = per, passed / n_big
    order = run.fixed or run.policy.order({k: (cost[k], rate[k]) for k in cost})
    per_record = run.policy.expected_cost(order, {k: (cost[k], rate[k]) for k in cost}) \
        if cost else 0.0
    out.update(n=n, read_per_record_s=read_s / max(1, read_n), op_fixed_s=fixed,
               op_per_record_s=per_record, bytes_per_record=_bytes(batch) / max(1, n),
               total=records_total(source, specs, n),
               cpus=int(cfg.num_cpus or os.cpu_count() or 1))
    return out


def estimate(probed: dict, n_batches: int) -> float | None:
    """``work_estimate_s`` from a probe, for a source cut into ``n_batches``."""
    return work_estimate_s(probed["read_per_record_s"] * probed["n"], probed["n"],
                           probed["op_fixed_s"],
                           probed["op_per_record_s"], probed["total"], n_batches,
                           probed["cpus"])
