"""The all-pairs driver: from an app (or two functions) to a finished, journaled result.

``allpairs(...)`` checks every input before compute (pre-flight), measures a sample of the stages
to size leaf tiles (a tile should cost far more than its Ray round trip), plans the tile order,
starts one ``DeviceActor`` per device, a ``Coordinator`` on the head node (the scheduler, the
metrics and the head's node cache) and a ``NodeCacheActor`` on every other node, and returns a
``RunHandle`` at once. ``handle.result()`` shows progress, waits, finalizes the sinks and returns
an ``AllPairsResult``. Everything it does is recorded in the run directory
(docs/run-directory.md).
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import ray

from .app import BasePairApp, FunctionApp
from ..errors import InputError, PairflowError, root_cause
from .coordinator import Coordinator, NodeCacheActor, Part
from .policy import ItemMap, bound_R, make_plan
from ..run.rundir import RunDir, dumps, new_run_dir, read_json, read_jsonl, write_json, write_text
from ..run.runtime import alive_nodes, init_ray
from .sinks import Sink, SinkContext, make_sink
from .space import PairSpace, PairWeights, Tile, leaves, split_tail
from .workers import DeviceActor, check_items, load_and_parse, warm_process


@dataclass
class AllPairsConfig:
    """Every knob of a run, with the defaults the Hydra config uses too."""

    leaf_items: int | None = None        # tile side; None: chosen from measured stage costs
    target_tile_s: float = 0.05          # the least a tile should cost when the leaf is chosen
    tile_overhead_s: float = 0.02        # fixed cost per tile in the leaf's cost model
    load_batch: int | None = None        # items per load task; None: from the measured parse
    load_batch_s: float = 0.1            #   time, so one task carries about this much work
    in_flight: int = 2                   # tiles under way per device actor (prefetch depth)
    devices: str = "auto"                # auto | cpu | torch-cpu | cuda
    actors_per_node: int | None = None   # default: one per CPU slot (or GPU)
    host_cache_items: int | None = None  # S: items one node's host tier holds
    host_cache_bytes: int | None = None  # default: half the node's object store
    device_cache_items: int | None = None  # default: 2 * leaf * (in_flight + 1)
    device_cache_bytes: int | None = None
    inline_item_bytes: int = 65536       # items up to this size go to device actors by value
    plan: str = "stripe"                 # stripe | zorder
    eviction: str = "next_use"           # next_use | lru
    window: int = 8                      # pending tiles the scheduler looks at per request
    preflight: bool = True
    progress: bool = True
    runs_root: str = "runs"
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_mb: int | None = None
    resume: bool = False                 # replay the run directory's journal, redo the rest
    validate: float = 0.0                # fraction of tiles recomputed on another actor
    max_retries: int = 2                 # attempts after the first, per tile, on worker loss
    deadline_floor_s: float = 120.0      # a tile's deadline: max(floor, factor * its
    deadline_factor: float = 20.0        #   expected cost from the measured stage times)
    replace_lost_actors: bool = True
    preprocess_on_host: bool = True      # CPU devices: preprocess in the node's load task
    journal: bool = True                 # off only to measure its overhead: no resume without
    journal_fsync_s: float = 1.0         # fsync the journal at most this often (and at the end)
    seed: int = 0                        # for the validation sample
    tail_split: bool = True              # weighted tiles: big tiles for the body of the run,
                                         #   the last ones quartered (space.split_tail)


def _measure(app, keys: Sequence[str], device: str) -> dict:
    """Parse and compare a small sample, timing the second compare (the first compiles).
    The process is warmed up first, so first-call costs do not inflate the parse time."""
    warm_process(app, "host")
    warm_process(app, device)
    sample = list(dict.fromkeys(keys))[:2]
    t0 = time.perf_counter()
    items = [load_and_parse(app, k)[0] for k in sample]
    t_parse = (time.perf_counter() - t0) / max(1, len(sample))
    dev = [app.preprocess(k, it, device) for k, it in zip(sample, items)]
    mask = np.ones((len(dev), len(dev)), bool)
    app.compare(dev, dev, mask, device)
    reps, t0 = 0, time.perf_counter()
    while reps < 3 and (reps == 0 or time.perf_counter() - t0 < 0.2):
        app.compare(dev, dev, mask, device)
        reps += 1
    t_pair = (time.perf_counter() - t0) / (reps * mask.size)
    nbytes = float(np.mean([app.item_nbytes(it) for it in items])) if items else 0.0
    return {"t_pair": t_pair, "t_parse": t_parse, "item_bytes": nbytes}


@ray.remote(num_cpus=1)
def _measure_task(app, keys, device):
    return _measure(app, keys, device)


def choose_leaf(t_pair: float, space: PairSpace, host_items: int, per_node_tiles: int,
                n_actors: int, target_s: float = 0.05, t_item: float = 0.0,
                n_items: int = 0, overhead_s: float = 0.02) -> int:
    """Leaf side from a two-term cost model, bounded so stripes fit and work balances.

    Every tile pays a fixed ``overhead_s`` (two Ray calls, the sink write, events: ~20 ms of CPU
    measured on this 2-core machine), and the run ends with actors idle for about half a tile
    each. With W an actor's share of the work, the lost fraction is overhead/t + t/(2W), least
    at t* = sqrt(2 * overhead * W): big runs get big tiles, small runs small ones, and no tile
    is aimed below ``target_s``.
    """
    work = (n_items * t_item + space.total * t_pair) / max(1, n_actors)
    t_tile = max(target_s, math.sqrt(2 * overhead_s * work))
    b = math.ceil(math.sqrt(t_tile / max(t_pair, 1e-9)))
    # a stripe of at least ~4 leaf blocks plus the streamed columns under way fit the host tier
    b = min(b, max(1, host_items // (4 + per_node_tiles)))
    pairs = max(1, space.total)
    b = min(b, max(1, int(math.sqrt(pairs / (4 * max(1, n_actors))))))  # >= ~4 tiles per actor
    return max(1, b)


def app_weights(app, space: PairSpace) -> PairWeights | None:
    """The app's per-row/per-column cost weights (``app.pair_weights()``), if it has any.

    Optional hook for capacity-aware tiles: a pair (i, j) is taken to cost about
    ``row_w[i] * col_w[j]`` units (Smith-Waterman: sequence lengths, so |q|*|t| cells).
    """
    get = getattr(app, "pair_weights", None)
    found = get() if callable(get) else None
    if found is None:
        return None
    w = found if isinstance(found, PairWeights) else PairWeights(*found)
    if (len(w.row), len(w.col)) != (space.n_rows, space.n_cols):
        raise PairflowError(f"pair_weights() gave {len(w.row)} x {len(w.col)} weights for a "
                            f"{space.n_rows} x {space.n_cols} space")
    return w


def weighted_probe(w: PairWeights, row_keys: Sequence[str], col_keys: Sequence[str]):
    """The probe sample for a weighted app: the median-weight row and column item (a typical
    pair, and never the one huge item), and the mean weight of the probe's pairs."""
    ri = int(np.argsort(w.row, kind="stable")[len(w.row) // 2])
    ci = int(np.argsort(w.col, kind="stable")[len(w.col) // 2])
    # _measure compares the sample with itself: pairs (a,a), (a,b), (b,a), (b,b)
    return [row_keys[ri], col_keys[ci]], ((w.row[ri] + w.col[ci]) / 2) ** 2


def weighted_budget(w: PairWeights, space: PairSpace, t_pair: float, probe_weight: float,
                    target_s: float, n_actors: int, overhead_s: float = 0.0,
                    tail_split: bool = False) -> dict:
    """Cost per weight unit from the probe, and the most one tile may weigh: the cost model of
    ``choose_leaf`` (t* = sqrt(2 * overhead * W), never below ``target_s``) in probed seconds,
    no more than 1/4 of an actor's share (so heavy regions split), and no less than 1/64 of it:
    a probe of two items overstates per-pair costs, and a slow probe (a busy machine) must not
    cut the work into thousands of round trips.

    ``tail_split``: the run's last tiles will be quartered (``space.split_tail``), so the idle
    tail is about a quarter of a body tile, not half of one: the balance t* = sqrt(2 * overhead *
    W / tail) then lies at twice the size. ``tail_weight`` is what to split: about one body tile
    per actor."""
    rate = float(max(probe_weight, 1e-12) / max(t_pair, 1e-12))  # weight units per second
    total = w.total(space)
    share = total / max(1, n_actors)
    t_tile = max(target_s, math.sqrt(2 * overhead_s * share / rate))
    if tail_split:
        t_tile *= 2
    max_weight = max(min(max(t_tile * rate, share / 64), share / 4), 1e-9)
    return {"weight_per_s": rate, "probe_weight": float(probe_weight),
            "max_weight": max_weight, "total_weight": total,
            "tail_weight": n_actors * max_weight if tail_split else 0.0}


class AllPairsResult:
    """What a finished run produced: result files in the run directory, and its metrics."""

    def __init__(self, run_dir: str, summary: dict, sinks: dict):
        self.run_dir = run_dir
        self.summary = summary
        self.outputs = sinks

    @property
    def R(self) -> float:
        return self.summary["R"]

    def matrix(self, field: str = "value") -> np.ndarray:
        import zarr
        return zarr.open_group(self.outputs["dense"], mode="r")[field][...]

    def dask(self, field: str = "value"):
        import dask.array as da
        return da.from_zarr(os.path.join(self.outputs["dense"], field))

    @property
    def topk(self):
        import pandas as pd
        return pd.read_parquet(self.outputs["topk"])

    @property
    def edges(self):
        import pandas as pd
        return pd.read_parquet(self.outputs["threshold"])

    def __repr__(self):
        s = self.summary
        return (f"AllPairsResult(n={s['n_items']}, pairs={s['pairs_total']}, "
                f"wall={s['wall_s']:.2f}s, R={s['R']:.3f}, run_dir={self.run_dir!r})")


class RunHandle:
    """A run under way: ``progress()``, ``result()``, ``metrics()``, ``cancel()``."""

    def __init__(self, run: "_Run"):
        self._run = run

    @property
    def run_dir(self) -> str:
        return self._run.rundir.path

    def progress(self) -> dict:
        return self._run.progress()

    def metrics(self) -> dict:
        return ray.get(self._run.metrics.tick.remote())

    def result(self, timeout: float | None = None) -> AllPairsResult:
        return self._run.wait(timeout)

    def cancel(self) -> None:
        self._run.shutdown("cancelled")

    def _repr_html_(self):
        p = self.progress()
        return f"<b>pairflow run</b> {self.run_dir}: {p['done']}/{p['total']} tiles"

    def __repr__(self):
        p = self.progress()
        return f"RunHandle({self.run_dir!r}, tiles {p['done']}/{p['total']})"


class _Run:
    def __init__(self, app: BasePairApp, sinks: list[Sink], cfg: AllPairsConfig,
                 run_dir: str | None, config_dump: dict | None):
        self.app, self.sinks, self.cfg = app, sinks, cfg
        self.t_start = time.time()
        if cfg.resume and not run_dir:
            raise PairflowError("resume needs the run directory to resume (run_dir=...)")
        if run_dir and cfg.resume and not os.path.exists(os.path.join(run_dir, "meta.json")):
            raise PairflowError(f"nothing to resume in {run_dir}: it has no meta.json")
        self.rundir = RunDir(run_dir).create() if run_dir else new_run_dir(cfg.runs_root,
                                                                           app.name)
        self.config_dump = config_dump or {"allpairs": asdict(cfg), "app": app.describe()}
        self.handles: dict[str, Any] = {}      # actor id -> handle
        self.actor_node: dict[str, int] = {}   # actor id -> node index
        self.refs: dict = {}                   # run() ref -> actor id
        self.kill_reasons: dict[str, str] = {}
        self.node_caches: list = []
        self.warnings: list[str] = []
        self.finished_result: AllPairsResult | None = None
        self.resume_report: dict | None = None
        self.lost_actors: list[dict] = []

    # -- start ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.cfg
        self.phases: dict[str, float] = {}
        previous = read_json(self.rundir.file("meta.json")) if cfg.resume else None
        if not cfg.resume:
            self._write_config()
        self.rundir.set_status("starting")
        try:
            t0 = time.time()
            self.started_ray = init_ray(cfg.ray_address, cfg.num_cpus, cfg.object_store_mb)
            self.phases["ray_init_s"] = time.time() - t0
            self._prepare(previous)
        except BaseException as exc:
            cause = root_cause(exc)
            self.rundir.set_status("failed", error=str(cause))
            self.shutdown(None)
            if isinstance(cause, (InputError, PairflowError, ValueError)):
                raise cause from None
            raise

    def _write_config(self) -> None:
        try:
            from omegaconf import OmegaConf
            text = OmegaConf.to_yaml(OmegaConf.create(self.config_dump))
        except Exception:  # a config that OmegaConf cannot hold still gets written
            text = dumps(self.config_dump)
        write_text(self.rundir.file("config.yaml"), text)

    def _plan_nodes(self, nodes: list[dict]) -> list[tuple]:
        cfg, plan = self.cfg, []
        for node in nodes:
            if cfg.devices in ("auto", "cuda") and node["gpus"] > 0:
                count, dev = node["gpus"], "cuda"
            else:
                count = max(1, node["cpus"])
                dev = "cpu" if cfg.devices in ("auto", "cuda") else cfg.devices
            plan.append((node, cfg.actors_per_node or count, dev))
        return plan

    def _prepare(self, previous: dict | None) -> None:
        cfg, app = self.cfg, self.app
        keys = [str(k) for k in app.keys()]
        if len(set(keys)) != len(keys):
            dup = sorted({k for k in keys if keys.count(k) > 1})[:5]
            raise InputError("inputs", f"duplicate item keys: {dup}")
        index = {k: i for i, k in enumerate(keys)}
        row_keys, col_keys = list(map(str, app.row_keys())), list(map(str, app.col_keys()))
        space = app.space()
        if (space.n_rows, space.n_cols) != (len(row_keys), len(col_keys)):
            raise PairflowError(f"space is {space.n_rows} x {space.n_cols} but the app has "
                                f"{len(row_keys)} row keys and {len(col_keys)} column keys")
        if len(keys) < 1 or space.total == 0:
            raise InputError("inputs", f"nothing to compare: {len(keys)} item(s), "
                             f"{space.total} pair(s)")
        weights = app_weights(app, space)  # capacity-aware tiles, for apps with pair_weights()
        if weights is not None and any(s.name == "dense" for s in self.sinks):
            raise PairflowError("the dense sink needs tiles on its chunk grid, but this app cuts "
                                "tiles by pair weights (pair_weights()); use a topk or "
                                "threshold sink, or switch the app's weighting off")
        items = ItemMap(np.array([index[k] for k in row_keys], dtype=np.int64),
                        np.array([index[k] for k in col_keys], dtype=np.int64))
        nodes = alive_nodes()
        self.plan_nodes = self._plan_nodes(nodes)
        n_actors = sum(c for _, c, _ in self.plan_nodes)
        self.app_ref = ray.put(app)

        # pre-flight and stage measurement run side by side before any compute
        checks = []
        if cfg.preflight and previous is None:  # a resumed run's inputs match its digests
            chunks = np.array_split(np.array(keys, dtype=object), min(len(keys), 4 * n_actors))
            checks = [check_items.remote(self.app_ref, list(c)) for c in chunks if len(c)]
        else:  # nothing to check: still warm the loader processes up (app.warmup)
            checks = [check_items.remote(self.app_ref, []) for _ in range(n_actors)]
        probe = None
        if previous is not None:
            self.measured = previous.get("measured", {})
        else:  # also gives deadlines their expected costs
            sample = [row_keys[0], col_keys[-1]]
            if weights is not None:
                sample, probe_weight = weighted_probe(weights, row_keys, col_keys)
            probe = _measure_task.remote(self.app_ref, sample, self.plan_nodes[0][2])
        t0 = time.time()
        problems = [p for ps in ray.get(checks) for p in ps]
        self.phases["preflight_s"] = time.time() - t0
        if problems:
            more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise InputError(problems[0].split(":")[0], "\n".join(problems[:10]) + more) \
                if len(problems) > 1 else _input_error_from(problems[0])
        fingerprint = {**app.fingerprint(), "space": space.describe()}
        if previous is not None:
            _check_same_work(self.rundir.path, previous.get("fingerprint", {}), fingerprint)
        if probe is not None:
            self.measured = ray.get(probe)
        self.phases["measure_s"] = time.time() - t0

        per_node_tiles = max(c for _, c, _ in self.plan_nodes) * cfg.in_flight
        store = min(n["object_store"] for n in nodes) or 2**30
        host_bytes = cfg.host_cache_bytes or int(0.4 * store)
        if host_bytes > 0.7 * store:
            self.warnings.append(f"host_cache_bytes {host_bytes} is more than 70% of the object "
                                 f"store ({store}); using {int(0.7 * store)}")
            host_bytes = int(0.7 * store)
        if cfg.host_cache_items:
            host_items = cfg.host_cache_items
        else:
            host_items = max(1, int(host_bytes // max(1.0, self.measured.get("item_bytes", 1))))
        host_items_eff = min(host_items, items.n_items)
        if weights is not None and "max_weight" not in self.measured:
            self.measured.update(weighted_budget(weights, space, self.measured["t_pair"],
                                                 probe_weight, cfg.target_tile_s, n_actors,
                                                 cfg.tile_overhead_s, cfg.tail_split))
        if previous is not None:
            leaf = int(previous["leaf_items"])
        else:
            # weighted tiles: the leaf is sized for a pair of mean weight, so a region of
            # typical pairs makes whole leaves and only heavy ones split (a quadtree split
            # quarters a tile: sized otherwise, typical tiles came out 1/4 of the budget)
            t_leaf = self.measured["t_pair"] if weights is None else \
                self.measured["total_weight"] / max(1, space.total) / \
                self.measured["weight_per_s"]
            leaf = cfg.leaf_items or choose_leaf(
                t_leaf, space, host_items_eff, per_node_tiles, n_actors, cfg.target_tile_s,
                t_item=self.measured.get("t_parse", 0.0), n_items=items.n_items,
                overhead_s=cfg.tile_overhead_s)
            if weights is not None and not cfg.leaf_items:
                # a block of mean pairs within 80 % of the budget: blocks vary around the mean
                mean_w = self.measured["total_weight"] / max(1, space.total)
                leaf = max(1, min(leaf, int(math.sqrt(
                    0.8 * self.measured["max_weight"] / max(mean_w, 1e-12)))))
        tiles = leaves(space, leaf) if weights is None else \
            leaves(space, leaf, weights, self.measured["max_weight"])
        plan = cfg.plan
        if weights is not None and plan == "stripe":  # the stripe plan wants one tile per block
            plan = "zorder"
            self.warnings.append("tiles cut by pair weights are visited in Z-order (the stripe "
                                 "plan assumes one tile per leaf block)")
        order = make_plan(plan, host_items_eff, per_node_tiles).order(tiles, items)
        if weights is not None and self.measured.get("tail_weight"):
            # from measured, so a resume cuts the same tiles (same ids) as the run it resumes
            tiles, order = split_tail(space, tiles, order, self.measured["tail_weight"], weights)
        self.space, self.leaf, self.tiles, self.items = space, leaf, tiles, items
        self.row_keys, self.col_keys, self.keys = row_keys, col_keys, keys
        self.bound = bound_R(items.n_items, host_items_eff)
        self.tile_dicts = [t.to_dict() for t in tiles]
        write_json(self.rundir.file("tiles.json"), [self.tile_dicts[i] for i in order])

        ctx = SinkContext(self.rundir.result_dir, space, leaf, row_keys, col_keys, app.fields())
        for sink in self.sinks:
            sink.open(ctx, resume=previous is not None)
            sink.before_finalize()
        done_tiles: list[int] = []
        if previous is not None:
            done_tiles, self.resume_report = _replay_journal(self.rundir, self.sinks, len(tiles))
        done_set = set(done_tiles)
        pending = [t for t in range(len(tiles)) if t not in done_set]
        keep: list[int] = []
        if cfg.validate and pending:
            rng = np.random.default_rng(cfg.seed)
            count = min(len(pending), max(1, math.ceil(cfg.validate * len(pending))))
            keep = sorted(int(t) for t in rng.choice(pending, count, replace=False))
        t_pair = self.measured.get("t_pair", 0.0)
        t_parse = self.measured.get("t_parse", 0.0)
        deadlines = [max(cfg.deadline_floor_s, cfg.deadline_factor *
                         (t_pair * t.pairs + t_parse * ((t.r1 - t.r0) + (t.c1 - t.c0))))
                     for t in tiles]

        done_pairs = sum(tiles[t].pairs for t in done_tiles)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        metrics_kw = dict(run_dir=self.rundir.path, n_items=items.n_items,
                          tiles_total=len(tiles), pairs_total=space.total, bound_R=self.bound,
                          initial_tiles=len(done_tiles), initial_pairs=done_pairs)
        scheduler_kw = dict(
            run_dir=self.rundir.path, tiles=self.tile_dicts, row_items=items.row_items,
            col_items=items.col_items, order=order, window=cfg.window, locality=True,
            done_tiles=done_tiles, deadlines=deadlines, max_retries=cfg.max_retries,
            keep_fields=keep, row_keys=row_keys, col_keys=col_keys, journal=cfg.journal,
            journal_fsync_s=cfg.journal_fsync_s)
        self.l1_items = cfg.device_cache_items or max(4, 2 * leaf * (cfg.in_flight + 1))
        # L2 plus every L1 of a node stay under ~70 % of its object store
        per_node = max(c for _, c, _ in self.plan_nodes)
        self.l1_bytes = cfg.device_cache_bytes or max(1, int(0.3 * store) // per_node)
        actors_meta = []
        for n_idx, (node, count, dev) in enumerate(self.plan_nodes):
            cache_kw = dict(
                node=f"node-{n_idx}", node_id=node["node_id"], app=app, item_keys=keys,
                budget_bytes=None if cfg.host_cache_items else host_bytes,
                budget_items=host_items if cfg.host_cache_items else None,
                eviction=cfg.eviction, preprocess_on=dev if self._host_preprocess(dev) else None,
                load_batch=self.load_batch(), load_slots=max(1, node["cpus"]),
                inline_bytes=cfg.inline_item_bytes,
                expected_item_bytes=self.measured.get("item_bytes"))
            where = NodeAffinitySchedulingStrategy(node["node_id"], soft=False)
            if n_idx == 0:
                # the run's bookkeeping and the head node's cache in one process on the head
                # node, which a cluster cannot lose (engine/coordinator.py says why one)
                self.coordinator = Coordinator.options(scheduling_strategy=where).remote(
                    scheduler_kw, metrics_kw, cache_kw)
                self.scheduler = Part(self.coordinator, "scheduler")
                self.metrics = Part(self.coordinator, "metrics")
                self.node_caches.append(Part(self.coordinator, "cache"))
            else:
                self.node_caches.append(NodeCacheActor.options(scheduling_strategy=where).remote(
                    **cache_kw, scheduler=self.scheduler, metrics=self.metrics))
            for d in range(count):
                actor_id = self._spawn(n_idx, f"dev-{d}")
                actors_meta.append({"id": actor_id, "node": f"node-{n_idx}", "device": dev,
                                    "address": node["address"]})
        meta = {"kind": "allpairs", "app": app.name, "space": space.describe(),
                "n_items": items.n_items, "keys_sample": keys[:50], "leaf_items": leaf,
                "tiles_total": len(tiles), "pairs_total": space.total, "actors": actors_meta,
                "host_cache_items": host_items_eff, "bound_R": self.bound,
                "plan": cfg.plan, "eviction": cfg.eviction, "in_flight": cfg.in_flight,
                "measured": self.measured, "started": self.t_start, "phases": self.phases,
                "sinks": [s.name for s in self.sinks], "fingerprint": fingerprint,
                "validate_tiles": keep, "warnings": self.warnings,
                "resumed": self.resume_report}
        write_json(self.rundir.file("meta.json"), meta)
        self.meta = meta
        t0 = time.time()
        pids = ray.get([h.ready.remote() for h in self.handles.values()])
        ray.get([c.ready.remote() for c in self.node_caches])
        for entry, pid in zip(meta["actors"], pids):
            entry["pid"] = pid
        write_json(self.rundir.file("meta.json"), meta)
        self.phases["actors_s"] = time.time() - t0
        self.t_compute = time.time()
        for actor_id, handle in self.handles.items():
            self.refs[handle.run.remote()] = actor_id
        self.rundir.set_status("running")

    def load_batch(self) -> int:
        """Items per load task: enough that one task carries ``load_batch_s`` of parsing
        (a Ray task costs a few ms of CPU), or ``cfg.load_batch`` when set."""
        if self.cfg.load_batch:
            return int(self.cfg.load_batch)
        t_item = self.measured.get("t_parse", 0.0)
        return max(1, min(256, math.ceil(self.cfg.load_batch_s / max(t_item, 1e-5))))

    def _host_preprocess(self, device: str) -> bool:
        """On a CPU the device *is* host memory: preprocess once per node in the load task, not
        once per device actor (which would repeat the work for every actor needing an item)."""
        return device == "cpu" and self.cfg.preprocess_on_host

    def _spawn(self, n_idx: int, name: str) -> str:
        """Start one device actor on node ``n_idx`` (also used to replace a lost one)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        node, _, dev = self.plan_nodes[n_idx]
        actor_id = f"node-{n_idx}/{name}"
        handle = DeviceActor.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["node_id"], soft=False)
        ).remote(actor_id, f"node-{n_idx}", self.app_ref, self.space, self.items.row_items,
                 self.items.col_items, self.keys, self.node_caches[n_idx], self.scheduler,
                 self.metrics, self.sinks, self.l1_bytes, self.l1_items,
                 self.cfg.in_flight, dev, self.cfg.eviction, self.tile_dicts,
                 preprocessed_on_host=self._host_preprocess(dev))
        self.handles[actor_id] = handle
        self.actor_node[actor_id] = n_idx
        return actor_id

    # -- watch ------------------------------------------------------------------------------
    def progress(self) -> dict:
        if self.finished_result is not None:
            s = self.finished_result.summary
            return {"done": s["tiles_total"], "total": s["tiles_total"], "in_flight": 0,
                    "error": None}
        return ray.get(self.scheduler.progress.remote())

    def _on_actor_lost(self, actor_id: str, exc: BaseException) -> None:
        reason = self.kill_reasons.get(actor_id) or f"actor {actor_id} died: {exc}"
        lost = ray.get(self.scheduler.actor_lost.remote(actor_id, reason))
        self.handles.pop(actor_id, None)
        n_idx = self.actor_node[actor_id]
        alive = {n["node_id"] for n in alive_nodes()}
        node_alive = self.plan_nodes[n_idx][0]["node_id"] in alive
        if node_alive:  # the GCS may not know yet: is the node's cache still answering?
            try:
                ray.get(self.node_caches[n_idx].ready.remote(), timeout=5)
            except Exception:
                node_alive = False
        self.lost_actors.append({"actor": actor_id, "reason": reason, "tiles_requeued": lost,
                                 "node_alive": node_alive})
        if not node_alive:
            self.scheduler.forget_node.remote(f"node-{n_idx}")
            return
        if self.cfg.replace_lost_actors:
            base = actor_id.split("/", 1)[1].split(".", 1)[0]
            new_id = self._spawn(n_idx, f"{base}.{len(self.lost_actors)}")
            self.refs[self.handles[new_id].run.remote()] = new_id

    def _kill_overdue(self, overdue: list) -> None:
        for t, actor_id, elapsed, deadline in overdue:
            if actor_id in self.kill_reasons or actor_id not in self.handles:
                continue
            self.kill_reasons[actor_id] = (f"tile {t} passed its deadline of {deadline:.1f} s "
                                           f"on {actor_id} (running for {elapsed:.1f} s)")
            ray.kill(self.handles[actor_id], no_restart=True)

    def wait(self, timeout: float | None = None) -> AllPairsResult:
        if self.finished_result is not None:
            return self.finished_result
        from ray.exceptions import RayActorError
        deadline = None if timeout is None else time.time() + timeout
        bar = _Progress(len(self.tiles), self.cfg.progress)
        last_status = time.time()
        try:
            while self.refs:
                ready, _ = ray.wait(list(self.refs), num_returns=1, timeout=0.5)
                for ref in ready:
                    actor_id = self.refs.pop(ref)
                    try:
                        ray.get(ref)
                    except RayActorError as exc:
                        self._on_actor_lost(actor_id, exc)
                if not self.handles and self.refs == {}:
                    prog = ray.get(self.scheduler.progress.remote())
                    if prog["done"] < prog["total"] and not prog["error"]:
                        raise PairflowError("every device actor was lost; "
                                            f"{prog['done']}/{prog['total']} tiles done")
                # one call for progress and overdue tiles, and metrics only for a progress
                # bar: every call is CPU at both ends, twice a second for the whole run
                prog = ray.get(self.scheduler.watch.remote())
                self._kill_overdue(prog["overdue"])
                if prog["error"]:
                    raise PairflowError(prog["error"])
                if bar.enabled:
                    bar.update(ray.get(self.metrics.tick.remote()))
                if time.time() - last_status > 2:
                    self.rundir.set_status("running")
                    if not bar.enabled:  # metrics.jsonl advances while tiles are long
                        self.metrics.tick.remote()
                    last_status = time.time()
                if deadline and time.time() > deadline and self.refs:
                    raise TimeoutError(f"run not finished after {timeout} s "
                                       f"({prog['done']}/{len(self.tiles)} tiles)")
            prog = ray.get(self.scheduler.progress.remote())
            if prog["error"]:
                raise PairflowError(prog["error"])
            self._validate()
        except TimeoutError:
            bar.close()
            raise
        except BaseException as exc:
            bar.close()
            cause = root_cause(exc)
            message = str(cause)
            self.rundir.set_status("failed", error=message, lost_actors=self.lost_actors)
            self.shutdown(None)
            if isinstance(cause, (InputError, PairflowError)):
                raise cause from None
            raise PairflowError(message) from None
        self.finished_result = self._finish()
        bar.update(self.finished_result.summary, final=True)
        bar.close()
        return self.finished_result

    def _validate(self) -> None:
        """Recompute the sampled tiles on another actor and compare exactly."""
        if not self.cfg.validate:
            return
        from .scheduler import describe_tile
        kept = ray.get(self.scheduler.kept_fields.remote())
        others = list(self.handles)
        for i, (t, rec) in enumerate(sorted(kept.items())):
            choices = [a for a in others if a != rec["actor"]]
            if not choices:
                choices = [self._spawn(self.actor_node.get(rec["actor"], 0), f"validator-{i}")]
                others.append(choices[0])
            other = choices[i % len(choices)]
            fields = ray.get(self.handles[other].recompute.remote(t))
            tile = self.tiles[t]
            mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
            for name, a in rec["fields"].items():
                a, b = np.asarray(a), np.asarray(fields[name])
                same = (a == b) | (_isnan(a) & _isnan(b))
                bad = np.argwhere(mask & ~same)
                if len(bad):
                    r, c = bad[0]
                    raise PairflowError(
                        f"validation failed: {describe_tile(tile, self.row_keys, self.col_keys)}"
                        f", pair ({self.row_keys[tile.r0 + r]}, {self.col_keys[tile.c0 + c]}): "
                        f"{name} = {a[r, c]!r} from {rec['actor']} but {b[r, c]!r} from {other}")
        self.validated = len(kept)

    def _finish(self) -> AllPairsResult:
        t_drain = time.time()
        cache_stats = []
        for cache in self.node_caches:  # a cache on a lost node is gone with its counters
            try:
                cache_stats.append(ray.get(cache.stats.remote(), timeout=30))
            except Exception as exc:
                cache_stats.append({"lost": f"{type(exc).__name__}"})
        closed = ray.get(self.scheduler.close.remote())
        snap = ray.get(self.metrics.close.remote())
        t_finalize = time.time()
        outputs = {}
        for sink in self.sinks:
            outputs[sink.name] = sink.finalize()
        self.phases["drain_s"] = t_finalize - t_drain  # counters and journal closed
        self.phases["finalize_s"] = time.time() - t_finalize  # sinks merged and written
        wall = time.time() - self.t_start
        loads = snap["tiers"]["source"]["loads"]  # every node's last report, lost ones too
        journal = read_jsonl(self.rundir.file("journal.jsonl"))
        summary = {
            "app": self.app.name, "n_items": self.items.n_items,
            "space": self.space.describe(), "pairs_total": self.space.total,
            "tiles_total": len(self.tiles), "tiles_journaled": len({e["tile"] for e in journal}),
            "leaf_items": self.leaf, "wall_s": wall, "compute_s": time.time() - self.t_compute,
            "loads": loads, "R": loads / max(1, self.items.n_items), "bound_R": self.bound,
            "host_cache_items": self.meta["host_cache_items"],
            "tiers": snap["tiers"], "stage_seconds": snap["stage_seconds"],
            "actors": snap["actors"], "n_actors": len(self.meta["actors"]),
            "node_caches": cache_stats, "outputs": outputs,
            "measured": self.measured, "app_info": self.app.describe(),
            "phases": {**self.phases, "startup_s": self.t_compute - self.t_start},
            "resumed": self.resume_report, "lost_actors": self.lost_actors,
            "validated_tiles": getattr(self, "validated", 0), "warnings": self.warnings,
            "journal_s": closed["journal_s"], "journal_fsync_s": closed["journal_fsync_s"],
        }
        write_json(self.rundir.file("summary.json"), summary)
        _trace_to_parquet(self.rundir)
        self.rundir.set_status("finished")
        self.shutdown(None)
        return AllPairsResult(self.rundir.path, summary, outputs)

    def shutdown(self, state: str | None) -> None:
        # the head node's cache is a part of the coordinator, not an actor of its own
        caches = [c for c in self.node_caches if not isinstance(c, Part)]
        for a in list(self.handles.values()) + caches + [getattr(self, "coordinator", None)]:
            if a is not None:
                try:
                    ray.kill(a)
                except Exception:
                    pass
        if state:
            self.rundir.set_status("failed", error=state)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)


def _check_same_work(run_dir: str, old: dict, new: dict) -> None:
    """Refuse to resume when anything that decides the results differs; say what."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and key == "inputs":
            for u in sorted(set(a) | set(b)):
                if u not in a:
                    diffs.append(f"input {u} was added")
                elif u not in b:
                    diffs.append(f"input {u} was removed")
                elif a[u] != b[u]:
                    diffs.append(f"input {u} changed (sha256 {a[u][:12]}.. -> {b[u][:12]}..)")
        else:
            diffs.append(f"{key}: {a!r} -> {b!r}")
    if diffs:
        raise PairflowError(f"cannot resume {run_dir}: the run would compute something else: "
                            + "; ".join(diffs))


def _replay_journal(rundir: RunDir, sinks: list[Sink], n_tiles: int) -> tuple[list, dict]:
    """Tiles whose every sink entry still verifies (CRC); the rest are recomputed."""
    last: dict[tuple, dict] = {}
    for e in read_jsonl(rundir.file("journal.jsonl")):
        last[(e["tile"], e["sink"], e.get("location"))] = e
    by_tile: dict[int, list] = {}
    for (t, _, _), e in last.items():
        by_tile.setdefault(t, []).append(e)
    by_name = {s.name: s for s in sinks}
    done, corrupt = [], []
    for t, entries in sorted(by_tile.items()):
        names = {e["sink"] for e in entries}
        ok = names >= set(by_name) and all(by_name[e["sink"]].verify(e)
                                           for e in entries if e["sink"] in by_name)
        (done if ok else corrupt).append(t)
    report = {"reused": len(done), "repaired": len(corrupt),
              "recomputed": n_tiles - len(done) - len(corrupt), "corrupt_tiles": corrupt}
    return done, report


def _input_error_from(problem: str) -> InputError:
    file, _, rest = problem.partition(": ")
    return InputError(file, rest or problem)


def _trace_to_parquet(rundir: RunDir) -> None:
    rows = read_jsonl(rundir.file("trace.jsonl"))
    if not rows:
        return
    import pandas as pd
    tmp = rundir.file("trace.parquet.tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, rundir.file("trace.parquet"))


class _Progress:
    """A rich progress bar on a terminal; a line every few seconds otherwise."""

    def __init__(self, total: int, enabled: bool):
        self.enabled, self.total = enabled, total
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.bar = None
        if enabled and self.tty:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self.bar = Progress(TextColumn("[bold]tiles"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TimeRemainingColumn(),
                                TextColumn("R={task.fields[R]:.2f}"), transient=False)
            self.task = self.bar.add_task("tiles", total=total, R=0.0)
            self.bar.start()

    def update(self, snap: dict, final: bool = False) -> None:
        if not self.enabled:
            return
        done = snap.get("tiles_done", snap.get("tiles_total", 0))
        if final:
            done = self.total
        if self.bar is not None:
            self.bar.update(self.task, completed=done, R=snap.get("R", 0.0))
        elif final or time.time() - self.last_line > 5:
            self.last_line = time.time()
            print(f"[pairflow] tiles {done}/{self.total}  R={snap.get('R', 0.0):.2f}",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def allpairs(keys: Sequence[str] | None = None, *, load: Callable | None = None,
             compare: Callable | None = None, tile: bool = False,
             targets: Sequence[str] | None = None, app: BasePairApp | None = None,
             sink: Any = "dense", sinks: Sequence[Any] | None = None, run_dir: str | None = None,
             wait: bool = False, config_dump: dict | None = None, **options) -> RunHandle:
    """Compare all pairs (or queries x targets) and return a handle to the run.

    Either give an ``app`` (a ``PairApp``), or ``keys`` with ``load(key) -> item`` and
    ``compare(a, b) -> float`` (``tile=True``: ``compare(lefts, rights) -> 2-D array``).
    ``options`` are the fields of ``AllPairsConfig``. ``wait=True`` blocks and returns the
    result instead of the handle.
    """
    if app is None:
        if keys is None or load is None or compare is None:
            raise TypeError("allpairs needs app=..., or keys, load= and compare=")
        app = FunctionApp(keys, load, compare, tile=tile, targets=targets)
    unknown = set(options) - set(AllPairsConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown allpairs option(s): {sorted(unknown)}")
    cfg = AllPairsConfig(**options)
    if cfg.in_flight < 1:
        raise ValueError("in_flight must be >= 1")
    sink_objs = [make_sink(s) for s in (sinks if sinks is not None else [sink])]
    run = _Run(app, sink_objs, cfg, run_dir, config_dump)
    run.start()
    handle = RunHandle(run)
    return handle.result() if wait else handle
