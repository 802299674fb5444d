"""Pre-flight: everything a run learns and checks before it plans and starts a worker.

``read_inputs``: the keys, the space and the weights the app says it will compare, checked
against each other and the sinks before any process starts (free of Ray).

``Preflight``: the probe and the checks, in the order that hides Ray's start-up. Ray (when the
run will use it) starts in the background first; ``loading.measure_stages`` times a sample of
the stages in this process; the probe's estimate of the work chooses the executor
(``executor.choose``); ``loading.check_items`` reads every input (on a thread beside the probe
when no Ray is starting, else in this thread while Ray starts); then the inputs are shipped when
nothing is shared and the loader processes are warmed; last, what a tile costs beyond its
compares on the executor chosen (``tile_cost.tile_overhead``, with ``measure_tile_io``). It
returns a ``Checked``: what the run keeps (executor, measurements, nodes, shipment, timings).
It is a class, not one function, only so the executor it has started so far stays reachable
(``Preflight.ex``) when a check fails: the run must stop that executor, and an exception
carries no return value.

``problems_error`` turns the checkers' problems into one error that names the files.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InputError, PairflowError
from ..run.journal import check_same_work
from ..run.runtime import shares_files
from ..run.shipping import Shipment, check_reachable, input_urls
from .app import PackKey
from .workers.executor import (RayExecutor, choose, estimate_work_s, local_gpus, local_node,
                               make_executor, ray_is_up)
from .cache.loading import check_items, measure_stages
from .items import ItemMap
from .sinks.shipped import check_sinks
from .plan.sizing import app_weights, plan_nodes, weighted_probe
from .plan.tile_cost import tile_overhead
from .space import PairSpace, PairWeights
from .cache.store import open_store


@dataclass(frozen=True)
class RunInputs:
    """The items of a run and the space of pairs over them."""

    keys: list[str]            # every item once, in the app's order (item id = position)
    row_keys: list[str]
    col_keys: list[str]
    space: PairSpace
    weights: PairWeights | None  # per-row/column pair costs, for capacity-aware tiles
    items: ItemMap


def read_inputs(app, sink_names: list[str]) -> RunInputs:
    """Keys, space and weights from the app, checked for consistency with each other and
    with the sinks (``sink_names``)."""
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
    if weights is not None and "dense" in sink_names:
        raise PairflowError("the dense sink needs tiles on its chunk grid, but this app cuts "
                            "tiles by pair weights (pair_weights()); use a topk or "
                            "threshold sink, or switch the app's weighting off")
    items = ItemMap(np.array([index[k] for k in row_keys], dtype=np.int64),
                    np.array([index[k] for k in col_keys], dtype=np.int64))
    return RunInputs(keys, row_keys, col_keys, space, weights, items)


def packed_inputs(inputs: RunInputs, items: ItemMap, members: list) -> RunInputs:
    """The run's inputs once its items are packed (``sizing.plan_run``): the item keys are
    the packs' (``PackKey``), the rows' and columns' keys stay those of the app's items."""
    keys = [PackKey([inputs.keys[i] for i in m]) for m in members]
    return replace(inputs, keys=keys, items=items)


def problems_error(problems: list[str]) -> InputError:
    """One error for the pre-flight's problems (``"file: what"`` each): the first ten, and
    how many more there were."""
    if len(problems) == 1:
        file, _, rest = problems[0].partition(": ")
        return InputError(file, rest or problems[0])
    more = f"\n... and {len(problems) - 10} more" if len(problems) > 10 else ""
    return InputError(problems[0].split(":")[0], "\n".join(problems[:10]) + more)


@dataclass
class Checked:
    """What pre-flight hands the run: the executor (started, its nodes known) and all it
    measured and sent ahead."""

    ex: Any                         # the run's executor, ready
    store: Any                      # the run's L4 item store (store.py), or None
    measured: dict                  # the stages' costs (the probe's, or a resumed run's first)
    probe_store: dict | None        # the probe's L4 lookups, when it measured here
    estimate_s: float | None        # the probe's work per CPU, when it chose the executor
    nodes: list[dict]               # the executor's nodes, the head first
    app_ref: Any                    # the app, put once for every task and actor
    shipment: Shipment | None       # the driver's inputs sent ahead, when nothing is shared
    warm_refs: list                 # every loader process's warm-up (awaited at launch)
    fingerprint: dict               # what the run computes (a resume must match it)
    probe_weight: float | None      # the probe's pair weight (weighted apps)
    phases: dict[str, float]        # measure_s, preflight_s, ray_wait_s, ... (meta.json)

    @property
    def ship(self) -> bool:
        """Nothing shared between the driver and the workers (``shares_files``)."""
        return self.shipment is not None


class Preflight:
    """Probe, executor and checks of one run, before any compute (the module docstring says
    the order and why this is a class). ``executor``: a session's Ray executor, or None."""

    def __init__(self, app, cfg, inputs: RunInputs, sinks: list, log_path: str,
                 run_path: str, executor=None):
        self.app, self.cfg, self.inputs, self.sinks = app, cfg, inputs, sinks
        self.log_path, self.run_path = log_path, run_path
        self.ex = executor  # the executor as it stands, for the run to stop if a check fails
        self.phases: dict[str, float] = {}

    def run(self, previous: dict | None) -> Checked:
        """Measure the stages and check every input in this process before any compute, while
        Ray (when the run uses it) starts in the background; a resumed run (``previous``: its
        meta.json) reuses its first run's measurements and must compute the same thing. The
        probe's estimate of the work chooses the executor (executor.choose)."""
        cfg, app, inp = self.cfg, self.app, self.inputs
        store = open_store(cfg.store, app)  # L4, read by the probe and the load tasks
        runtime = (cfg.ray_address, cfg.num_cpus, cfg.object_store_mb)
        if self.ex is not None and cfg.executor == "inprocess":  # forced, even in a session
            self.ex = None
        if self.ex is None and (cfg.executor == "ray" or (
                cfg.executor == "auto" and (cfg.ray_address or ray_is_up()))):
            self.ex = RayExecutor(*runtime, log_path=self.log_path)
        if self.ex is not None:
            self.ex.start()  # Ray starts while the inputs are measured and checked
        # a run that may go in-process counts this machine's GPUs (Ray counts its own)
        local = local_node(cfg.num_cpus, cfg.object_store_mb,
                           local_gpus(cfg.devices) if self.ex is None else 0)
        local_plan = plan_nodes([local], cfg)[0]
        device = local_plan.device
        measure_here = True
        if self.ex is not None and (cfg.ray_address or ray_is_up()):
            # a cluster already up: when its actors use another device (its GPUs), the stages
            # are measured there, in a task (below), not on this machine's device
            self.ex.ready()
            measure_here = plan_nodes(self.ex.nodes(), cfg)[0].device == device
        t0 = time.time()
        probe_weight = probe_store = estimate_s = None
        if previous is not None:
            measured = previous.get("measured", {})
        else:  # also gives deadlines their expected costs
            sample = [inp.row_keys[0], inp.col_keys[-1]]
            if inp.weights is not None:
                sample, probe_weight = weighted_probe(inp.weights, inp.row_keys, inp.col_keys)
        probed: dict = {}  # the sample's parsed items: an in-process run loads them
        # No Ray to wait for: the inputs are checked on a thread while the probe measures
        # (reading and checking is I/O and numpy; the probe's kernels release the GIL)
        beside = check_beside(app, inp.keys) \
            if cfg.preflight and previous is None and self.ex is None else None
        if previous is None and measure_here:
            try:
                measured = {**measure_stages(
                    app, sample, device, store=store,
                    preprocess_on=device if local_plan.preprocess_on_host else None,
                    keep=probed, pairs=inp.space.total), "device": device}
                probe_store = measured.pop("store", None)
            except Exception:  # a bad input: name every problem, not the probe's stumble
                if cfg.preflight:
                    problems = beside.result() if beside is not None else \
                        check_items(app, inp.keys)
                    if problems:
                        raise problems_error(problems) from None
                raise
        self.phases["measure_s"] = time.time() - t0
        if self.ex is None:
            estimate_s = estimate_work_s(
                measured, inp.space.total, inp.items.n_items, local["cpus"],
                inp.weights.total(inp.space) if inp.weights is not None else None,
                probe_weight if probe_weight is not None else measured.get("probe_weight"))
            kind = choose(cfg.executor, cfg.ray_address, estimate_s, cfg.inprocess_max_s,
                          ray_is_up())
            self.ex = make_executor(kind, *runtime, log_path=self.log_path,
                                    gpus=local["gpus"])
            self.ex.start()
        ex = self.ex
        if ex.name == "inprocess":
            ex.hand_over(probed)
        t0 = time.time()
        if cfg.preflight and previous is None:  # a resumed run's inputs match its digests
            if beside is not None:
                problems = beside.result()
            elif ex.name == "inprocess":  # on the loader threads: nothing to overlap here
                chunks = [list(c) for c in np.array_split(np.array(inp.keys, dtype=object),
                                                          min(len(inp.keys), local["cpus"]))]
                problems = [p for ps in ex.get([ex.check_items(app, c) for c in chunks])
                            for p in ps]
            else:  # in this thread, while Ray starts in another
                problems = check_items(app, inp.keys)
            if problems:
                raise problems_error(problems)
        self.phases["preflight_s"] = time.time() - t0
        fingerprint = {**app.fingerprint(), "space": inp.space.describe()}
        if previous is not None:
            check_same_work(self.run_path, previous.get("fingerprint", {}), fingerprint)
        t0 = time.time()
        ex.ready()
        self.phases["ray_wait_s"] = time.time() - t0  # Ray's start not hidden by the above
        self.phases["ray_init_s"] = ex.take_init_s() if ex.name == "ray" else 0.0
        nodes = ex.nodes()
        node_plan = plan_nodes(nodes, cfg)
        app_ref = ex.put(app)
        shipment = self._ship_inputs(nodes) if ex.name == "ray" else None
        shipment_ref = ex.put(shipment) if shipment is not None else None
        # every loader process runs app.warmup before its first load (awaited at launch)
        warm_refs = [ex.check_items(app_ref, [], shipment_ref)
                     for _ in range(sum(n.actors for n in node_plan))] \
            if ex.name == "ray" else []
        if previous is None and node_plan[0].device != device:  # measured where it runs
            t0 = time.time()
            measured = {**ex.get(ex.measure(app_ref, sample, node_plan[0].device,
                                            shipment_ref, pairs=inp.space.total)),
                        "device": node_plan[0].device}
            self.phases["measure_s"] += time.time() - t0
        if previous is None:  # what a tile costs beyond its compares, on this executor
            measured = {**measured, **tile_overhead(ex.name, measure_tile_io(self.run_path))}
        return Checked(ex, store, measured, probe_store, estimate_s, nodes, app_ref, shipment,
                       warm_refs, fingerprint, probe_weight, self.phases)

    def _ship_inputs(self, nodes: list[dict]) -> Shipment | None:
        """Nothing shared (``shares_files``): the driver's local inputs go out through the
        object store once, and results come back (``pairs/sinks/shipped.py``). Returns the shipment,
        or None when the workers read the inputs themselves."""
        ship = not shares_files(nodes, self.cfg.shared_fs)
        urls = input_urls(self.app, self.inputs.keys)
        check_reachable(urls)
        if not ship:
            return None
        check_sinks(self.sinks)
        t0 = time.time()
        shipment = Shipment.of(urls)
        self.phases["ship_inputs_s"] = time.time() - t0
        return shipment


