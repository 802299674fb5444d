"""The all-pairs driver: from an app (or two functions) to a finished, journaled result.

``allpairs(...)`` makes a ``_Run``, which orchestrates and owns the run's state; each step's
work lives in its own module. Start: ``preflight.read_inputs`` (keys, space, weights), then
``preflight.Preflight`` (the probe, the executor's choice and every input checked while Ray
starts), ``sizing.plan_run`` (a ``RunPlan``: leaf, tiles and their order, budgets, deadlines;
pure, shared with the simulator) and the sinks opened (the journal replayed on a resume).
Launch: a ``Coordinator`` on the head node (the scheduler, the metrics and the head's node
cache), then the workers (``membership.Membership``: a node cache and a frontier per node,
a ``DeviceActor`` per device), and a ``RunHandle`` returned at once. Wait
(``handle.result()``): progress, while ``Membership`` handles lost, overdue and silent actors
and nodes that join; then ``validation.validate``. Finish: drain, the workers let go of the
run (``_release``: warm ones retire and give their memory back, the others are killed; the
journal is closed and every counter read, so resume and repair need nothing of them, and
TopK's merge at 10^6 reads, 1.6 GB in the driver, no longer stacked on 6 GB of actors: issue
58), finalize the sinks, write the summary (``summary.run_summary``). Failure, Ctrl-C and
cancel close the journal first (``_seal``), then stop every actor and wait until the
coordinator is gone (``Membership.stop``). Everything it does is recorded in the run
directory (docs/run-directory.md) through a ``RunRecorder``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import InputError, PairflowError, root_cause, worker_traceback
from ..run.io import check_store, publish
from ..run.journal import replay, tiles_journaled
from ..run.metrics import trace_to_parquet
from ..run.progress import Progress
from ..run.rundir import JOURNAL, LOG, TILE_PLAN, RunRecorder, write_json_rows
from ..run.runtime import import_in_background, in_background
from .app import BasePairApp, FunctionApp, imports_after
from .workers.clients import MetricsClient, NodeCacheClient, SchedulerClient
from .config import AllPairsConfig
from .workers.frontier import use_hierarchical
from .membership import Membership
from .preflight import Checked, Preflight, packed_inputs, read_inputs
from .result import AllPairsResult, RunHandle
from .sinks.shipped import ResultWriter
from .sinks import Sink, SinkContext, make_sink
from .plan.sizing import plan_run, read_ahead_items, validation_sample
from .space import TileArray
from .summary import run_summary
from .validation import validate


class _Run:
    """One run from pre-flight to summary; the ``RunHandle`` a user holds wraps it."""

    def __init__(self, app: BasePairApp, sinks: list[Sink], cfg: AllPairsConfig,
                 run_dir: str | None, config_dump: dict | None, executor=None):
        self.app, self.sinks, self.cfg = app, sinks, cfg
        self.ex = executor  # a session's Ray executor, or chosen by pre-flight
        self.session_ex = executor
        self.t_start = time.time()
        self.recorder = RunRecorder.open(run_dir, cfg.runs_root, app.name, cfg.resume)
        self.config_dump = config_dump or {"allpairs": asdict(cfg), "app": app.describe()}
        self.pre: Checked | None = None  # what pre-flight found (preflight.py)
        self.members: Membership | None = None  # the workers, from launch (membership.py)
        self.coordinator = None
        self.warnings: list[str] = []
        self.finished_result: AllPairsResult | None = None
        self.cancelled = False
        self.validated = 0  # tiles recomputed and compared (validation.py)
        self.resume_report: dict | None = None
        self.results: ResultWriter | None = None  # what workers ship, when nothing is shared
        self.sinks_ready = lambda: None  # waits for the sinks' before_finalize (at launch)
        self.last_progress: dict | None = None  # progress once the workers let go (_release)

    # -- start ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.cfg
        previous = self.previous = self.recorder.read_meta() if cfg.resume else None
        if not cfg.resume:
            self.recorder.write_config(self.config_dump)
        write_files = getattr(self.app, "write_run_files", None)
        if write_files is not None:  # an app's own files (e.g. the inputs it skipped)
            write_files(self.recorder.path)
        self.recorder.starting()
        for sink in self.sinks:
            sink.preload()
        try:
            if cfg.result_store:  # before any compute: a store that cannot be written
                check_store(cfg.result_store)
            self._read_app()
            preflight = Preflight(self.app, cfg, self.inputs, self.sinks,
                                  self.recorder.file(LOG), self.recorder.path, self.ex)
            try:
                pre = preflight.run(previous)
            finally:  # what it started is stopped with the run, also when a check failed
                self.ex = preflight.ex
            self.pre = pre  # kept for the launch and the summary
            self.phases, self.measured, self.nodes = pre.phases, pre.measured, pre.nodes
            self.plan = plan_run(
                self.measured, self.space, self.weights, self.nodes, cfg, items=self.items,
                probe_weight=pre.probe_weight,
                resume_leaf=previous["leaf_items"] if previous is not None else None,
                resume_tiles=self._saved_tiles() if previous is not None else None,
                packable=cfg.pack_items and bool(self.app.packs()),
                row_calls=bool(getattr(self.app, "row_calls", lambda: False)()))
            self._adopt_plan()
            done_tiles = self._open_sinks(previous is not None)
            self._launch(done_tiles, pre.fingerprint)
        except KeyboardInterrupt:
            self._interrupted()
            raise
        except BaseException as exc:
            cause = self._failed(exc)
            if isinstance(cause, (InputError, PairflowError, ValueError)):
                raise cause from None
            raise

    def _read_app(self) -> None:
        self.inputs = inputs = read_inputs(self.app, [s.name for s in self.sinks])
        self.keys, self.row_keys, self.col_keys = inputs.keys, inputs.row_keys, inputs.col_keys
        self.space, self.weights, self.items = inputs.space, inputs.weights, inputs.items

    def _saved_tiles(self) -> TileArray | None:
        """The resumed run's tiles as it planned them, in its order (None for a run that saved
        none): read as numbers, not a dict per tile."""
        return TileArray.read_json(self.recorder.file(TILE_PLAN))

    def _adopt_plan(self) -> None:
        plan = self.plan
        self.warnings.extend(plan.warnings)
        self.measured = plan.measured
        # the tiles as int columns (TileArray): 56 bytes a tile, never an object per tile
        self.leaf, self.tiles, self.bound = plan.leaf, TileArray.of(plan.tiles), plan.bound_R
        if plan.pack_members is not None:  # the caches and loaders see packs of rows
            self.inputs = packed_inputs(self.inputs, plan.items, plan.pack_members)
            self.items = plan.items
            self.measured = {**self.measured, "pack_bytes": plan.item_bytes}
        if self.cfg.progress and plan.choice:
            print(f"[pairflow] {plan.choice['line']}", file=sys.stderr, flush=True)
        if self.previous is None:  # a resume works on the saved plan, in its order: that file
            write_json_rows(self.recorder.file(TILE_PLAN), self.tiles.to_json(plan.order))

    def _open_sinks(self, resume: bool) -> list[int]:
        """Open every sink; on a resume, the tiles the journal shows safely written."""
        ctx = SinkContext(self.recorder.rundir.result_dir, self.space, self.leaf, self.row_keys,
                          self.col_keys, self.app.fields())
        for sink in self.sinks:
            sink.open(ctx, resume=resume)
        if not resume:
            return []
        done, self.resume_report = replay(self.recorder.file(JOURNAL),
                                          {s.name: s for s in self.sinks}, len(self.tiles))
        return done

    def _launch(self, done_tiles: list[int], fingerprint: dict) -> None:
        cfg, plan = self.cfg, self.plan
        pending = np.ones(len(self.tiles), bool)
        pending[np.asarray(done_tiles, dtype=np.int64)] = False
        keep = validation_sample(np.flatnonzero(pending).tolist() if cfg.validate else [],
                                 cfg.validate, cfg.seed)
        metrics_kw = dict(run_dir=self.recorder.path, n_items=self.items.n_items,
                          tiles_total=len(self.tiles), pairs_total=self.space.total,
                          bound_R=self.bound, initial_tiles=len(done_tiles),
                          initial_pairs=int(self.tiles.pairs[
                              np.asarray(done_tiles, dtype=np.int64)].sum()))
        scheduler_kw = dict(
            run_dir=self.recorder.path, tiles=self.tiles, row_items=self.items.row_items,
            col_items=self.items.col_items, order=plan.order, window=cfg.window,
            locality=True, done_tiles=done_tiles, deadlines=plan.deadlines,
            max_retries=cfg.max_retries, keep_fields=keep, row_keys=self.row_keys,
            col_keys=self.col_keys, journal=cfg.journal, journal_fsync_s=cfg.journal_fsync_s,
            ship=self.pre.ship, silent_after_s=plan.silent_after_s)
        metrics_kw["outbox"] = self.pre.ship
        hierarchical = use_hierarchical(cfg.hierarchical, self.ex.name,
                                        sum(1 for n in plan.nodes if n.actors))
        if hierarchical:  # engine/pairs/workers/frontier.py
            scheduler_kw["hierarchical"] = {
                "nodes": [f"node-{i}" for i, n in enumerate(plan.nodes) if n.actors],
                "seed": cfg.seed, "shares": plan.shares,
                "fallback": plan.fallback_order, "course": plan.course,
                "pace": (plan.choice or {}).get("pace")}
        if self.pre.ship:  # the driver writes what the workers ship (pairs/sinks/shipped.py)
            self.results = ResultWriter(self.recorder.rundir, self.sinks, self.plan.tiles,
                                        self.recorder.file(JOURNAL) if cfg.journal else None,
                                        cfg.journal_fsync_s)
        self.members = Membership(
            self.ex, cfg, plan, self.inputs, app=self.app, app_ref=self.pre.app_ref,
            sinks=self.sinks, tile_dicts=self.tiles,
            item_bytes=self.measured.get("item_bytes"), shipment=self.pre.shipment,
            store=self.pre.store, head=self.nodes[0], hierarchical=hierarchical,
            on_joined=lambda: self.recorder.write_meta(self.meta),
            read_ahead=read_ahead_items(self.plan, self.cfg, done_tiles))
        actors_meta = self._start_actors(scheduler_kw, metrics_kw)
        caches = self.members.node_caches
        if cfg.l3 and len(caches) > 1 and self.ex.name == "ray":
            # L3: every node cache hosts its directory shard and reaches the others
            self.ex.get([c.connect(i, caches, cfg.l3_hops) for i, c in enumerate(caches)])
        meta = {"kind": "allpairs", "app": self.app.name, "space": self.space.describe(),
                "n_items": len(self.keys), "keys_sample": self.keys[:50], "leaf_items":
                self.leaf, "tiles_total": len(self.tiles), "pairs_total": self.space.total,
                "actors": actors_meta, "host_cache_items": plan.host_items_eff, "bound_R":
                self.bound, "plan": plan.plan, "eviction": plan.eviction,
                "heartbeat_s": plan.heartbeat_s, "silent_after_s": plan.silent_after_s,
                "in_flight": cfg.in_flight, "measured": self.measured, "started": self.t_start,
                "phases": self.phases, "sinks": [s.name for s in self.sinks],
                "fingerprint": fingerprint, "validate_tiles": keep, "warnings": self.warnings,
                "resumed": self.resume_report, "plan_choice": plan.choice,
                "executor": self.ex.name, "estimate_s": self.pre.estimate_s}
        self.recorder.write_meta(meta)
        self.meta = meta
        t0 = time.time()
        pids = self.ex.get([h.ready.remote() for h in self.members.handles.values()])
        self.ex.get([c.ready() for c in caches] + self.pre.warm_refs)
        for entry, pid in zip(meta["actors"], pids):
            entry["pid"] = pid
        self.recorder.write_meta(meta)
        self.phases["actors_s"] = time.time() - t0
        self.t_compute = time.time()
        self.members.run_devices()
        meta["executor"] = self.ex.name
        self.recorder.running()
        # what the end of the run needs (trace_to_parquet, sinks' finalize, the app's after)
        import_in_background("pyarrow.json", "pyarrow.parquet", *imports_after(self.app))
        self.sinks_ready = in_background(lambda: [s.before_finalize() for s in self.sinks])

    def _start_actors(self, scheduler_kw: dict, metrics_kw: dict) -> list[dict]:
        """The coordinator on the head node (with the head's cache when the head runs device
        actors), then the workers (``Membership.start``); returns their descriptions for
        meta.json."""
        head = self.nodes[0]  # alive_nodes() puts the head first: a cluster cannot lose it
        head_cache = self.plan.nodes[0].node["node_id"] == head["node_id"]
        # the run's bookkeeping (and the head node's cache) in one process on the head node
        # (coordinator.py says why one); a 0-CPU head holds it too: it asks for no CPU
        self.coordinator = self.ex.coordinator(head, scheduler_kw, metrics_kw,
                                               self.members.cache_spec(0) if head_cache
                                               else None)
        self.scheduler = SchedulerClient(self.coordinator)
        self.metrics = MetricsClient(self.coordinator)
        return self.members.start(
            self.scheduler, self.metrics,
            NodeCacheClient(self.coordinator, in_coordinator=True) if head_cache else None)

    # -- watch ------------------------------------------------------------------------------
    def progress(self) -> dict:
        if self.finished_result is not None:
            s = self.finished_result.summary
            return {"done": s["tiles_total"], "total": s["tiles_total"], "in_flight": 0,
                    "error": None}
        if self.last_progress is not None:  # finalizing: the coordinator let go of the run
            return self.last_progress
        return self.ex.get(self.scheduler.progress())

    def metrics_snapshot(self) -> dict:
        return self.ex.get(self.metrics.tick())

    def wait(self, timeout: float | None = None) -> AllPairsResult:
        if self.finished_result is not None:
            return self.finished_result
        if self.cancelled:
            raise PairflowError(f"the run was cancelled; the tiles it finished are journaled in "
                                f"{self.recorder.path}: resume=True continues it")
        deadline = None if timeout is None else time.time() + timeout
        members = self.members
        bar = Progress(len(self.tiles), "tiles", self.cfg.progress,
                       figures={"pairs/s": ",.0f", "R": ".2f"})
        try:
            while members.refs:
                members.wait_runs(timeout=0.5)
                if members.all_gone():
                    members.adopt_new_nodes(now=True)  # a node that joined may take over
                if members.all_gone():
                    prog = self.ex.get(self.scheduler.progress())
                    if prog["done"] < prog["total"] and not prog["error"]:
                        raise PairflowError("every device actor was lost; "
                                            f"{prog['done']}/{prog['total']} tiles done")
                # one call for progress and overdue tiles, and metrics only for a progress
                # bar: every call is CPU at both ends, twice a second for the whole run
                prog = self.ex.get(self.scheduler.watch())
                if self.results is not None:
                    self.results.write(prog)
                members.kill_overdue(prog["overdue"])
                members.kill_silent(prog["silent"], prog["silent_after_s"])
                members.adopt_new_nodes()
                if prog["error"]:
                    raise self._worker_error(prog["error"])
                if bar.enabled:
                    _show(bar, self.ex.get(self.metrics.tick()), since=self.t_compute)
                    if prog.get("course_line"):  # a course change, said once (issue 57)
                        bar.note("course", prog["course_line"])
                if self.recorder.heartbeat() and not bar.enabled:
                    self.metrics.tick()  # metrics.jsonl advances while tiles are long
                if deadline and time.time() > deadline and members.refs:
                    raise TimeoutError(f"run not finished after {timeout} s "
                                       f"({prog['done']}/{len(self.tiles)} tiles)")
            prog = self.ex.get(self.scheduler.progress())
            if prog["error"]:
                raise self._worker_error(prog["error"])
            if self.cfg.validate:  # the sampled tiles recomputed on another actor
                self.validated = validate(self.ex, self.ex.get(self.scheduler.kept_fields()),
                                          members, self.tiles, self.space, self.row_keys,
                                          self.col_keys)
        except TimeoutError:
            bar.close()
            raise
        except KeyboardInterrupt:
            bar.close()
            self._interrupted()
            raise
        except BaseException as exc:
            bar.close()
            cause = self._failed(self._coordinator_lost(exc), lost_actors=members.lost_actors)
            if isinstance(cause, (InputError, PairflowError)):
                raise cause from None
            raise PairflowError(str(cause)) from None
        self.finished_result = self._finish()
        _show(bar, self.finished_result.summary, final=True)
        bar.close()
        return self.finished_result

    def _worker_error(self, message: str, wait_s: float = 2.0) -> BaseException:
        """The error the scheduler reports, as the device actor that reported it raised it:
        with its own traceback (``errors.WorkerError``). That actor's ``run()`` ends right
        after it reports; an error of the scheduler's own (a tile past its retries) has no
        such actor, and after ``wait_s`` the message alone is the error."""
        refs = self.members.refs
        deadline = time.time() + wait_s
        while refs and time.time() < deadline:
            for ref in self.ex.wait(list(refs), timeout=max(0.0, deadline - time.time())):
                refs.pop(ref)
                try:
                    self.ex.get(ref)
                except self.ex.lost_errors:
                    continue
                except Exception as exc:
                    return exc
        return PairflowError(message)

    def _coordinator_lost(self, exc: BaseException) -> BaseException:
        """If the coordinator died, a failure saying so and how to resume; else ``exc``. The
        journal was flushed per tile (and, when nothing is shared, each tile the driver had
        drained), so a resume keeps every tile it shows."""
        if self.coordinator is None or isinstance(root_cause(exc), InputError):
            return exc
        try:
            self.ex.get(self.coordinator.ready.remote(), timeout=10)
            return exc
        except Exception:
            pass
        if self.results is not None:
            self.results.close()  # the journal's last lines reach the disk
            self.results = None
        done = tiles_journaled(self.recorder.file(JOURNAL))
        return PairflowError(
            f"the run's coordinator (scheduler, metrics and the head node's cache) died "
            f"({type(root_cause(exc)).__name__}: {str(root_cause(exc)).splitlines()[0]}); "
            f"{done} of "
            f"{len(self.tiles)} tiles are journaled in {self.recorder.path}: resume the run "
            f"(allpairs(..., run_dir=that directory, resume=True), or resume=true on the "
            f"command line) to compute only the others")

    def _finish(self) -> AllPairsResult:
        t_drain = time.time()
        cache_stats = self.members.cache_stats()
        scheduling = self.members.scheduling()
        closed = self.ex.get(self.scheduler.close())
        snap = self.ex.get(self.metrics.close())
        if self.results is not None:  # the last payloads and records, then the journal
            self.results.write(self.ex.get(self.scheduler.drain()))
            closed = self.results.close()
        self._release()
        t_finalize = time.time()
        self.sinks_ready()
        outputs = {sink.name: sink.finalize() for sink in self.sinks}
        published = None
        if self.cfg.result_store:  # the driver copies the outputs; the run directory keeps them
            try:
                published = publish(outputs, self.recorder.rundir.result_dir,
                                    self.cfg.result_store)
            except PairflowError as exc:
                raise self._failed(exc) from None
        self.phases["drain_s"] = t_finalize - t_drain  # counters and journal closed
        self.phases["finalize_s"] = time.time() - t_finalize  # sinks merged and written
        summary = run_summary(self, snap=snap, closed=closed, cache_stats=cache_stats,
                              scheduling=scheduling, outputs=outputs, published=published,
                              tiles_journaled=tiles_journaled(self.recorder.file(JOURNAL)),
                              ended=time.time())
        self.recorder.write_summary(summary)
        trace_to_parquet(self.recorder.rundir)
        self.recorder.finished()
        self.shutdown(keep=True)
        return AllPairsResult(self.recorder.path, summary, outputs)

    def _release(self, wait_s: float = 30.0) -> None:
        """The workers let go of the run before the finalize (the module docstring says why);
        its last progress answers ``progress()`` meanwhile."""
        self.last_progress = self.ex.get(self.scheduler.progress())
        self.members.stop(self.coordinator, keep=True, wait_s=wait_s)

    def _failed(self, exc: BaseException, **extra) -> BaseException:
        """Record the failure (status.json its line; run.log with the traceback of where it
        happened), stop every actor, and return the user's exception."""
        cause = root_cause(exc)
        self._seal()
        self.recorder.failed(str(cause), **extra)
        self._log_failure(cause, worker_traceback(exc))
        self.shutdown()
        return cause

    def _log_failure(self, cause: BaseException, trace: str | None) -> None:
        """The failure in the run directory's log, with the traceback of where it happened
        (a worker's own, for a failure inside one), for a look after the run."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = f"{stamp} ERROR pairflow: the run failed: {cause}\n" + (trace or "")
        try:
            with open(self.recorder.file(LOG), "a") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError:  # the run directory was removed: nothing to keep it in
            pass

    def cancel(self) -> None:
        if self.finished_result is not None or self.cancelled:
            return
        self.cancelled = True
        self._seal()
        self.recorder.interrupted("cancelled")
        self.shutdown()

    def _interrupted(self) -> None:
        """Ctrl-C (or any KeyboardInterrupt): not a failure; the journal holds what was done
        and ``resume=True`` continues from it."""
        self._seal()
        self.recorder.interrupted()
        self.shutdown()

    def _seal(self, timeout_s: float = 10.0) -> None:
        """Before a stopped run's actors are killed: the scheduler closes its journal (nothing
        more is journaled, however late the kill lands), and what workers shipped that the
        driver has not written yet is written and journaled. So the journal a stop leaves is
        final when the stop returns, and a resume reuses exactly the tiles it shows."""
        if self.coordinator is not None:
            try:
                self.ex.get(self.scheduler.close(), timeout=timeout_s)
            except Exception:
                pass  # the coordinator is gone: it writes nothing more
        if self.results is not None:  # what finished before the stop: journaled, kept
            try:
                self.results.write(self.ex.get(self.scheduler.drain(), timeout=timeout_s))
            except Exception:
                pass
            self.results.close()
            self.results = None

    def shutdown(self, keep: bool = False) -> None:
        """Stop the run's actors; ``keep`` (a run that finished cleanly): an executor that
        reuses actors (a session's) takes them back instead."""
        if self.ex is not None:
            if self.members is not None:  # (the coordinator starts after it)
                self.members.stop(self.coordinator, keep)
            if self.ex is not self.session_ex:
                self.ex.shutdown()


def _show(bar: Progress, snap: dict, final: bool = False, since: float | None = None) -> None:
    """A metrics snapshot (or the summary) on the progress display, with the pairs compared
    per second of compute so far."""
    if final:
        rate = snap.get("pairs_total", 0) / max(snap.get("compute_s", 0.0), 1e-9)
    else:
        rate = snap.get("pairs_done", 0) / max(time.time() - (since or time.time()), 1e-9)
    bar.update(snap.get("tiles_done", snap.get("tiles_total", 0)), final=final,
               R=snap.get("R", 0.0), **{"pairs/s": rate})


def allpairs(keys: Sequence[str] | None = None, *, load: Callable | None = None,
             compare: Callable | None = None, tile: bool = False,
             targets: Sequence[str] | None = None, app: BasePairApp | None = None,
             sink: Any = "dense", sinks: Sequence[Any] | None = None, run_dir: str | None = None,
             wait: bool = False, config_dump: dict | None = None, session=None,
             **options) -> RunHandle:
    """Compare all pairs (or queries x targets) and return a handle to the run.

    Either give an ``app`` (a ``PairApp``), or ``keys`` with ``load(key) -> item`` and
    ``compare(a, b) -> float`` (``tile=True``: ``compare(lefts, rights) -> 2-D array``).
    ``options`` are the fields of ``AllPairsConfig``. ``wait=True`` blocks and returns the
    result instead of the handle. ``session``: an ``engine.Session`` whose Ray the run uses
    (``Session.allpairs`` passes it). Without one, the run goes in-process or on Ray as
    ``executor`` says (executor.py).
    """
    if app is None:
        if keys is None or load is None or compare is None:
            raise TypeError("allpairs needs app=..., or keys, load= and compare=")
        app = FunctionApp(keys, load, compare, tile=tile, targets=targets)
    cfg = AllPairsConfig.from_options(options)
    sink_objs = [make_sink(s) for s in (sinks if sinks is not None else [sink])]
    run = _Run(app, sink_objs, cfg, run_dir, config_dump,
               session.executor if session is not None else None)
    run.start()
    handle = RunHandle(run)
    return handle.result() if wait else handle
