"""The all-pairs driver: from an app (or two functions) to a finished, journaled result.

``allpairs(...)`` runs in three steps. Pre-flight: check every input before compute and measure a
sample of the stages (Ray tasks, side by side). Sizing: ``sizing.plan_run`` turns the
measurements into a ``RunPlan`` (leaf, tiles and their order, budgets, deadlines), a pure
function the simulator shares. Launch: open the sinks (replaying the journal on a resume), start
a ``Coordinator`` on the head node (the scheduler, the metrics and the head's node cache), a
``NodeCacheActor`` on every other node and one ``DeviceActor`` per device, and return a
``RunHandle`` at once. ``handle.result()`` shows progress, waits, finalizes the sinks and returns
an ``AllPairsResult``. Everything it does is recorded in the run directory
(docs/run-directory.md) through a ``RunRecorder``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import asdict, replace
from typing import Any, Callable, Sequence

from ..errors import InputError, PairflowError, root_cause
from ..run.io import check_store, publish
from ..run.journal import replay, tiles_journaled
from ..run.metrics import trace_to_parquet
from ..run.progress import Progress
from ..run.rundir import JOURNAL, LOG, TILE_PLAN, RunRecorder, read_json, write_json
from ..run.runtime import import_in_background
from ..run.shipping import Shipment
from .actors import DeviceSpec, NodeCacheSpec
from .app import BasePairApp, FunctionApp
from .clients import MetricsClient, NodeCacheClient, SchedulerClient
from .config import AllPairsConfig
from .frontier import FrontierClient, FrontierSpec, start_frontier, use_hierarchical
from .preflight import Checked, Preflight, read_inputs
from .result import AllPairsResult, RunHandle, first_difference
from .scheduler import describe_tile
from .shipped import ResultWriter
from .sinks import Sink, SinkContext, make_sink
from .sizing import plan_nodes, plan_run, validation_sample
from .directory import l3_summary
from .store import store_summary


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
        self.handles: dict[str, Any] = {}      # actor id -> handle
        self.actor_node: dict[str, int] = {}   # actor id -> node index
        self.refs: dict = {}                   # run() ref -> actor id
        self.kill_reasons: dict[str, str] = {}
        self.node_caches: list[NodeCacheClient] = []  # by node index
        self.cache_actors: list = []           # the node caches that are actors of their own
        self.coordinator = None
        self.warnings: list[str] = []
        self.finished_result: AllPairsResult | None = None
        self.cancelled = False
        self.resume_report: dict | None = None
        self.lost_actors: list[dict] = []
        self.results: ResultWriter | None = None  # what workers ship, when nothing is shared
        self.shipment: Shipment | None = None
        self.ship = False  # nothing shared between the driver and the workers (preflight.py)
        self.next_node_check = 0.0
        self.frontiers: dict[int, Any] = {}    # node index -> its frontier (hierarchical)

    # -- start ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.cfg
        self.phases: dict[str, float] = {}
        previous = self.recorder.read_meta() if cfg.resume else None
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
            self._adopt_checked(pre)
            self.plan = plan_run(
                self.measured, self.space, self.weights, self.nodes, cfg, items=self.items,
                probe_weight=pre.probe_weight,
                resume_leaf=previous["leaf_items"] if previous is not None else None,
                resume_tiles=self._saved_tiles() if previous is not None else None)
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

    def _adopt_checked(self, pre: Checked) -> None:
        """What the run keeps of its pre-flight (preflight.py)."""
        self.phases.update(pre.phases)
        self.store, self.measured, self.nodes = pre.store, pre.measured, pre.nodes
        self.probe_store, self.estimate_s = pre.probe_store, pre.estimate_s
        self.app_ref, self.warm_refs = pre.app_ref, pre.warm_refs
        self.shipment, self.ship = pre.shipment, pre.ship

    def _saved_tiles(self) -> list[dict] | None:
        """The resumed run's tiles as it planned them (None for a run that saved none)."""
        return read_json(self.recorder.file(TILE_PLAN))

    def _adopt_plan(self) -> None:
        plan = self.plan
        self.warnings.extend(plan.warnings)
        self.measured = plan.measured
        self.leaf, self.tiles, self.bound = plan.leaf, plan.tiles, plan.bound_R
        if self.cfg.progress and plan.choice:
            print(f"[pairflow] {plan.choice['line']}", file=sys.stderr, flush=True)
        self.tile_dicts = [t.to_dict() for t in plan.tiles]
        write_json(self.recorder.file(TILE_PLAN), [self.tile_dicts[i] for i in plan.order])

    def _open_sinks(self, resume: bool) -> list[int]:
        """Open every sink; on a resume, the tiles the journal shows safely written."""
        ctx = SinkContext(self.recorder.rundir.result_dir, self.space, self.leaf, self.row_keys,
                          self.col_keys, self.app.fields())
        for sink in self.sinks:
            sink.open(ctx, resume=resume)
            sink.before_finalize()
        if not resume:
            return []
        done, self.resume_report = replay(self.recorder.file(JOURNAL),
                                          {s.name: s for s in self.sinks}, len(self.tiles))
        return done

    def _launch(self, done_tiles: list[int], fingerprint: dict) -> None:
        cfg, plan = self.cfg, self.plan
        done_set = set(done_tiles)
        keep = validation_sample([t for t in range(len(self.tiles)) if t not in done_set],
                                 cfg.validate, cfg.seed)
        metrics_kw = dict(run_dir=self.recorder.path, n_items=self.items.n_items,
                          tiles_total=len(self.tiles), pairs_total=self.space.total,
                          bound_R=self.bound, initial_tiles=len(done_tiles),
                          initial_pairs=sum(self.tiles[t].pairs for t in done_tiles))
        scheduler_kw = dict(
            run_dir=self.recorder.path, tiles=self.tile_dicts, row_items=self.items.row_items,
            col_items=self.items.col_items, order=plan.order, window=cfg.window,
            locality=True, done_tiles=done_tiles, deadlines=plan.deadlines,
            max_retries=cfg.max_retries, keep_fields=keep, row_keys=self.row_keys,
            col_keys=self.col_keys, journal=cfg.journal, journal_fsync_s=cfg.journal_fsync_s,
            ship=self.ship, silent_after_s=plan.silent_after_s)
        metrics_kw["outbox"] = self.ship
        self.hierarchical = use_hierarchical(cfg.hierarchical, self.ex.name,
                                             sum(1 for n in plan.nodes if n.actors))
        if self.hierarchical:  # engine/pairs/frontier.py
            scheduler_kw["hierarchical"] = {
                "nodes": [f"node-{i}" for i, n in enumerate(plan.nodes) if n.actors],
                "seed": cfg.seed}
        if self.ship:  # the driver writes what the workers ship (pairs/shipped.py)
            self.results = ResultWriter(self.recorder.rundir, self.sinks, self.plan.tiles,
                                        self.recorder.file(JOURNAL) if cfg.journal else None,
                                        cfg.journal_fsync_s)
        actors_meta = self._start_actors(scheduler_kw, metrics_kw)
        if cfg.l3 and len(self.node_caches) > 1 and self.ex.name == "ray":
            # L3: every node cache hosts its directory shard and reaches the others
            self.ex.get([c.connect(i, self.node_caches, cfg.l3_hops)
                         for i, c in enumerate(self.node_caches)])
        meta = {"kind": "allpairs", "app": self.app.name, "space": self.space.describe(),
                "n_items": self.items.n_items, "keys_sample": self.keys[:50], "leaf_items":
                self.leaf, "tiles_total": len(self.tiles), "pairs_total": self.space.total,
                "actors": actors_meta, "host_cache_items": plan.host_items_eff, "bound_R":
                self.bound, "plan": plan.plan, "eviction": plan.eviction,
                "heartbeat_s": plan.heartbeat_s, "silent_after_s": plan.silent_after_s,
                "in_flight": cfg.in_flight, "measured": self.measured, "started": self.t_start,
                "phases": self.phases, "sinks": [s.name for s in self.sinks],
                "fingerprint": fingerprint, "validate_tiles": keep, "warnings": self.warnings,
                "resumed": self.resume_report, "plan_choice": plan.choice,
                "executor": self.ex.name, "estimate_s": self.estimate_s}
        self.recorder.write_meta(meta)
        self.meta = meta
        t0 = time.time()
        pids = self.ex.get([h.ready.remote() for h in self.handles.values()])
        self.ex.get([c.ready() for c in self.node_caches] + self.warm_refs)
        for entry, pid in zip(meta["actors"], pids):
            entry["pid"] = pid
        self.recorder.write_meta(meta)
        self.phases["actors_s"] = time.time() - t0
        self.t_compute = time.time()
        for actor_id, handle in self.handles.items():
            self.refs[handle.run.remote()] = actor_id
        meta["executor"] = self.ex.name
        self.recorder.running()
        # what the end of the run needs (trace_to_parquet), imported while the tiles compute
        import_in_background("pyarrow.json", "pyarrow.parquet")

    def _start_actors(self, scheduler_kw: dict, metrics_kw: dict) -> list[dict]:
        """The coordinator on the head node (with the head's cache when the head runs device
        actors), a cache actor on every other node with devices, and the device actors;
        returns their descriptions for meta.json."""
        cfg, plan, actors_meta = self.cfg, self.plan, []
        caches = [self._cache_spec(n_idx) for n_idx in range(len(plan.nodes))]
        head = self.nodes[0]  # alive_nodes() puts the head first: a cluster cannot lose it
        head_cache = plan.nodes[0].node["node_id"] == head["node_id"]
        # the run's bookkeeping (and the head node's cache) in one process on the head node
        # (coordinator.py says why one); a 0-CPU head holds it too: it asks for no CPU
        self.coordinator = self.ex.coordinator(head, scheduler_kw, metrics_kw,
                                               caches[0] if head_cache else None)
        self.scheduler = SchedulerClient(self.coordinator)
        self.metrics = MetricsClient(self.coordinator)
        for n_idx, node_plan in enumerate(plan.nodes):
            node = node_plan.node
            if n_idx == 0 and head_cache:
                self.node_caches.append(NodeCacheClient(self.coordinator, in_coordinator=True))
            else:
                actor = self.ex.node_cache(node, caches[n_idx], self.scheduler, self.metrics)
                self.cache_actors.append(actor)
                self.node_caches.append(NodeCacheClient(actor))
            self._start_frontier(n_idx)
            for d in range(node_plan.actors):
                actor_id = self._spawn(n_idx, f"dev-{d}")
                actors_meta.append({"id": actor_id, "node": f"node-{n_idx}",
                                    "device": node_plan.device_of(d),
                                    "address": node["address"], "node_id": node["node_id"]})
        return actors_meta

    def _start_frontier(self, n_idx: int) -> None:
        node_plan = self.plan.nodes[n_idx]
        if not self.hierarchical or not node_plan.actors:
            return
        self.frontiers[n_idx] = start_frontier(node_plan.node, FrontierSpec(
            node=f"node-{n_idx}", scheduler=self.scheduler, tiles=self.tile_dicts,
            row_items=self.items.row_items, col_items=self.items.col_items,
            batch=self.cfg.steal_batch, devices=node_plan.actors))

    def _cache_spec(self, n_idx: int) -> NodeCacheSpec:
        cfg, plan, node_plan = self.cfg, self.plan, self.plan.nodes[n_idx]
        return NodeCacheSpec(
            node=f"node-{n_idx}", node_id=node_plan.node["node_id"], app=self.app,
            item_keys=self.keys,
            budget_bytes=None if cfg.host_cache_items else plan.host_bytes,
            budget_items=plan.host_items if cfg.host_cache_items else None,
            eviction=plan.eviction,
            preprocess_on=node_plan.device if node_plan.preprocess_on_host else None,
            load_batch=plan.load_batch, load_slots=max(1, node_plan.node["cpus"]),
            inline_bytes=cfg.inline_item_bytes,
            expected_item_bytes=self.measured.get("item_bytes"), shipment=self.shipment,
            store=self.store)

    def _spawn(self, n_idx: int, name: str) -> str:
        """Start one device actor on node ``n_idx`` (also used to replace a lost one)."""
        node_plan, cfg = self.plan.nodes[n_idx], self.cfg
        actor_id = f"node-{n_idx}/{name}"
        spec = DeviceSpec(
            actor_id=actor_id, node=f"node-{n_idx}", space=self.space,
            row_items=self.items.row_items, col_items=self.items.col_items,
            item_keys=self.keys, tiles=self.tile_dicts, sinks=self.sinks,
            node_cache=self.node_caches[n_idx], metrics=self.metrics,
            scheduler=FrontierClient(self.frontiers[n_idx], self.scheduler)
            if n_idx in self.frontiers else self.scheduler,
            device=node_plan.device_of(int(name.split("-")[1].split(".")[0])
                                       if name.startswith("dev-") else 0),
            in_flight=cfg.in_flight, l1_bytes=self.plan.l1_bytes,
            l1_items=self.plan.l1_items, eviction=self.plan.eviction,
            preprocessed_on_host=node_plan.preprocess_on_host, ship_results=self.ship,
            heartbeat_s=self.plan.heartbeat_s)
        self.handles[actor_id] = self.ex.device(node_plan.node, spec, self.app_ref)
        self.actor_node[actor_id] = n_idx
        return actor_id

    # -- watch ------------------------------------------------------------------------------
    def progress(self) -> dict:
        if self.finished_result is not None:
            s = self.finished_result.summary
            return {"done": s["tiles_total"], "total": s["tiles_total"], "in_flight": 0,
                    "error": None}
        return self.ex.get(self.scheduler.progress())

    def metrics_snapshot(self) -> dict:
        return self.ex.get(self.metrics.tick())

    def _on_actor_lost(self, actor_id: str, exc: BaseException) -> None:
        reason = self.kill_reasons.get(actor_id) or f"actor {actor_id} died: {exc}"
        lost = self.ex.get(self.scheduler.actor_lost(actor_id, reason))
        self.handles.pop(actor_id, None)
        n_idx = self.actor_node[actor_id]
        alive = {n["node_id"] for n in self.ex.nodes()}
        node_alive = self.plan.nodes[n_idx].node["node_id"] in alive
        if node_alive:  # the GCS may not know yet: is the node's cache still answering?
            try:
                self.ex.get(self.node_caches[n_idx].ready(), timeout=5)
            except Exception:
                node_alive = False
        self.lost_actors.append({"actor": actor_id, "reason": reason, "tiles_requeued": lost,
                                 "node_alive": node_alive})
        if not node_alive:
            self.scheduler.forget_node(f"node-{n_idx}")
            return
        if n_idx in self.frontiers:  # its tiles go first in its node's queue
            self.lost_actors[-1]["tiles_requeued"] = self.ex.get(
                self.frontiers[n_idx].actor_lost.remote(actor_id), timeout=30)
        if self.cfg.replace_lost_actors:
            base = actor_id.split("/", 1)[1].split(".", 1)[0]
            new_id = self._spawn(n_idx, f"{base}.{len(self.lost_actors)}")
            self.refs[self.handles[new_id].run.remote()] = new_id

    def _kill_overdue(self, overdue: list) -> None:
        for t, actor_id, elapsed, deadline in overdue:
            if actor_id in self.kill_reasons or actor_id not in self.handles:
                continue
            self._replace(actor_id, f"tile {t} passed its deadline of {deadline:.1f} s on "
                                    f"{actor_id} (running for {elapsed:.1f} s)")

    def _replace(self, actor_id: str, reason: str) -> None:
        """Kill an actor (overdue or silent) so its tiles rerun and a new one takes its place;
        a thread cannot be killed, so an in-process run fails, saying why."""
        self.kill_reasons[actor_id] = reason
        if not self.ex.can_kill:
            raise PairflowError(f"{reason}; an in-process run cannot replace a worker (run it "
                                "on Ray: cluster=local)")
        self.ex.kill(self.handles[actor_id])

    def _adopt_new_nodes(self, every_s: float = 2.0) -> None:
        """A node that joined the cluster mid-run gets a node cache and device actors, which
        pull tiles like the others (the tiles were cut for the nodes at the start)."""
        if not self.ex.can_kill or time.time() < self.next_node_check:
            return  # (an in-process run has its one node)
        self.next_node_check = time.time() + every_s
        known = {p.node["node_id"] for p in self.plan.nodes} | {self.nodes[0]["node_id"]}
        joined = [n for n in self.ex.nodes() if n["node_id"] not in known]
        added = plan_nodes(joined, self.cfg) if any(n["cpus"] or n["gpus"] for n in joined) \
            else ()
        for node_plan in added:
            self.plan = replace(self.plan, nodes=self.plan.nodes + (node_plan,))
            n_idx = len(self.plan.nodes) - 1
            actor = self.ex.node_cache(node_plan.node, self._cache_spec(n_idx), self.scheduler,
                                       self.metrics)
            self.cache_actors.append(actor)
            self.node_caches.append(NodeCacheClient(actor))
            self._start_frontier(n_idx)  # it joins the head's policy on its first refill
            for d in range(node_plan.actors):
                actor_id = self._spawn(n_idx, f"dev-{d}")
                self.meta["actors"].append({
                    "id": actor_id, "node": f"node-{n_idx}", "device": node_plan.device_of(d),
                    "address": node_plan.node["address"], "node_id": node_plan.node["node_id"],
                    "joined": time.time()})
                handle = self.handles[actor_id]
                handle.ready.remote()  # warm-up first: calls to an actor run in order
                self.refs[handle.run.remote()] = actor_id
            self.recorder.write_meta(self.meta)

    def _kill_silent(self, silent: list, limit: float) -> None:
        for actor_id, quiet in silent:
            if actor_id in self.kill_reasons or actor_id not in self.handles:
                continue
            self._replace(actor_id, f"actor {actor_id} silent for {quiet:.1f} s (no heartbeat; "
                                    f"the limit is {limit:.1f} s)")

    def wait(self, timeout: float | None = None) -> AllPairsResult:
        if self.finished_result is not None:
            return self.finished_result
        if self.cancelled:
            raise PairflowError(f"the run was cancelled; the tiles it finished are journaled in "
                                f"{self.recorder.path}: resume=True continues it")
        deadline = None if timeout is None else time.time() + timeout
        bar = Progress(len(self.tiles), "tiles", self.cfg.progress,
                       figures={"pairs/s": ",.0f", "R": ".2f"})
        try:
            while self.refs:
                ready = self.ex.wait(list(self.refs), timeout=0.5)
                for ref in ready:
                    actor_id = self.refs.pop(ref)
                    try:
                        self.ex.get(ref)
                    except self.ex.lost_errors as exc:
                        self._on_actor_lost(actor_id, exc)
                if not self.handles and self.refs == {}:
                    self.next_node_check = 0.0  # a node that joined may take over
                    self._adopt_new_nodes()
                if not self.handles and self.refs == {}:
                    prog = self.ex.get(self.scheduler.progress())
                    if prog["done"] < prog["total"] and not prog["error"]:
                        raise PairflowError("every device actor was lost; "
                                            f"{prog['done']}/{prog['total']} tiles done")
                # one call for progress and overdue tiles, and metrics only for a progress
                # bar: every call is CPU at both ends, twice a second for the whole run
                prog = self.ex.get(self.scheduler.watch())
                if self.results is not None:
                    self.results.write(prog)
                self._kill_overdue(prog["overdue"])
                self._kill_silent(prog["silent"], prog["silent_after_s"])
                self._adopt_new_nodes()
                if prog["error"]:
                    raise PairflowError(prog["error"])
                if bar.enabled:
                    _show(bar, self.ex.get(self.metrics.tick()), since=self.t_compute)
                if self.recorder.heartbeat() and not bar.enabled:
                    self.metrics.tick()  # metrics.jsonl advances while tiles are long
                if deadline and time.time() > deadline and self.refs:
                    raise TimeoutError(f"run not finished after {timeout} s "
                                       f"({prog['done']}/{len(self.tiles)} tiles)")
            prog = self.ex.get(self.scheduler.progress())
            if prog["error"]:
                raise PairflowError(prog["error"])
            self._validate()
        except TimeoutError:
            bar.close()
            raise
        except KeyboardInterrupt:
            bar.close()
            self._interrupted()
            raise
        except BaseException as exc:
            bar.close()
            cause = self._failed(self._coordinator_lost(exc), lost_actors=self.lost_actors)
            if isinstance(cause, (InputError, PairflowError)):
                raise cause from None
            raise PairflowError(str(cause)) from None
        self.finished_result = self._finish()
        _show(bar, self.finished_result.summary, final=True)
        bar.close()
        return self.finished_result


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

    def _validate(self) -> None:
        """Recompute the sampled tiles on another actor and compare exactly."""
        if not self.cfg.validate:
            return
        kept = self.ex.get(self.scheduler.kept_fields())
        others = list(self.handles)
        for i, (t, rec) in enumerate(sorted(kept.items())):
            choices = [a for a in others if a != rec["actor"]]
            if not choices:
                choices = [self._spawn(self.actor_node.get(rec["actor"], 0), f"validator-{i}")]
                others.append(choices[0])
            other = choices[i % len(choices)]
            fields = self.ex.get(self.handles[other].recompute.remote(t))
            tile = self.tiles[t]
            mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
            diff = first_difference(rec["fields"], fields, mask)
            if diff is not None:
                name, r, c, a, b = diff
                raise PairflowError(
                    f"validation failed: {describe_tile(tile, self.row_keys, self.col_keys)}"
                    f", pair ({self.row_keys[tile.r0 + r]}, {self.col_keys[tile.c0 + c]}): "
                    f"{name} = {a!r} from {rec['actor']} but {b!r} from {other}")
        self.validated = len(kept)

    def _finish(self) -> AllPairsResult:
        t_drain = time.time()
        cache_stats = []
        for cache in self.node_caches:  # a cache on a lost node is gone with its counters
            try:
                cache_stats.append(self.ex.get(cache.stats(), timeout=30))
            except Exception as exc:
                cache_stats.append({"lost": f"{type(exc).__name__}"})
        scheduling = self._scheduling()
        closed = self.ex.get(self.scheduler.close())
        snap = self.ex.get(self.metrics.close())
        if self.results is not None:  # the last payloads and records, then the journal
            self.results.write(self.ex.get(self.scheduler.drain()))
            closed = self.results.close()
        t_finalize = time.time()
        outputs = {}
        for sink in self.sinks:
            outputs[sink.name] = sink.finalize()
        published = None
        if self.cfg.result_store:  # the driver copies the outputs; the run directory keeps them
            try:
                published = publish(outputs, self.recorder.rundir.result_dir,
                                    self.cfg.result_store)
            except PairflowError as exc:
                raise self._failed(exc) from None
        self.phases["drain_s"] = t_finalize - t_drain  # counters and journal closed
        self.phases["finalize_s"] = time.time() - t_finalize  # sinks merged and written
        wall = time.time() - self.t_start
        loads = snap["tiers"]["source"]["loads"]  # every node's last report, lost ones too
        summary = {
            "app": self.app.name, "n_items": self.items.n_items,
            "space": self.space.describe(), "pairs_total": self.space.total,
            "tiles_total": len(self.tiles),
            "tiles_journaled": tiles_journaled(self.recorder.file(JOURNAL)),
            "leaf_items": self.leaf, "wall_s": wall, "compute_s": time.time() - self.t_compute,
            "loads": loads, "R": loads / max(1, self.items.n_items), "bound_R": self.bound,
            "host_cache_items": self.meta["host_cache_items"],
            "plan": self.plan.plan, "eviction": self.plan.eviction,
            "plan_choice": self.plan.choice,
            "tiers": snap["tiers"], "stage_seconds": snap["stage_seconds"],
            "actors": snap["actors"], "n_actors": len(self.meta["actors"]),
            "node_caches": cache_stats, "outputs": outputs,
            "measured": self.measured, "app_info": self.app.describe(),
            "phases": {**self.phases, "startup_s": self.t_compute - self.t_start},
            "resumed": self.resume_report, "lost_actors": self.lost_actors,
            "validated_tiles": getattr(self, "validated", 0), "warnings": self.warnings,
            "scheduling": scheduling,
            "journal_s": closed["journal_s"], "journal_fsync_s": closed["journal_fsync_s"],
            "shared_fs": not self.ship,
            "shipped": None if not self.ship else {
                "input_files": self.shipment.files,
                "input_bytes": self.shipment.nbytes,
                "result_bytes": self.results.payload_bytes},
            "executor": self.ex.name, "published": published,
            "l3": l3_summary(self.cfg.l3, self.cfg.l3_hops, cache_stats),
            "store": store_summary(self.store, cache_stats, self.probe_store),
        }
        self.recorder.write_summary(summary)
        trace_to_parquet(self.recorder.rundir)
        self.recorder.finished()
        self.shutdown(None, keep=True)
        return AllPairsResult(self.recorder.path, summary, outputs)

    def _scheduling(self) -> dict:
        """Steals, hand-outs local to a node and round trips to the head (summary.json)."""
        out = self.ex.get(self.scheduler.scheduling())
        local = 0
        for n_idx, frontier in self.frontiers.items():
            try:
                stats = self.ex.get(frontier.stats.remote(), timeout=30)
            except Exception as exc:  # lost with its node
                stats = {"lost": type(exc).__name__}
            local += stats.get("local_handouts", 0)
            out["per_node"].setdefault(f"node-{n_idx}", {}).update(stats)
        out["local_handouts"] = local
        out["round_trips_per_tile"] = out["head_round_trips"] / max(1, out["tiles"])
        return out

    def _failed(self, exc: BaseException, **extra) -> BaseException:
        """Record the failure, stop every actor, and return the user's exception."""
        cause = root_cause(exc)
        if self.results is not None:  # what finished before the failure: journaled, kept
            try:
                self.results.write(self.ex.get(self.scheduler.drain(), timeout=10))
            except Exception:
                pass
            self.results.close()
            self.results = None
        self.recorder.failed(str(cause), **extra)
        self.shutdown(None)
        return cause

    def cancel(self) -> None:
        if self.finished_result is not None or self.cancelled:
            return
        self.cancelled = True
        self.recorder.interrupted("cancelled")
        self.shutdown(None)

    def _interrupted(self) -> None:
        """Ctrl-C (or any KeyboardInterrupt): not a failure; the journal holds what was done
        and ``resume=True`` continues from it."""
        self.recorder.interrupted()
        self.shutdown(None)

    def shutdown(self, state: str | None, keep: bool = False) -> None:
        """Stop the run's actors; ``keep`` (a run that finished cleanly): an executor that
        reuses actors (a session's) takes them back instead."""
        if self.ex is not None:
            actors = list(self.handles.values()) + self.cache_actors + [self.coordinator] + \
                list(self.frontiers.values())
            if keep and hasattr(self.ex, "keep"):
                actors = self.ex.keep(self.handles.values(), self.coordinator) + \
                    self.cache_actors + list(self.frontiers.values())
            for a in actors:
                if a is not None:
                    try:
                        self.ex.kill(a)
                    except Exception:
                        pass
            if not keep and self.coordinator is not None and self.ex.name == "ray":
                self._await_coordinator_gone()
            if self.ex is not getattr(self, "session_ex", None):
                self.ex.shutdown()
        if state:
            self.recorder.failed(state)

    def _await_coordinator_gone(self, timeout_s: float = 10.0) -> None:
        """``ray.kill`` returns before the actor is gone, and the coordinator writes the
        journal: a run stopped (cancel, Ctrl-C, failure) is final only once it has died, or a
        tile journaled a moment later would be missing from what the stop reported."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                self.ex.get(self.scheduler.progress())
            except Exception:  # the actor died (or Ray is gone): nothing more is written
                return
            time.sleep(0.05)


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
