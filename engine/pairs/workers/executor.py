"""Where a run's workers run: Ray processes (local or a cluster), or threads of this process.

The driver (driver.py) talks to its workers through one of two executors with the same small
surface: start the runtime, list the nodes, put/get/wait on references, run the pre-flight and
probe functions, start the coordinator, node caches and device actors, kill one. Both run the
same worker classes (``device_worker.DeviceWorker``, ``coordinator.CoordinatorCore``, the same
``node_cache.NodeCache`` with its policy), so tiers, sinks, journal and scheduling are one code.

``InProcessExecutor``: no Ray at all. The coordinator is a thread running one event loop (as the
Ray actor runs one), each device actor a thread with its own loop, and the node cache's load
tasks run on a pool of threads. A reference is a ``concurrent.futures.Future`` that an event loop
can ``await``. For small runs: starting Ray costs seconds, where a run of a few items computes in
a fraction of one. Threads share one interpreter, so a kernel that holds the GIL runs on one
core, and a stuck tile cannot be taken away from its thread (the run fails naming it instead).

``RayExecutor``: today's Ray path; Ray is started in a background thread, so reading and
checking the inputs overlaps its start-up (``start`` returns at once, ``ready`` waits). The
coordinator and device actors of a run that finished cleanly go to the process's warm pool
(warm.py) and serve the next run on the same Ray.

``choose`` is the policy (``engine.run.executor_choice``, the one rule farms and pipelines
follow too): ``executor="inprocess"`` or ``"ray"`` forces one; ``"auto"`` runs in-process when
no cluster is named, no Ray is up in this process, and the probe's estimate of the work per CPU
is at most ``inprocess_max_s``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import os
import pickle
import threading
import time
from ...errors import PairflowError
# the rule and its inputs live below every engine: farms and pipelines follow it too
from ...run.executor_choice import EXECUTORS, choose, ray_is_up  # noqa: F401
from .warm import WARM

def estimate_work_s(measured: dict, pairs: int, n_items: int, cpus: int,
                    weights_total: float | None = None,
                    probe_weight: float | None = None) -> float:
    """Seconds of work per CPU the probe predicts: parse every item, compare every pair (for
    weighted apps, the total weight at the probe's rate: its pair weight per ``t_pair``).

    Both are CPU seconds of the probe's thread where it measured them (``t_pair`` is;
    ``t_parse_cpu``, else the parse's wall ``t_parse``): on a machine other processes load,
    a parse's wall time counts their share of the cores too, and that work would not shrink
    on Ray (measured: a load of 30 on 2 cores took the 16 genomes' estimate from 4 s to 47 s,
    past ``INPROCESS_MAX_S``, and the run spent 2 minutes starting Ray for 7 s of compute)."""
    if weights_total is not None and probe_weight:
        compare = weights_total * measured.get("t_pair", 0.0) / probe_weight
    else:
        compare = pairs * measured.get("t_pair", 0.0)
    parse = measured.get("t_parse_cpu", measured.get("t_parse", 0.0))
    return (compare + n_items * parse) / max(1, cpus)


def local_gpus(devices: str) -> int:
    """CUDA devices an in-process run may give device actors: counted only when ``devices``
    names cuda (torch is imported for that alone, so a CPU run never imports it), as Ray
    counts a node's GPUs; 0 without torch or a GPU (then the actors run on the CPU, as on Ray)."""
    if "cuda" not in str(devices):
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def local_node(num_cpus: int | None, object_store_mb: int | None, gpus: int = 0) -> dict:
    """This machine as a node description (the shape ``runtime.alive_nodes`` returns)."""
    from ...run.runtime import DEFAULT_OBJECT_STORE_MB
    return {"node_id": "local", "address": "127.0.0.1", "head": True,
            "cpus": int(num_cpus or os.cpu_count() or 1), "gpus": int(gpus),
            "object_store": int((object_store_mb or DEFAULT_OBJECT_STORE_MB) * 2**20)}


# -- in-process ----------------------------------------------------------------------------

class LocalRef:
    """A result under way in this process: ``await`` it in any event loop, or ``get`` it."""

    __slots__ = ("future",)

    def __init__(self, future: cf.Future):
        self.future = future

    def __await__(self):
        return asyncio.wrap_future(self.future).__await__()

    def result(self, timeout: float | None = None):
        return self.future.result(timeout)


def _done(value) -> LocalRef:
    fut: cf.Future = cf.Future()
    fut.set_result(value)
    return LocalRef(fut)


class _Method:
    __slots__ = ("actor", "name")

    def __init__(self, actor: "LocalActor", name: str):
        self.actor, self.name = actor, name

    def remote(self, *args) -> LocalRef:
        return self.actor.call(self.name, args)


class LocalActor:
    """An object on a thread of its own running one event loop: every method call runs on
    that loop (coroutines interleave at their awaits, as in a Ray async actor), and
    ``handle.method.remote(...)`` returns a ``LocalRef``, so the clients of clients.py work
    unchanged."""

    def __init__(self, name: str, make, *args):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name=f"pairflow-{name}", daemon=True)
        self.thread.start()
        # constructed on its own loop: what it creates (futures, semaphores) belongs there
        self.obj = self._submit(self._construct(make, args)).result()

    @staticmethod
    async def _construct(make, args):
        return make(*args)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        self.loop.close()

    def _submit(self, coro) -> cf.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, name: str, args: tuple) -> LocalRef:
        fn = getattr(self.obj, name)

        async def run():
            out = fn(*args)
            return await out if asyncio.iscoroutine(out) else out
        return LocalRef(self._submit(run()))

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self, name)

    @staticmethod
    async def _cancel_tasks(timeout_s: float) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    def stop(self) -> None:
        """Cancel what still runs on the loop (a stopped run's other tiles, heartbeats), let
        it unwind, then stop the loop: a loop stopped under pending tasks printed "Task was
        destroyed but it is pending!" for each, after a failed run's error."""
        if self.loop.is_running():
            if self.thread is not threading.current_thread():
                try:
                    self._submit(self._cancel_tasks(2.0)).result(timeout=5)
                except Exception:
                    pass  # a task that does not unwind: the loop stops under it
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=5)


