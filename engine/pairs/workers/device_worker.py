"""A device actor's worker: one device (a GPU, or a CPU slot) of the all-pairs engine.

``DeviceWorker`` pulls tiles from the scheduler, keeps ``in_flight`` of them under way so the
next tile's items load while this one computes, holds preprocessed items in its L1
(``TileCache``), runs compare/postprocess/write off the event loop, and reports each finished
tile to the scheduler's journal. It is a plain class: ``actors.py`` wraps it for Ray
(``DeviceActor``), the in-process executor runs it on threads.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

import numpy as np

from ...errors import (InputError, PairflowError, WorkerError, mark_failure, root_cause,
                       worker_traceback)
from ...run.metrics import EventBuffer
from ...run.runtime import give_back_freed_memory, in_background, long_time_slices
from .clients import MetricsClient, NodeCacheClient, SchedulerClient
from ..items import ItemMap
from ..cache.loading import BatchPart, resolve, warm_process
from ..cache.eviction import AdvisedEviction, make_eviction
from ..plan.scheduler import describe_tile
from ..space import PairSpace, Tile, TileArray, block_mask
from ..cache.tiers import BudgetCache, TileCache
from ..cache.directory import is_peer_lost


@dataclass
class DeviceSpec:
    """One device actor: its place, the run's shape and the clients it calls."""

    actor_id: str                # "node-<index>/dev-<d>"
    node: str
    space: PairSpace
    row_items: np.ndarray
    col_items: np.ndarray
    item_keys: list[str]
    tiles: list  # space.TileArray (or tile dicts)
    sinks: list
    node_cache: NodeCacheClient
    scheduler: SchedulerClient
    metrics: MetricsClient
    device: str
    in_flight: int
    l1_bytes: int | None
    l1_items: int | None
    eviction: str
    preprocessed_on_host: bool = False
    ship_results: bool = False   # the run directory is out of reach: encode, the driver writes
    heartbeat_s: float = 1.0     # how often run() tells the scheduler it is alive
    row_offsets: np.ndarray | None = None  # packed items: each row's place in its pack
    col_offsets: np.ndarray | None = None


@dataclass
class _Reduced:
    """A tile's result as an app's ``compare_reduced`` gave it: one ``TileCandidates`` per
    sink, in the sinks' order."""

    found: list


def _reductions(sinks: list, app) -> list | None:
    """Every sink's reduction, when each has one and the app may take them (it has
    ``compare_reduced``); else ``None``: tiles go through ``compare`` and ``postprocess``."""
    if not sinks or not callable(getattr(app, "compare_reduced", None)):
        return None
    found = [sink.reduction() for sink in sinks]
    return None if any(r is None for r in found) else found


