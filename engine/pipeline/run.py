"""A pipeline and its run: configuration, the driver-side lifecycle, and the choice of executor.

``PipelineRun`` is what both executors drive: ``start`` (files, sinks), ``dispatch`` (the order
and sample rows to send with a batch), ``on_batch`` (statistics, sinks, re-plans), ``finish``
or ``fail``. It holds the run's state and decisions; the executors only move batches, and
``PipelineRecorder`` alone writes the run directory.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import InputError, PairflowError, root_cause
from ..run.executor_choice import INPROCESS_MAX_S, ray_is_up
from .batch import Batch
from .measure import OperatorStats, SampleRule
from .ordering import Backoff, DSDPBalancer, OpSpec, OrderPolicy, check_dag, topological
from .protocol import Op, PipelineSink, check_source, describe_source
from .record import PipelineRecorder, jsonable
from .result import PipelineResult


@dataclass
class PipelineConfig:
    """Every knob of a pipeline run (the Hydra ``pipeline:`` block has the same names)."""

    order: Any = "adaptive"          # adaptive | written | [names...] (fixed)
    method: str = "auto"             # the OrderPolicy: auto | exact | greedy
    replan_every: int = 2            # finished batches between re-plans (doubling while the
    max_replan_every: int = 16       #   order holds, up to max_replan_every)
    window: int = 16                 # batches in the stats window
    sample_rate: float | None = None  # records per batch run through every op (adaptive: 0.005)
    min_sample: int = 8
    sample_every: int = 1            # sample every k-th batch only
    sample_budget: float = 0.02      # adaptive: the sample costs at most this share of the work
    executor: str = "auto"           # auto | ray | local (= inprocess: this process, no Ray);
    inprocess_max_s: float = INPROCESS_MAX_S  # auto: local up to this much work per CPU
    batch: str = "auto"              # auto: merge the source's batches by the measured fixed
                                     #   vs per-record costs (sizing.py) | source: keep them
    threads: int | None = None       # local executor: batches at once; default the CPUs
    keep_memory: bool = True         # malloc keeps freed memory for reuse during the run
                                     #   (memory.py): big temporaries do not fault every call
    slots: int | None = None         # concurrent DS + DP slots; default CPUs + 1 (>= 2)
    ds_slots: int | None = None      # fixed number of reading slots; None: balanced
    balance: bool = True
    balance_clock: str = "cpu"       # cpu (thread CPU time; robust to time-sharing) | wall
    op_clock: str = "cpu"            # how operator costs are timed: cpu | wall (I/O-bound ops)
    checkpoint: int = 2              # first DS/DP checkpoint interval, batches (then doubles)
    max_checkpoint: int = 64
    max_ready: int | None = None     # batches read or being read, not yet processed;
                                     # default 2 x slots
    depth: int = 2                   # calls queued per slot actor (hides the Ray round trip)
    columns: Sequence[str] | None = None  # columns of the survivors to keep (None: all)
    collect: bool = True             # keep the survivors in the result (in memory)
    weight: str | None = None        # a column summed over the survivors in the cutflow
    name: str = "pipeline"
    runs_root: str = "runs"
    progress: bool = True
    seed: int = 0
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_mb: int | None = None


def _config(options: dict) -> PipelineConfig:
    unknown = set(options) - set(PipelineConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown pipeline option(s): {sorted(unknown)}")
    return PipelineConfig(**options)


def _fixed_order(cfg: PipelineConfig, specs: list[OpSpec], written: list[str]) -> list | None:
    """The order a non-adaptive run keeps; None for an adaptive run."""
    if isinstance(cfg.order, str):
        if cfg.order == "written":
            return list(written)
        if cfg.order != "adaptive":
            raise ValueError(f"order must be 'adaptive', 'written' or a list of operator "
                             f"names, got {cfg.order!r}")
        return None
    order = [str(x) for x in cfg.order]
    if topological(specs, order) != order:
        raise ValueError(f"order {order} breaks a dependency (after=)")
    return order


class PipelineRun:
    """The driver's side of one run: the operator order and its statistics, the sample, the
    survivors and the sinks. Executors call it from one thread, so it needs no locking, and
    it never touches Ray, so both executors share it unchanged."""

    def __init__(self, pipeline: "Pipeline", cfg: PipelineConfig, run_dir: str | None,
                 config_dump: dict | None):
        self.p, self.cfg = pipeline, cfg
        self.t_start = time.time()
        self.recorder = PipelineRecorder(run_dir, cfg.runs_root, cfg.name, cfg.progress)
        self.config_dump = config_dump
        self.specs = [o.spec for o in pipeline.ops]
        self.policy = OrderPolicy(self.specs, method=cfg.method)
        self.written = self.policy.written
        self.fixed = _fixed_order(cfg, self.specs, self.written)
        self.order = list(self.fixed or self.written)
        # until the first re-plan, an adaptive run lets each batch choose its order from its
        # own sample (a batch dispatched before any stats would otherwise run the written order)
        self.bootstrapping = self.fixed is None
        self._costs = None
        rate = cfg.sample_rate if cfg.sample_rate is not None else \
            (0.005 if self.fixed is None else 0.0)
        self.sample = SampleRule(rate, cfg.min_sample, cfg.seed, cfg.sample_every)
        self.boot_sample = SampleRule(max(rate, 0.005), max(cfg.min_sample, 16), cfg.seed)
        self.stats = {o.name: OperatorStats(o.kind, cfg.window) for o in self.specs}
        self.batches_done = 0
        # the first plan right after the first batch: it ends the bootstrap
        self.replan = Backoff(cfg.replan_every, cfg.max_replan_every, start=1)
        self.records_in = 0
        self.records_selected = 0
        self.weight_selected = 0.0
        self.orders_used: list = []
        self.replans: list = []
        self.selected: dict[int, Batch] = {}
        self.stage = {"read_wall_s": 0.0, "read_cpu_s": 0.0, "process_wall_s": 0.0,
                      "process_cpu_s": 0.0}
        self.balancer: DSDPBalancer | None = None
        self.warnings: list[str] = []
        # per order run: [operator seconds as run (not the sample's), events], for the report
        self.order_seconds: dict[tuple, list] = {}
        # which executor runs it and the work estimate that chose it (placement.py); the
        # batch size chosen from the probe's measurements (sizing.py)
        self.executor, self.estimate_s, self.sizing = cfg.executor, None, None

    @property
    def path(self) -> str:
        return self.recorder.path

    def start(self, n_batches: int, slots: int | None) -> None:
        cfg = self.cfg
        self.n_batches = n_batches
        source = describe_source(self.p.source)
        ops = [_op_dict(o) for o in self.specs]
        dump = self.config_dump or {"pipeline": jsonable(asdict(cfg)), "source": source,
                                    "ops": ops}
        self.meta = {"kind": "pipeline", "app": cfg.name, "source": source, "ops": ops,
                     "written_order": self.written,
                     "order_mode": "adaptive" if self.fixed is None else "fixed",
                     "initial_order": self.order, "n_batches": n_batches,
                     "executor": self.executor, "executor_requested": cfg.executor,
                     "work_estimate_s": self.estimate_s, "batch_sizing": self.sizing,
                     "slots": slots,
                     "sample_rate": self.sample.rate, "replan_every": cfg.replan_every,
                     "sinks": [s.name for s in self.p.sinks], "started": self.t_start}
        self.recorder.start(dump, self.meta)
        for s in self.p.sinks:
            s.open(self.recorder.result_dir)
        self._log_plan(changed=False)

    def running(self) -> None:
        self.recorder.running()

    def dispatch(self, index: int, n: int) -> tuple[list | None, np.ndarray]:
        """The order to send with batch ``index`` (None: choose from the sample) and the rows
        of its sample."""
        order, rows = self.dispatch_plan(index)
        return order, rows(n)

    def dispatch_plan(self, index: int):
        """``dispatch`` before the batch's length is known (an executor that reads and
        processes in one worker): the order, and a pure function of the length that gives the
        sample's rows from the decisions as they stand now."""
        if self.bootstrapping:
            rule = self.boot_sample
            return None, lambda n: rule.rows(index, n)
        order = list(self.order)
        if self.fixed is None and self.cfg.sample_budget and self._costs is not None:
            (expected, full, overhead), budget = self._costs, self.cfg.sample_budget
            rule = self.sample
            return order, lambda n: rule.budgeted(index, n, expected, full, overhead, budget)
        rule = self.sample
        return order, lambda n: rule.rows(index, n)

    def _update_costs(self) -> None:
        """Expected work per record of the current order, of running every operator on one
        record, and the operators' fixed costs per call: what the sample budget needs."""
        snaps = {n: s.snapshot() for n, s in self.stats.items()}
        if any(v["cost_s"] is None for v in snaps.values()):
            self._costs = None
            return
        full = sum(v["cost_s"] for v in snaps.values())
        overhead = sum(v["overhead_s"] or 0.0 for v in snaps.values())
        self._costs = (self.policy.expected_cost(self.order, self.stats), full, overhead)

    def _log_plan(self, changed: bool, expected: float | None = None) -> None:
        line = {"t": time.time(), "batch": self.batches_done, "order": list(self.order),
                "ops": {n: s.snapshot() for n, s in self.stats.items()}, "changed": changed,
                "expected_cost_s": expected}
        if self.balancer is not None:
            line.update(ds_slots=self.balancer.n_ds, dp_slots=self.balancer.n_dp)
        self.replans.append(line)
        self.recorder.plan(line)

    def snapshot(self, force: bool = False, **extra) -> None:
        """A heartbeat (throttled by the recorder unless ``force``); ``extra``: the executor's
        queue lengths."""
        def build(now: float) -> dict:
            snap = {"t": now, "elapsed": now - self.t_start, "batches_done": self.batches_done,
                    "batches_total": self.n_batches, "records_in": self.records_in,
                    "records_selected": self.records_selected,
                    "stage_seconds": {k: round(v, 6) for k, v in self.stage.items()}, **extra}
            if self.balancer is not None:
                snap.update(ds_slots=self.balancer.n_ds, dp_slots=self.balancer.n_dp)
            return snap
        self.recorder.heartbeat(build, force)

    def on_batch(self, index: int, order: Sequence[str], survivors: Batch, obs: list,
                 n_records: int) -> None:
        """One processed batch: its observations, its survivors to the sinks, and a re-plan
        when one is due."""
        spent = self.order_seconds.setdefault(tuple(order), [0.0, 0])
        for name, n_in, n_pass, sec, sampled in obs:
            self.stats[name].observe(n_in, n_pass, sec, sampled)
            if not sampled:
                spent[0] += sec
        spent[1] += n_records
        self.batches_done += 1
        self.records_in += n_records
        self.records_selected += len(survivors)
        if self.cfg.weight and len(survivors):
            self.weight_selected += float(np.sum(survivors[self.cfg.weight]))
        self.orders_used.append(list(order))
        for s in self.p.sinks:
            s.write(index, survivors)
        if self.cfg.collect:
            self.selected[index] = survivors
        if self.replan.due(self.batches_done):
            changed = False
            if self.fixed is None:
                self.bootstrapping = False
                new = self.policy.order(self.stats)
                changed = new != self.order
                self.order = new
                self._update_costs()
            self.replan.update(changed, self.batches_done)
            self._log_plan(changed, self.policy.expected_cost(self.order, self.stats))

    def _cutflow(self) -> tuple[list, dict]:
        """Per operator, in the written order: what it saw and passed as run and in the sample."""
        rows = []
        after = {o.name: list(o.after) for o in self.specs}
        for name in self.written:
            st = self.stats[name]
            t, s = st.total, st.sample_total
            rows.append({"op": name, "kind": st.kind, "after": after[name],
                         "records_in": t["records_in"], "passed": t["passed"],
                         "pass_rate": t["passed"] / t["records_in"] if t["records_in"] else None,
                         "seconds": t["seconds"],
                         "cost_s": t["seconds"] / t["records_in"] if t["records_in"] else None,
                         "sample_records_in": s["records_in"], "sample_passed": s["passed"],
                         "sample_pass_rate": (s["passed"] / s["records_in"]
                                              if s["records_in"] else None),
                         "sample_seconds": s["seconds"]})
        totals = {"records_in": self.records_in, "records_selected": self.records_selected,
                  "weight_selected": self.weight_selected if self.cfg.weight else None}
        return rows, totals

    def order_report(self) -> dict:
        """The written order, the chosen one and the cost per event of each: ``expected_s``
        from the operators' measured costs and pass rates (sample-based, so they hold whatever
        order measured them) plus their fixed costs per call spread over a batch's events,
        ``measured_s`` over the batches that ran that order (None when none did: an adaptive
        run may never run the written order)."""
        # every operator's fixed cost per call, paid once per batch wherever it sits
        snaps = [s.snapshot() for s in self.stats.values()]
        per_call = sum(v.get("overhead_s") or 0.0 for v in snaps)
        fixed = per_call * self.batches_done / self.records_in if self.records_in else 0.0

        def entry(order: list) -> dict:
            spent = self.order_seconds.get(tuple(order))
            expected = _finite(self.policy.expected_cost(order, self.stats))
            return {"order": list(order),
                    "expected_s": None if expected is None else expected + fixed,
                    "measured_s": spent[0] / spent[1] if spent and spent[1] else None,
                    "events": spent[1] if spent else 0}
        written, chosen = entry(self.written), entry(self.order)
        saved = None
        if written["expected_s"] and chosen["expected_s"] is not None:
            saved = 1.0 - chosen["expected_s"] / written["expected_s"]
        ran = sum(spent[0] for spent in self.order_seconds.values())
        report = {"written": written, "chosen": chosen, "saved": saved,
                  "mode": self.meta["order_mode"],
                  # the run as it went, every order it used: what the reordering cost in all
                  "as_run": {"measured_s": ran / self.records_in if self.records_in else None,
                             "events": self.records_in,
                             "orders": len(self.order_seconds)}}
        report["lines"] = describe_orders(report)
        return report

    def finish(self, extra: dict) -> PipelineResult:
        import pandas as pd
        self._log_plan(changed=False, expected=self.policy.expected_cost(self.order, self.stats))
        report = self.order_report()
        rows, totals = self._cutflow()
        cutflow = pd.DataFrame(rows)
        outputs = {"cutflow": self.recorder.cutflow(cutflow, rows, totals)}
        hists: dict = {}
        for s in self.p.sinks:
            out = s.finalize()
            (hists if s.result_group == "histograms" else outputs)[s.result_key] = out
        selected = Batch.concat([self.selected[i] for i in sorted(self.selected)]) \
            if self.cfg.collect else None
        op_seconds = sum(st.total["seconds"] + st.sample_total["seconds"]
                         for st in self.stats.values())
        summary = {"kind": "pipeline", "app": self.cfg.name, "batches": self.batches_done,
                   **totals, "wall_s": time.time() - self.t_start, "op_seconds": op_seconds,
                   "order_mode": self.meta["order_mode"], "written_order": self.written,
                   "final_order": self.order, "orders_used": self.orders_used,
                   "distinct_orders": len({tuple(o) for o in self.orders_used}),
                   "replans": len(self.replans), "stage_seconds": self.stage,
                   "ops": {n: {**s.snapshot(), "total": s.total, "sample_total": s.sample_total}
                           for n, s in self.stats.items()},
                   "order_report": report, "outputs": outputs, "warnings": self.warnings,
                   **extra}
        if self.balancer is not None:
            summary["balance"] = {"slots": self.balancer.slots, "final_ds": self.balancer.n_ds,
                                  "final_dp": self.balancer.n_dp,
                                  "checkpoints": self.balancer.history}
        self.snapshot(force=True)
        self.recorder.finish(summary)
        if self.cfg.progress:
            for line in report["lines"]:
                print(f"[pairflow] {line}", file=sys.stderr, flush=True)
        return PipelineResult(self.path, summary, selected, cutflow, hists, outputs,
                              self.replans)

    def fail(self, exc: BaseException) -> None:
        self.recorder.fail(exc)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _per_event(s: float | None) -> str:
    if s is None:
        return "not run"
    return f"{s * 1e3:.3f} ms/event" if s >= 1e-4 else f"{s * 1e6:.2f} us/event"


