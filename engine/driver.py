"""The all-pairs driver: from an app (or two functions) to a finished, journaled result.

``allpairs(...)`` checks every input before compute (pre-flight), measures a sample of the stages
to size leaf tiles (a tile should cost far more than its Ray round trip), plans the tile order,
starts one ``NodeCache`` per node, one ``DeviceActor`` per device, a ``Scheduler`` and a
``Metrics`` actor, and returns a ``RunHandle`` at once. ``handle.result()`` shows progress, waits,
finalizes the sinks and returns an ``AllPairsResult``. Everything it does is recorded in the run
directory (docs/run-directory.md).
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
from .errors import InputError, PairflowError, root_cause
from .metrics import Metrics
from .policy import ItemMap, bound_R, make_plan
from .rundir import RunDir, dumps, new_run_dir, read_jsonl, write_json, write_text
from .runtime import alive_nodes, init_ray
from .scheduler import Scheduler
from .sinks import Sink, SinkContext, make_sink
from .space import PairSpace, Tile, leaves
from .workers import DeviceActor, NodeCache, check_items, load_and_parse


@dataclass
class AllPairsConfig:
    """Every knob of a run, with the defaults the Hydra config uses too."""

    leaf_items: int | None = None        # tile side; None: chosen from measured stage costs
    target_tile_s: float = 0.05          # what a tile should cost when the leaf is chosen
    in_flight: int = 2                   # tiles under way per device actor (prefetch depth)
    devices: str = "auto"                # auto | cpu | torch-cpu | cuda
    actors_per_node: int | None = None   # default: one per CPU slot (or GPU)
    host_cache_items: int | None = None  # S: items one node's host tier holds
    host_cache_bytes: int | None = None  # default: half the node's object store
    device_cache_items: int | None = None
    device_cache_bytes: int | None = None
    plan: str = "stripe"                 # stripe | zorder
    eviction: str = "next_use"           # next_use | lru
    window: int = 8                      # pending tiles the scheduler looks at per request
    preflight: bool = True
    progress: bool = True
    runs_root: str = "runs"
    ray_address: str | None = None
    num_cpus: int | None = None
    object_store_mb: int | None = None


def _measure(app, keys: Sequence[str], device: str) -> dict:
    """Parse and compare a small sample, timing the second compare (the first compiles)."""
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
                n_actors: int, target_s: float = 0.05) -> int:
    """Leaf side so a tile costs about ``target_s``, bounded so stripes fit and work balances."""
    b = math.ceil(math.sqrt(target_s / max(t_pair, 1e-9)))
    b = min(b, max(1, host_items // (2 + per_node_tiles)))  # a stripe plus streamed columns fit
    pairs = max(1, space.total)
    b = min(b, max(1, int(math.sqrt(pairs / (4 * max(1, n_actors))))))  # >= ~4 tiles per actor
    return max(1, b)


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
        self.rundir = RunDir(run_dir).create() if run_dir else new_run_dir(cfg.runs_root,
                                                                           app.name)
        self.config_dump = config_dump or {"allpairs": asdict(cfg), "app": app.describe()}
        self.actors: list = []
        self.error: str | None = None
        self.finished_result: AllPairsResult | None = None

    # -- start ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg, app = self.cfg, self.app
        self._write_config()
        self.rundir.set_status("starting")
        self.phases: dict[str, float] = {}
        try:
            t0 = time.time()
            self.started_ray = init_ray(cfg.ray_address, cfg.num_cpus, cfg.object_store_mb)
            self.phases["ray_init_s"] = time.time() - t0
            self._prepare()
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

    def _prepare(self) -> None:
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
        items = ItemMap(np.array([index[k] for k in row_keys], dtype=np.int64),
                        np.array([index[k] for k in col_keys], dtype=np.int64))
        nodes = alive_nodes()
        device = cfg.devices
        plan_nodes = []
        for node in nodes:
            if device in ("auto", "cuda") and node["gpus"] > 0:
                count, dev = node["gpus"], "cuda"
            else:
                count, dev = max(1, node["cpus"]), ("cpu" if device in ("auto", "cuda") else device)
            if cfg.actors_per_node:
                count = cfg.actors_per_node
            plan_nodes.append((node, count, dev))
        n_actors = sum(c for _, c, _ in plan_nodes)
        app_ref = ray.put(app)

        # pre-flight and stage measurement run side by side before any compute
        checks = []
        if cfg.preflight:
            chunks = np.array_split(np.array(keys, dtype=object), min(len(keys), 4 * n_actors))
            checks = [check_items.remote(app_ref, list(c)) for c in chunks if len(c)]
        probe = None
        if cfg.leaf_items is None or cfg.host_cache_items is None:
            sample = [row_keys[0], col_keys[-1]]
            probe = _measure_task.remote(app_ref, sample, plan_nodes[0][2])
        t0 = time.time()
        problems = [p for ps in ray.get(checks) for p in ps]
        self.phases["preflight_s"] = time.time() - t0
        if problems:
            more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise InputError(problems[0].split(":")[0], "\n".join(problems[:10]) + more) \
                if len(problems) > 1 else _input_error_from(problems[0])
        self.measured = ray.get(probe) if probe is not None else {}
        self.phases["measure_s"] = time.time() - t0

        per_node_tiles = max(c for _, c, _ in plan_nodes) * cfg.in_flight
        store = nodes[0]["object_store"] or 2**30
        host_bytes = cfg.host_cache_bytes or store // 2
        if cfg.host_cache_items:
            host_items = cfg.host_cache_items
        else:
            host_items = max(1, int(host_bytes // max(1.0, self.measured.get("item_bytes", 1))))
        host_items_eff = min(host_items, items.n_items)
        leaf = cfg.leaf_items or choose_leaf(self.measured["t_pair"], space, host_items_eff,
                                             per_node_tiles, n_actors, cfg.target_tile_s)
        tiles = leaves(space, leaf)
        order = make_plan(cfg.plan, host_items_eff, per_node_tiles).order(tiles, items)
        self.space, self.leaf, self.tiles, self.items = space, leaf, tiles, items
        self.row_keys, self.col_keys = row_keys, col_keys
        self.bound = bound_R(items.n_items, host_items_eff)
        tile_dicts = [t.to_dict() for t in tiles]
        write_json(self.rundir.file("tiles.json"), [tile_dicts[i] for i in order])

        ctx = SinkContext(self.rundir.result_dir, space, leaf, row_keys, col_keys, app.fields())
        for sink in self.sinks:
            sink.open(ctx)

        self.metrics = Metrics.remote(self.rundir.path, items.n_items, len(tiles), space.total,
                                      self.bound)
        self.scheduler = Scheduler.remote(self.rundir.path, tile_dicts, items.row_items,
                                          items.col_items, order, cfg.window, True)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        actors_meta = []
        self.node_caches = []
        l1_items = cfg.device_cache_items or max(4, 2 * leaf * (cfg.in_flight + 1))
        for n_idx, (node, count, dev) in enumerate(plan_nodes):
            where = NodeAffinitySchedulingStrategy(node["node_id"], soft=False)
            name = f"node-{n_idx}"
            node_cache = NodeCache.options(scheduling_strategy=where).remote(
                name, node["node_id"], app, keys,
                None if cfg.host_cache_items else host_bytes,
                host_items if cfg.host_cache_items else None,
                cfg.eviction, self.scheduler, self.metrics)
            self.node_caches.append(node_cache)
            for d in range(count):
                actor_id = f"{name}/dev-{d}"
                actor = DeviceActor.options(scheduling_strategy=where).remote(
                    actor_id, name, app_ref, space, items.row_items, items.col_items, keys,
                    node_cache, self.scheduler, self.metrics, self.sinks,
                    cfg.device_cache_bytes, l1_items, cfg.in_flight, dev, cfg.eviction,
                    tile_dicts)
                self.actors.append(actor)
                actors_meta.append({"id": actor_id, "node": name, "device": dev,
                                    "address": node["address"]})
        meta = {"kind": "allpairs", "app": app.name, "space": space.describe(),
                "n_items": items.n_items, "keys_sample": keys[:50], "leaf_items": leaf,
                "tiles_total": len(tiles), "pairs_total": space.total, "actors": actors_meta,
                "host_cache_items": host_items_eff, "bound_R": self.bound,
                "plan": cfg.plan, "eviction": cfg.eviction, "in_flight": cfg.in_flight,
                "measured": self.measured, "started": self.t_start, "phases": self.phases,
                "sinks": [s.name for s in self.sinks]}
        write_json(self.rundir.file("meta.json"), meta)
        self.meta = meta
        t0 = time.time()
        ray.get([a.ready.remote() for a in self.actors + self.node_caches])
        self.phases["actors_s"] = time.time() - t0
        self.t_compute = time.time()
        self.run_refs = [a.run.remote() for a in self.actors]
        self.rundir.set_status("running")

    # -- watch ------------------------------------------------------------------------------
    def progress(self) -> dict:
        if self.finished_result is not None:
            s = self.finished_result.summary
            return {"done": s["tiles_total"], "total": s["tiles_total"], "in_flight": 0,
                    "error": None}
        return ray.get(self.scheduler.progress.remote())

    def wait(self, timeout: float | None = None) -> AllPairsResult:
        if self.finished_result is not None:
            return self.finished_result
        deadline = None if timeout is None else time.time() + timeout
        bar = _Progress(len(self.tiles), self.cfg.progress)
        pending = list(self.run_refs)
        try:
            while pending:
                _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                done_refs = [r for r in self.run_refs if r not in pending]
                ray.get(done_refs)  # raises the first failure at once
                snap = ray.get(self.metrics.tick.remote())
                bar.update(snap)
                if deadline and time.time() > deadline and pending:
                    raise TimeoutError(f"run not finished after {timeout} s "
                                       f"({snap['tiles_done']}/{len(self.tiles)} tiles)")
        except TimeoutError:
            bar.close()
            raise
        except BaseException as exc:
            bar.close()
            cause = root_cause(exc)
            message = str(cause)
            self.rundir.set_status("failed", error=message)
            self.shutdown(None)
            if isinstance(cause, (InputError, PairflowError)):
                raise cause from None
            raise PairflowError(message) from None
        self.finished_result = self._finish()
        bar.update(self.finished_result.summary, final=True)
        bar.close()
        return self.finished_result

    def _finish(self) -> AllPairsResult:
        actor_stats = ray.get(self.run_refs)
        cache_stats = ray.get([c.stats.remote() for c in self.node_caches])
        ray.get(self.scheduler.close.remote())
        time.sleep(0.05)
        snap = ray.get(self.metrics.close.remote())
        outputs = {}
        for sink in self.sinks:
            outputs[sink.name] = sink.finalize()
        wall = time.time() - self.t_start
        loads = sum(c["loads"] for c in cache_stats)
        journal = read_jsonl(self.rundir.file("journal.jsonl"))
        summary = {
            "app": self.app.name, "n_items": self.items.n_items,
            "space": self.space.describe(), "pairs_total": self.space.total,
            "tiles_total": len(self.tiles), "tiles_journaled": len({e["tile"] for e in journal}),
            "leaf_items": self.leaf, "wall_s": wall, "compute_s": time.time() - self.t_compute,
            "loads": loads, "R": loads / max(1, self.items.n_items), "bound_R": self.bound,
            "host_cache_items": self.meta["host_cache_items"],
            "tiers": snap["tiers"], "stage_seconds": snap["stage_seconds"],
            "actors": actor_stats, "node_caches": cache_stats, "outputs": outputs,
            "measured": self.measured, "app_info": self.app.describe(),
            "phases": {**self.phases, "startup_s": self.t_compute - self.t_start},
        }
        write_json(self.rundir.file("summary.json"), summary)
        _trace_to_parquet(self.rundir)
        self.rundir.set_status("finished")
        self.shutdown(None)
        return AllPairsResult(self.rundir.path, summary, outputs)

    def shutdown(self, state: str | None) -> None:
        for a in getattr(self, "actors", []) + getattr(self, "node_caches", []) + \
                [getattr(self, "scheduler", None), getattr(self, "metrics", None)]:
            if a is not None:
                try:
                    ray.kill(a)
                except Exception:
                    pass
        if state:
            self.rundir.set_status("failed", error=state)


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