class _LoadThreads:
    """The node cache's loader in-process: ``load_items`` on a pool of the node's CPUs, every
    item kept by value (there is no object store to hand out references from)."""

    def __init__(self, spec, pool: cf.ThreadPoolExecutor, parsed: dict | None = None):
        self.spec, self.pool = spec, pool
        self.parsed = parsed if parsed is not None else {}  # the probe's items (hand_over)

    def __call__(self, batch: list[int]) -> tuple[list, LocalRef]:
        from ..cache.loading import load_items
        keys = [self.spec.item_keys[i] for i in batch]
        ref = LocalRef(self.pool.submit(load_items, self.spec.app, keys, self.spec.preprocess_on,
                                        self.spec.inline_bytes, True, None,
                                        store=getattr(self.spec, "store", None),
                                        parsed=self.parsed))
        return _item_refs(ref, len(batch)), ref


def _item_refs(batch: LocalRef, n: int) -> list[LocalRef]:
    """One handle per item of an in-process load, resolving to the item itself (the load
    returns every item inside its info): a handle that reaches a device actor before its
    entry became a value gives the item, never the load's list of infos (seen once by the
    differential harness as a compare of dicts, on a loaded machine). A failed load's error
    travels in every item."""
    futures = [cf.Future() for _ in range(n)]

    def settle(done: cf.Future) -> None:
        try:
            infos = done.result()
        except BaseException as exc:
            for f in futures:
                f.set_exception(exc)
            return
        for f, info in zip(futures, infos):
            f.set_result(info["value"])

    batch.future.add_done_callback(settle)
    return [LocalRef(f) for f in futures]