def describe_orders(report: dict) -> list[str]:
    """The order report as lines for a person: each order, its expected cost per event (from
    the measured operator costs and pass rates) and what its batches measured."""
    def line(label: str, e: dict) -> str:
        measured = (f"measured {_per_event(e['measured_s'])} over {e['events']:,} events"
                    if e["events"] else "never run")
        return (f"{label}: {' > '.join(e['order'])}\n    expected "
                f"{_per_event(e['expected_s'])}, {measured}")
    w, c = report["written"], report["chosen"]
    if w["order"] == c["order"]:
        return [line(f"order ({report['mode']}, the written one)", w)]
    out = [line("written order", w), line("chosen order", c)]
    if report["saved"] is not None:
        out.append(f"the chosen order is expected to cost {100 * (1 - report['saved']):.1f} % "
                   f"of the written one per event (saves {100 * report['saved']:.1f} %)")
    run = report.get("as_run")
    if run and run["events"]:
        out.append(f"as run ({run['orders']} order(s), sample excluded): measured "
                   f"{_per_event(run['measured_s'])} over {run['events']:,} events")
    return out


def _op_dict(o: OpSpec) -> dict:
    return {"name": o.name, "kind": o.kind, "after": list(o.after)}


def _sized(run: PipelineRun, source, specs: list, probed: dict):
    """The source re-cut into batches of the size ``BatchSizer`` chooses from the probe (when
    the run's ``batch`` is auto and that merges anything); the probed batch is reused only when
    the batches stay as they were. Returns (source, specs, probe)."""
    from .sizing import BatchSizer, resized
    cfg = run.cfg
    workers = cfg.threads or probed["cpus"]
    sizer = BatchSizer(min_batches=8 if run.fixed is None else 1)
    # every batch runs its operators and (adaptive) a sample through every operator: the
    # operators' fixed costs twice; reading and the ordered operators per record
    fixed = probed["op_fixed_s"] * (2 if run.fixed is None else 1)
    per_record = probed["read_per_record_s"] + probed["op_per_record_s"]
    records = sizer.records(probed["n"], probed["total"], fixed, per_record,
                            probed["bytes_per_record"], workers) \
        if cfg.batch == "auto" else probed["n"]
    new = resized(source, specs, probed["n"], records)
    run.sizing = {"source_records": probed["n"], "records": records, "fixed_s": fixed,
                  "per_record_s": per_record, "bytes_per_record": probed["bytes_per_record"],
                  "workers": workers, "merged": new is not source}
    if new is source:
        return source, specs, probed
    return new, list(new.partitions()), {**probed, "batch": None}