TILE_IO_REPS = 16   # appends timed: a median of a few, each a few microseconds locally
TILE_RECORD_BYTES = 4096  # a small tile's record (its fixed cost, not its bytes, is measured)


def measure_tile_io(where: str, reps: int = TILE_IO_REPS) -> float:
    """Seconds a tile's journal line and sink record take to reach the OS on the run's
    filesystem (each a write and a flush, as ``JournalWriter`` and ``tile_log.LogWriter`` do
    per tile): the median of ``reps``, in a temporary file of ``where``; 0 where it cannot
    write there. Part of a tile's fixed cost (``tile_cost.tile_overhead``): on a network
    filesystem it may cost more than the hand-out."""
    import json
    import os
    import tempfile
    line = (json.dumps({"tile": 0, "location": "probe", "length": TILE_RECORD_BYTES,
                        "crc32": 0}) + "\n").encode()
    blob = bytes(TILE_RECORD_BYTES)
    try:
        fd, path = tempfile.mkstemp(prefix=".tile-io-", dir=where)
    except OSError:
        return 0.0
    took = []
    try:
        with os.fdopen(fd, "wb", buffering=0) as fh:
            for _ in range(max(1, reps)):
                t0 = time.perf_counter()
                fh.write(blob)
                fh.write(line)
                took.append(time.perf_counter() - t0)
    finally:
        os.remove(path)
    return float(np.median(took))


def check_beside(app, keys: list[str]):
    """``check_items`` on a thread of its own: a future of the problems found."""
    import concurrent.futures as cf
    pool = cf.ThreadPoolExecutor(1, thread_name_prefix="pairflow-check")
    future = pool.submit(check_items, app, keys, None, False)
    pool.shutdown(wait=False)
    return future