class InProcessExecutor:
    """Workers as threads of this process; nothing imports Ray (module docstring)."""

    name = "inprocess"
    can_kill = False          # a thread cannot be stopped from outside
    lost_errors: tuple = ()   # no process can die under a thread

    def __init__(self, num_cpus: int | None = None, object_store_mb: int | None = None,
                 gpus: int = 0):
        self.node = local_node(num_cpus, object_store_mb, gpus)
        self.pool = cf.ThreadPoolExecutor(max(1, self.node["cpus"]),
                                          thread_name_prefix="pairflow-load")
        self.actors: list[LocalActor] = []
        self.started = False
        # items the driver's probe parsed in this process (key -> (item, info)): the first
        # load of each takes it instead of parsing again (``hand_over``)
        self.parsed: dict = {}

    def hand_over(self, parsed: dict) -> None:
        """The probe's parsed items, for the node cache's loads (same process, same objects)."""
        self.parsed.update(parsed)

    def start(self) -> None:
        pass

    def ready(self) -> None:
        pass

    def nodes(self) -> list[dict]:
        return [dict(self.node)]

    def put(self, obj):
        return obj

    def get(self, refs, timeout: float | None = None):
        if isinstance(refs, list):
            return [self.get(r, timeout) for r in refs]
        return refs.result(timeout) if isinstance(refs, LocalRef) else refs

    def wait(self, refs: list, timeout: float | None = None) -> list:
        done, _ = cf.wait([r.future for r in refs], timeout, return_when=cf.FIRST_COMPLETED)
        return [r for r in refs if r.future in done]

    def check_items(self, app, keys: list[str]) -> LocalRef:
        from ..cache.loading import check_items
        return LocalRef(self.pool.submit(check_items, app, keys))

    def measure(self, app, sample: list[str], device: str, shipment=None,
                pairs: int = 0) -> LocalRef:
        from ..cache.loading import measure_stages
        return _done(measure_stages(app, sample, device, pairs=pairs))

    def coordinator(self, node: dict, scheduler_kw: dict, metrics_kw: dict, cache_spec):
        from .coordinator import CoordinatorCore
        actor = LocalActor("coordinator", CoordinatorCore, scheduler_kw, metrics_kw,
                           cache_spec, lambda spec: _LoadThreads(spec, self.pool, self.parsed))
        self.actors.append(actor)
        return actor

    def node_cache(self, node: dict, spec, scheduler, metrics):
        raise PairflowError("an in-process run has one node")

    def device(self, node: dict, spec, app):
        from .device_worker import DeviceWorker
        # each device actor gets its own copy of the sinks, as a Ray actor unpickles one
        spec.sinks = pickle.loads(pickle.dumps(spec.sinks))
        before = os.environ.get("PAIRFLOW_ACTOR_ID")
        actor = LocalActor(spec.actor_id, DeviceWorker, spec, app)
        if before is None:  # the worker names itself in the environment, a process-wide one
            os.environ.pop("PAIRFLOW_ACTOR_ID", None)
        else:
            os.environ["PAIRFLOW_ACTOR_ID"] = before
        self.actors.append(actor)
        return actor

    def kill(self, handle) -> None:
        handle.stop()

    def shutdown(self) -> None:
        for actor in self.actors:
            actor.stop()
        self.actors = []
        self.pool.shutdown(wait=False, cancel_futures=True)


# -- Ray -----------------------------------------------------------------------------------