class Pipeline:
    """A source, operators (maps and filters with ``after=`` dependencies) and sinks.

    ``source``: a ``Source`` or any object with ``partitions()`` and ``read(spec)``
    (``operators.root.RootSource``, ``operators.columnar.ParquetSource``,
    ``operators.dask.DaskSource`` ...). In-memory data (a dict of arrays, a DataFrame, an Arrow
    table, awkward records, a list of such batches) and Dask collections become one through
    ``operators.arrays.as_source(data, batch_size=...)``: the engine knows sources, not data
    types. ``options`` are ``PipelineConfig`` fields and may be overridden per run.
    """

    def __init__(self, source, ops: Sequence[Op], sinks: Sequence[PipelineSink] = (),
                 **options):
        check_source(source)
        self.source = source
        self.ops = list(ops)
        for o in self.ops:
            if not isinstance(o, Op):
                raise TypeError(f"pipeline operators must be Map or Filter, got {o!r}")
        check_dag([o.spec for o in self.ops])
        self.sinks = list(sinks)
        names = [s.name for s in self.sinks]
        if len(set(names)) != len(names):
            raise ValueError(f"two sinks have the same name: {names}")
        self.options = options
        _config(options)  # fail early on unknown options

    def run(self, run_dir: str | None = None, config_dump: dict | None = None,
            **options) -> PipelineResult:
        cfg = _config({**self.options, **options})
        if cfg.batch not in ("auto", "source"):
            raise ValueError(f"batch must be 'auto' or 'source', got {cfg.batch!r}")
        run = PipelineRun(self, cfg, run_dir, config_dump)
        source = self.source
        specs = list(source.partitions())
        if not specs:
            raise InputError(str(describe_source(source)), "the source has no batches")
        from .memory import keep_freed_memory
        try:
            with keep_freed_memory(cfg.keep_memory):
                extra, source = self._execute(run, source, specs)
            return run.finish(extra)
        except BaseException as exc:
            cause = root_cause(exc)
            run.fail(cause)
            if isinstance(cause, (InputError, PairflowError, ValueError)):
                raise cause from None
            raise

    def _execute(self, run: PipelineRun, source, specs: list):
        """Probe, size the batches, choose the executor and run it; returns (its extra
        summary, the source as run)."""
        from .placement import estimate, pipeline_executor, probe
        cfg = run.cfg
        first = None
        choosing = cfg.executor == "auto" and not cfg.ray_address and not ray_is_up()
        if len(specs) > 1 and (choosing or cfg.batch == "auto"):
            first = probe(run, source, specs)
            source, specs, first = _sized(run, source, specs, first)
            run.estimate_s = estimate(first, len(specs))
        run.executor = pipeline_executor(cfg.executor, cfg.ray_address, run.estimate_s,
                                         cfg.inprocess_max_s, ray_is_up(), len(specs))
        if run.executor == "local":
            from .local import run_local
            return run_local(run, source, specs, first), source
        from .ray_executor import run_ray  # the one module that imports Ray
        return run_ray(run, source, specs), source

    def __repr__(self):
        return f"Pipeline({describe_source(self.source)}, ops={self.ops}, sinks={self.sinks})"