class DeviceWorker:
    ADVICE_ITEMS = 256  # next-use advice per tile for at most this many L1 items
    def __init__(self, spec: DeviceSpec, app):
        """``app`` is a top-level argument, not a field of ``spec``: Ray resolves an ObjectRef
        passed so before the call (one copy in the object store), where a nested one would need
        a blocking ``ray.get`` inside this async actor."""
        self.id, self.node = spec.actor_id, spec.node
        self.app, self.space = app, spec.space
        self.items = ItemMap(spec.row_items, spec.col_items, spec.row_offsets, spec.col_offsets)
        self.row_items, self.col_items = self.items.row_items, self.items.col_items
        self.item_keys = spec.item_keys
        self.node_cache, self.scheduler = spec.node_cache, spec.scheduler
        self.sinks = spec.sinks
        self.in_flight = max(1, spec.in_flight)
        self.device = spec.device
        self.tiles = TileArray.of(spec.tiles)  # columns of ints, not an object per tile
        self.tile_items_max = int(((self.tiles.r1 - self.tiles.r0) +
                                   (self.tiles.c1 - self.tiles.c0)).max()) \
            if len(self.tiles) else 1
        # advice comes for the L1's least recently used items only: the others are kept
        self.evictor = make_eviction(spec.eviction, unknown=-1.0)
        self.l1 = TileCache(BudgetCache(spec.l1_bytes, spec.l1_items, self.evictor), self._load,
                            app.item_nbytes)
        self.events = EventBuffer(spec.metrics)
        # one compare at a time per actor (an actor is one device, a CPU actor one core):
        # in_flight is prefetch depth, not compute threads. Two compute threads in one process
        # fight over the GIL at every kernel call (parasail: per pair) and lose time.
        self.compute_slot = asyncio.Semaphore(1)
        # tiles of this actor waiting for or in compute (not those only being written): what
        # the scheduler's endgame asks of it (``busy``), and the event a compute's end sets
        self.computing: set[int] = set()
        self.asking = 0  # calls to the scheduler under way that may hand out a tile (_ask)
        self.computed = asyncio.Event()
        self.tiles_done = 0
        self._l1_told: set = set()  # what the scheduler was last told this L1 holds
        self.preprocessed_on_host = spec.preprocessed_on_host
        self.ship_results = spec.ship_results
        self.heartbeat_s = spec.heartbeat_s
        self.reductions = _reductions(self.sinks, app)
        self._attached = None  # waits for the sinks' attach (ready)
        # the load batch objects its items came from, referenced to the end of the run: an L1
        # that let go of such an object and borrowed it again, hundreds of times a run, once
        # waited forever for it after another actor was killed (docs/architecture.md, L1).
        # Batch objects only: their host tier holds every item, so this keeps nothing alive
        self._batches: set = set()
        os.environ["PAIRFLOW_ACTOR_ID"] = self.id  # apps may log or test by it

    def rebind(self, spec: DeviceSpec, app) -> None:
        """Become a fresh worker of another run (a session reuses its warm actor processes:
        imports, kernels and the app's warm-up survive; every run-held object is replaced)."""
        self.__init__(spec, app)

    def retire(self) -> None:
        """Idle in the warm pool until ``rebind`` (warm.py): let go of the run (its L1, app,
        tiles, keys, sinks and the blocks' masks: at 10^6 reads 1.3-1.8 GB an actor) and give
        the memory back, before the driver's finalize (driver._release)."""
        self.l1 = self.app = self.items = self.row_items = self.col_items = None
        self.item_keys = self.tiles = self.sinks = self.reductions = None
        self._batches = set()
        block_mask.cache_clear()  # a diagonal block's mask: rows x cols bytes
        give_back_freed_memory()

    def ready(self) -> int:
        """Construction done (the app unpickled, its kernels imported); returns the PID.

        The sinks attach on a thread beside the first tile's compute, waited for before its
        write: in a fresh process that loads their compiled passes (a TopK's from numba's
        cache, with the imports numba pulls: ~0.5 CPU s), which held every tile back."""
        warm_process(self.app, self.device)
        if not self.ship_results and self.sinks:  # attaching opens the output
            sinks = list(self.sinks)
            self._attached = in_background(lambda: [s.attach() for s in sinks],
                                           "pairflow-attach")
        return os.getpid()

    async def _load(self, items: list[int]) -> dict:
        got = await self.node_cache.get(items)
        refs = {i: got[i][1] for i in items if got[i][0] == "ref"}
        for handle in refs.values():
            if isinstance(handle, BatchPart):
                self._batches.add(handle.ref)
        hosts = {i: got[i][1] for i in items if got[i][0] == "value"}
        if refs:
            hosts.update(await resolve(refs))
        if self.preprocessed_on_host:  # the node cache holds device-ready items already
            return hosts
        return await asyncio.to_thread(self._preprocess, items, hosts)

    def _preprocess(self, items: list[int], hosts: dict) -> dict:
        """Every item of a load in one hop off the event loop (one per item cost more than a
        small item's preprocess)."""
        out = {}
        t0 = time.time()
        for item in items:
            try:
                out[item] = self.app.preprocess(self.item_keys[item], hosts[item], self.device)
            except Exception as exc:
                mark_failure(exc, f"preprocess of {str(self.item_keys[item])!r}")
                raise
        if items:  # one span for the load (a span per item cost more than a small item)
            keys = [self.item_keys[items[0]], self.item_keys[items[-1]]]
            what = keys[0] if len(items) == 1 else f"{len(items)} items ({keys[0]} .. {keys[1]})"
            self.events.span(self.id, "preprocess", what, t0, time.time())
        return out

    def _describe(self, tile: Tile) -> str:
        def side(items, offsets):
            if offsets is None:
                return [self.item_keys[i] for i in items]
            return [self.item_keys[i].members[o] for i, o in zip(items, offsets)]
        return describe_tile(tile, side(self.row_items, self.items.row_offsets),
                             side(self.col_items, self.items.col_offsets))

    def _compute(self, tile: Tile, values: dict, reduce: bool = False):
        """compare -> postprocess, off the event loop (kernels release the GIL); with
        ``reduce``, when every sink offers a reduction and the app takes them, the app's
        ``compare_reduced`` instead: then the fields are one ``TileCandidates`` per sink."""
        long_time_slices()  # this pool thread computes: fewer switches on a shared core
        left = self.items.rows(values, "row", tile.r0, tile.r1)
        right = self.items.rows(values, "col", tile.c0, tile.c1)
        mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        t0, c0 = time.time(), time.thread_time()
        stage = "compare"
        try:
            if reduce and self.reductions is not None:
                found = self.app.compare_reduced(
                    left, right, mask, self.device,
                    [s.tile_reduction(tile, r) for s, r in zip(self.sinks, self.reductions)])
                if found is not None:
                    t1, c1 = time.time(), time.thread_time()
                    self.events.span(self.id, "compare", f"tile {tile.id}", t0, t1,
                                     cpu=c1 - c0)
                    return _Reduced(found), mask
            block = self.app.compare(left, right, mask, self.device)
            t1, c1 = time.time(), time.thread_time()
            stage = "postprocess"
            fields = self.app.postprocess(block, tile, mask)
        except Exception as exc:
            raise PairflowError(f"{self._describe(tile)}: {stage} failed: "
                                f"{type(exc).__name__}: {exc}") from exc
        t2 = time.time()
        what = f"tile {tile.id}"
        self.events.span(self.id, "compare", what, t0, t1, cpu=c1 - c0)
        self.events.span(self.id, "postprocess", what, t1, t2)
        return fields, mask

    def _write(self, tile: Tile, fields: dict, mask):
        t2 = time.time()
        entries = []
        for n, sink in enumerate(self.sinks):
            try:
                if self._attached is not None:  # the sinks attached (ready) before any write
                    self._attached()
                if isinstance(fields, _Reduced):
                    found = fields.found[n]
                    if self.ship_results:
                        entries.append((sink.name, sink.encode_reduced(tile, found)))
                    else:
                        entries.extend(sink.write_reduced(tile, found))
                elif self.ship_results:  # (sink, payload): the driver stores it and journals
                    entries.append((sink.name, sink.encode_tile(tile, fields, mask)))
                else:
                    entries.extend(sink.write_tile(tile, fields, mask))
            except Exception as exc:
                raise PairflowError(f"{self._describe(tile)}: write to the {sink.name} sink "
                                    f"failed: {type(exc).__name__}: {exc}") from exc
        self.events.span(self.id, "write", f"tile {tile.id}", t2, time.time())
        return entries

    def _tile_items(self, tile: Tile) -> list:
        return np.unique(np.concatenate([self.row_items[tile.r0:tile.r1],
                                         self.col_items[tile.c0:tile.c1]])).tolist()

    async def recompute(self, t: int) -> dict:
        """The fields of tile ``t`` computed here, written nowhere (result validation)."""
        tile = self.tiles[t]
        items = self._tile_items(tile)
        values = await self.l1.acquire(items)
        try:
            fields, _ = await asyncio.to_thread(self._compute, tile, values)
        finally:
            self.l1.release(items)
        return {k: np.asarray(v) for k, v in fields.items()}

    async def _ask(self, call, *args) -> dict:
        """A call to the scheduler that may hand out a tile (``request``, or a completion's
        ``complete_and_request``), saying how busy this device is: its tiles waiting for or in
        compute, and its other such calls under way, each of which may bring one. A tile
        handed out counts as computing from the reply on, before its task first runs.
        Otherwise, in the endgame, the run loop's request (sent when a compute ends) and that
        tile's completion (sent when its write ends) both said "free" and both got one of the
        last tiles, while another actor idled to the end of the run."""
        busy = len(self.computing) + self.asking
        self.asking += 1
        try:
            reply = await call(*args, busy=busy)
        finally:
            self.asking -= 1
        if "tile" in reply:
            self.computing.add(reply["tile"])
        return reply

    async def _process(self, t: int, advice: dict, keep: bool = False) -> dict:
        """Compute and write tile ``t``; returns the scheduler's next hand-out for this slot."""
        tile = self.tiles[t]
        items = self._tile_items(tile)
        if isinstance(self.evictor, AdvisedEviction) and advice:
            self.evictor.advice = {int(k): v for k, v in advice.items()}
        t_start = time.time()
        self.events.add({"kind": "tile_start", "id": t, "actor": self.id, "t": t_start})
        try:
            values = await self.l1.acquire(items)
            try:
                async with self.compute_slot:  # a kept tile's fields are validated: not reduced
                    fields, mask = await asyncio.to_thread(self._compute, tile, values,
                                                           not keep)
            finally:
                self.l1.release(items)
        finally:
            self.computing.discard(t)
            self.computed.set()
        entries = await asyncio.to_thread(self._write, tile, fields, mask)
        kept = {k: np.asarray(v) for k, v in fields.items()} if keep else None
        self.tiles_done += 1
        self.events.add({"kind": "tile", "id": t, "actor": self.id, "t_start": t_start,
                         "t_end": time.time(), "pairs": tile.pairs})
        self._report_tier()
        return await self._ask(self.scheduler.complete_and_request,
                               self.id, t, entries, kept, self.node, *self._l1_news())

    def _l1_news(self) -> tuple[list, list, list]:
        """(entered, left) the L1 since the last report, and the items to get next-use
        advice for: none unless an insert may evict (room for two more tiles of misses), then
        the ``ADVICE_ITEMS`` least recently used unpinned ones, where victims come from."""
        now = set(self.l1.resident())
        added, removed = list(now - self._l1_told), list(self._l1_told - now)
        self._l1_told = now
        c = self.l1.cache
        room = 2 * self.tile_items_max * self.in_flight
        # 0.5: an L1 fills by whole tiles, so advice comes while half the bytes are free
        near = isinstance(self.evictor, AdvisedEviction) and c.near_budget(room, 0.5)
        return added, removed, c.oldest(self.ADVICE_ITEMS) if near else []

    def _report_tier(self) -> None:
        self.events.add({"kind": "tier", "source": self.id, "tier": "L1",
                         "stats": self.l1.stats.to_dict()})

    async def _beat(self) -> None:
        """Heartbeats from the event loop, which runs while compares run in their thread: only
        a stopped or wedged process falls silent (scheduler.silent)."""
        while True:
            self.scheduler.heartbeat(self.id)  # fire and forget
            await asyncio.sleep(self.heartbeat_s)

    async def run(self) -> dict:
        running: set = set()
        replies: list = []  # hand-outs that came back with a completion, not yet started
        finished = False
        done: set = set()
        beat = asyncio.ensure_future(self._beat())
        try:
            while True:
                told_wait = False
                while not finished and len(running) < self.in_flight:
                    reply = replies.pop(0) if replies else await self._ask(
                        self.scheduler.request, self.id, self.node, *self._l1_news())
                    if "tile" in reply:
                        running.add(asyncio.ensure_future(
                            self._process(reply["tile"], reply["next_use"],
                                          reply.get("keep", False))))
                    elif "wait" in reply:
                        if not running:
                            await asyncio.sleep(reply["wait"])
                        told_wait = True
                        break
                    else:
                        finished = True
                if not running:
                    if finished:
                        break
                    continue
                # Told to wait while a tile computes (the endgame holds the last tiles back
                # from busy devices): ask again when its compute ends, not after its write and
                # completion, so the device does not idle through them.
                computed = None
                if told_wait and self.computing:
                    self.computed.clear()
                    computed = asyncio.ensure_future(self.computed.wait())
                done, running = await asyncio.wait(
                    running | ({computed} if computed else set()),
                    return_when=asyncio.FIRST_COMPLETED)
                if computed is not None:
                    computed.cancel()
                    done.discard(computed)
                    running.discard(computed)
                for fut in done:
                    reply = fut.result()
                    if "tile" in reply:
                        replies.append(reply)  # already the scheduler's: must be run
                    elif "done" in reply:
                        finished = True
        except BaseException as exc:
            for fut in running | done:  # a tile that failed beside this one: seen, not logged
                if not fut.done():
                    fut.cancel()
                elif not fut.cancelled():
                    fut.exception()
            # the user's one line names the stage, the tile or item; the traceback of where it
            # happened (here, or in a load task) goes with the error for -v and run.log
            cause = root_cause(exc)
            if _lost_with_a_node(exc, cause):
                _die_lost()  # not the run's failure: the driver requeues and replaces (lost)
            stage = getattr(cause, "worker_stage", None)
            message = str(cause) if isinstance(cause, (InputError, PairflowError)) else \
                f"{stage + ' failed: ' if stage else ''}{type(cause).__name__}: {cause}"
            await self.scheduler.fail(self.id, message)
            self.events.flush()
            if isinstance(cause, InputError):
                raise cause
            raise WorkerError(f"device actor {self.id} failed: {message}",
                              worker_traceback(exc)) from None
        finally:
            beat.cancel()
        self._report_tier()
        ref = self.events.flush()
        if ref is not None:
            await ref
        return {"actor": self.id, "tiles": self.tiles_done, "l1": self.l1.stats.to_dict()}


def _lost_with_a_node(exc: BaseException, cause: BaseException) -> bool:
    """Did the run fail here because a Ray actor it called died (its own node cache, a peer's,
    the coordinator: a node removed mid-run), not because of the run's work? Such an error is a
    loss, like this actor's own death, never the run's failure (clean-clone CI: a node's device
    actor reported its node cache's death, with the node going, as the run's error)."""
    return is_peer_lost(exc) or is_peer_lost(cause)


def _die_lost() -> None:
    """End this actor's process, as a lost node's would: the driver sees a dead actor, requeues
    its tiles and replaces it where its node lives (``Membership._on_actor_lost``). Only in a
    Ray actor: an in-process worker is a thread of the user's process (and sees no Ray actor
    errors)."""
    import sys
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id():
        os._exit(1)