class RayExecutor:
    """Workers as Ray actors and tasks; Ray started (or joined) in a background thread."""

    name = "ray"
    can_kill = True
    REBIND_S = 60.0  # a warm actor that does not answer its rebind in this long is replaced

    def __init__(self, ray_address: str | None = None, num_cpus: int | None = None,
                 object_store_mb: int | None = None, log_path: str | None = None):
        self.args = (ray_address, num_cpus, object_store_mb)
        self.log_path = log_path  # Ray's own messages go to the run's log (runtime.py)
        self.started = False
        self.init_s = 0.0
        self.started_as: dict[int, tuple] = {}  # id(handle) -> (kind, node id, resources)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start (or join) Ray in a background thread; ``ready`` waits for it."""
        if self._thread is not None:
            return
        if ray_is_up():
            self._ready.set()
            return
        self._thread = threading.Thread(target=self._init, name="pairflow-ray-init",
                                        daemon=True)
        self._thread.start()

    def _init(self) -> None:
        t0 = time.time()
        try:
            from ...run.runtime import init_ray
            self.started = init_ray(*self.args, log_path=self.log_path)
        except BaseException as exc:
            self._error = exc
        self.init_s = time.time() - t0
        self._ready.set()
        # Ray's own processes die with the thread that started them (PR_SET_PDEATHSIG): this
        # thread stays, idle, for the life of the process
        if self.started:
            threading.Event().wait()

    def take_init_s(self) -> float:
        """Ray's start-up, for the first run that waited for it (0 for later ones)."""
        init_s, self.init_s = self.init_s, 0.0
        return init_s

    def ready(self) -> None:
        self.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        import ray
        from ray.exceptions import RayActorError
        from . import actors
        self.ray, self.actors_mod = ray, actors
        self.lost_errors = (RayActorError,)

    def nodes(self) -> list[dict]:
        from ...run.runtime import alive_nodes
        return alive_nodes()

    def put(self, obj):
        return self.ray.put(obj)

    def get(self, refs, timeout: float | None = None):
        return self.ray.get(refs, timeout=timeout)

    def wait(self, refs: list, timeout: float | None = None) -> list:
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
        return ready

    def check_items(self, app_ref, keys: list[str], shipment=None):
        return self.actors_mod.check_items_task.remote(app_ref, keys, shipment)

    def measure(self, app_ref, sample: list[str], device: str, shipment=None,
                pairs: int = 0):
        # measured on the device the actors will use: a GPU task asks for its GPU
        return self.actors_mod.measure_task.options(
            **self.actors_mod.device_options(device)).remote(app_ref, sample, device, True,
                                                             shipment, pairs=pairs)

    @staticmethod
    def _on(node: dict) -> dict:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node["node_id"],
                                                                      soft=False)}

    def coordinator(self, node: dict, scheduler_kw: dict, metrics_kw: dict, cache_spec):
        from .coordinator import Coordinator
        handle = self._warm("coordinator", node, {}, scheduler_kw, metrics_kw, cache_spec)
        return handle or self._started("coordinator", node, {}, Coordinator.options(
            **self._on(node)).remote(scheduler_kw, metrics_kw, cache_spec))

    def node_cache(self, node: dict, spec, scheduler, metrics):
        handle = self._warm("cache", node, {}, spec, scheduler, metrics)
        return handle or self._started("cache", node, {}, self.actors_mod.NodeCacheActor
                                       .options(**self._on(node)).remote(spec, scheduler,
                                                                          metrics))

    def frontier(self, node: dict, spec):
        handle = self._warm("frontier", node, {}, spec)
        return handle or self._started("frontier", node, {}, self.actors_mod.FrontierActor
                                       .options(**self._on(node)).remote(spec))

    def device(self, node: dict, spec, app_ref):
        # a GPU actor asks Ray for its GPU: each gets a device of its own
        resources = self.actors_mod.device_options(spec.device)
        handle = self._warm("device", node, resources, spec, app_ref)
        return handle or self._started("device", node, resources, self.actors_mod.DeviceActor
                                       .options(**self._on(node), **resources).remote(spec,
                                                                                      app_ref))

    # -- warm actors (warm.py) --------------------------------------------------------------
    def _owner(self) -> tuple:
        context = self.ray.get_runtime_context()
        return context.get_job_id(), context.get_node_id()

    def _started(self, kind: str, node: dict, resources: dict, handle):
        self.started_as[id(handle)] = (kind, node["node_id"], resources)
        return handle

    def _warm(self, kind: str, node: dict, resources: dict, *run_args):
        """An idle actor of an earlier run, rebound to this one; None when there is none that
        answers (one killed since is stopped for good and forgotten)."""
        owner = self._owner()
        while (handle := WARM.take(owner, kind, node["node_id"], resources)) is not None:
            try:
                self.ray.get(handle.rebind.remote(*run_args), timeout=self.REBIND_S)
                return self._started(kind, node, resources, handle)
            except Exception:
                self.kill(handle)
        return None

    def keep(self, handles: list, wait_s: float = 0.0) -> list:
        """Hand a cleanly finished run's actors (coordinator, node caches, frontiers, device
        actors) to the warm pool, each told to let go of the run (``retire``); returns those it
        does not take, to be stopped. ``wait_s``: up to so long for the retires to be done
        (their memory given back: the driver's finalize comes next)."""
        owner, rest, retiring = self._owner(), [], []
        alive = {n["node_id"] for n in self.nodes()}  # a lost node's actors went with it
        for handle in handles:
            started = self.started_as.pop(id(handle), None) if handle is not None else None
            if started is None or started[1] not in alive or \
                    not WARM.give(owner, *started, handle):
                rest.append(handle)
                continue
            retiring.append(handle.retire.remote())
        if wait_s > 0 and retiring:
            try:
                self.ray.wait(retiring, num_returns=len(retiring), timeout=wait_s)
            except Exception:
                pass  # one that died meanwhile: a later rebind finds it gone (_warm)
        return rest

    def kill(self, handle, no_restart: bool = True) -> None:
        self.started_as.pop(id(handle), None)
        try:
            self.ray.kill(handle, no_restart=no_restart)
        except Exception:
            pass  # gone already

    def shutdown(self) -> None:
        pass  # Ray stays up for the process (or the session) that started it


def make_executor(kind: str, ray_address: str | None, num_cpus: int | None,
                  object_store_mb: int | None, log_path: str | None = None, gpus: int = 0):
    """``gpus``: an in-process run's CUDA devices (``local_gpus``); Ray counts its own."""
    if kind == "inprocess":
        return InProcessExecutor(num_cpus, object_store_mb, gpus)
    return RayExecutor(ray_address, num_cpus, object_store_mb, log_path)
