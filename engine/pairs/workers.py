"""The actors that move items and compute tiles.

``load_items`` (a Ray task on the item's node): fetch the raw bytes through fsspec and parse them,
one item or a batch of small ones per task.

``NodeCache`` (one per node: inside the run's coordinator on the head node, its own actor,
``NodeCacheActor``, on the others): the L2 host tier. It submits the load tasks itself so that it
owns the parsed objects (an object dies with its owner; a device actor's death must not empty the
host tier), keeps small items as values and large ones as ObjectRefs under a byte/item budget,
and evicts by the scheduler's advice.
A second request for an item being loaded waits for that load: one load.

``DeviceActor`` (one per device: a GPU, or a CPU slot): pulls tiles from the scheduler, keeps
``in_flight`` of them under way so the next tile's items load while this one computes, holds
preprocessed items in its L1 (``TileCache``), runs compare/postprocess/write off the event loop,
and reports each finished tile to the scheduler's journal.
"""
from __future__ import annotations

import asyncio
import time
import traceback

import numpy as np
import ray

from .tiers import BudgetCache, TileCache
from ..errors import InputError, PairflowError, root_cause
from ..run.io import fetch
from ..run.metrics import EventBuffer
from .policy import INF, LRUEviction, NextUseEviction
from .space import Tile


def load_and_parse(app, key: str, preprocess_on: str | None = None):
    """Fetch and parse one item; with ``preprocess_on`` (a host-memory device such as "cpu")
    also preprocess it here, once per node, instead of once in every device actor's L1."""
    t0 = time.time()
    url = app.url(key)
    raw = fetch(url) if url else None
    t1 = time.time()
    item = app.parse(key, raw)
    t2 = time.time()
    info = {"raw_bytes": len(raw) if raw else 0, "load": (t0, t1), "parse": (t1, t2)}
    if preprocess_on is not None:
        item = app.preprocess(key, item, preprocess_on)
        info["preprocess"] = (t2, time.time())
    info["nbytes"] = int(app.item_nbytes(item))
    return item, info


@ray.remote(num_cpus=1)
def load_items(app, keys: list[str], preprocess_on: str | None = None, inline_bytes: int = 0,
               all_inline: bool = False):
    """One or more items in one task (``num_returns=len(keys) + 1``): one return per item, so
    each stays a separate object the node cache can evict alone, then the list of their infos.
    A Ray task costs a few ms of CPU; items that parse in less are loaded in batches.

    An item of at most ``inline_bytes`` travels in its info instead (``info["value"]``; its own
    return is ``None``): the node cache keeps small items as values, because an ObjectRef per
    300-byte sequence cost more CPU to hand over and fetch than aligning it.

    ``all_inline`` (``num_returns=1``): only the infos, every item inside its own, for apps whose
    items are all small. Even an unused return object costs the owner, the worker and the raylet
    bookkeeping: 2,400 of them per run for the 2,400 sequences of the align benchmark."""
    out = [load_and_parse(app, key, preprocess_on) for key in keys]
    items = []
    for item, info in out:
        if all_inline or info["nbytes"] <= inline_bytes:
            info["value"], item = item, None
        items.append(item)
    infos = [info for _, info in out]
    return infos if all_inline else (*items, infos)


_WARM: set = set()


def warm_process(app, device: str) -> None:
    """``app.warmup(device)`` once per process and app (see ``BasePairApp.warmup``)."""
    token = (type(app).__qualname__, device)
    warm = getattr(app, "warmup", None)
    if warm is not None and token not in _WARM:
        warm(device)
        _WARM.add(token)


@ray.remote
def check_items(app, keys: list[str]) -> list[str]:
    """Pre-flight: every item's raw bytes checked before any compute; returns problems.
    The loader process is warmed up on the way, so the first load does not pay for it."""
    warm_process(app, "host")
    problems = []
    for key in keys:
        try:
            url = app.url(key)
            app.check(key, fetch(url) if url else None)
        except InputError as exc:
            problems.append(str(exc))
        except Exception as exc:  # an app's own check failing is still a named problem
            problems.append(f"{app.url(key) or key}: {type(exc).__name__}: {exc}")
    return problems


def load_batches(missing: list, per_task: int, slots: int) -> list[list]:
    """Batches of at most ``per_task`` items, and never fewer batches than ``slots`` (the
    node's CPUs) while there are items enough: batching must not serialise what could run in
    parallel."""
    size = min(max(1, per_task), max(1, -(-len(missing) // max(1, slots))))
    return [missing[i:i + size] for i in range(0, len(missing), size)]


class _AdvisedEviction(NextUseEviction):
    """Next-use eviction from advice fetched just before evicting (an actor cannot block).
    ``unknown``: the next use assumed for an item without advice (INF: evicted first; -1:
    kept, for a cache that asks advice only about its least recently used items)."""

    def __init__(self, unknown: float = INF):
        self.advice: dict = {}
        super().__init__(lambda keys: {k: self.advice.get(k, unknown) for k in keys})


def make_eviction(kind: str, unknown: float = INF):
    if kind == "lru":
        return LRUEviction()
    if kind == "next_use":
        return _AdvisedEviction(unknown)
    raise ValueError(f"unknown eviction {kind!r}: choose 'next_use' or 'lru'")


class NodeCache:
    def __init__(self, node: str, node_id: str | None, app, item_keys: list[str],
                 budget_bytes: int | None, budget_items: int | None, eviction: str,
                 scheduler, metrics, preprocess_on: str | None = None, load_batch: int = 1,
                 load_slots: int = 1, inline_bytes: int = 64 * 1024,
                 expected_item_bytes: float | None = None):
        self.node, self.node_id = node, node_id
        self.load_batch, self.load_slots = max(1, load_batch), max(1, load_slots)
        self._reported = None  # (loads, resident, evictions) at the last l2_update
        self.app = app
        self.item_keys = item_keys
        self.evictor = make_eviction(eviction)
        self.cache = BudgetCache(budget_bytes, budget_items, self.evictor)
        self.scheduler, self.metrics = scheduler, metrics
        self.events = EventBuffer(metrics)
        self.loads = 0
        self.load_bytes = 0
        self.app_ref = ray.put(app)
        self.preprocess_on = preprocess_on
        self.inline_bytes = inline_bytes
        # items measured far below the inline size all travel by value: one return per task
        self.all_inline = expected_item_bytes is not None and \
            4 * expected_item_bytes <= inline_bytes
        self._pending: dict[int, asyncio.Future] = {}  # item -> its load's accounting

    def _submit(self, batch: list[int]) -> tuple[list, object]:
        """One load task for ``batch``: (a ref per item, a ref to the list of their infos)."""
        opts = {}
        if self.node_id:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=False)
        keys = [self.item_keys[i] for i in batch]
        if self.all_inline:
            ref = load_items.options(num_returns=1, **opts).remote(
                self.app_ref, keys, self.preprocess_on, self.inline_bytes, True)
            return [ref] * len(batch), ref  # a failed load's error travels in every item
        refs = load_items.options(num_returns=len(batch) + 1, **opts).remote(
            self.app_ref, keys, self.preprocess_on, self.inline_bytes)
        return list(refs[:-1]), refs[-1]

    def _near_budget(self, extra: int) -> bool:
        c = self.cache
        if c.budget_items is not None and len(c) + extra > c.budget_items:
            return True
        return c.budget_bytes is not None and c.nbytes > 0.9 * c.budget_bytes

    async def get(self, items: list[int]) -> dict:
        """``{item: ("value", item) | ("ref", ObjectRef)}`` once every item is loaded: small
        items by value, large ones by reference (zero-copy from the object store)."""
        missing = [i for i in items if i not in self.cache]
        if missing and isinstance(self.evictor, _AdvisedEviction) and \
                self._near_budget(len(missing)):
            # inserting will evict: decide with fresh next-use advice, not a stale one
            self.evictor.advice = await self.scheduler.next_uses.remote(
                self.cache.keys() + missing)
        out = {}
        to_load = []
        for item in items:
            entry = self.cache.lookup(item)
            if entry is None:
                to_load.append(item)
            else:
                out[item] = entry
        loop = asyncio.get_running_loop()
        for batch in load_batches(list(dict.fromkeys(to_load)), self.load_batch,
                                  self.load_slots):
            item_refs, info_ref = self._submit(batch)
            accounted = loop.create_future()
            for item, item_ref in zip(batch, item_refs):
                # pinned until its size is known; the ref keeps a failed load's error
                self.cache.put(item, ("ref", item_ref), 0, pin=True, shrink=False)
                out[item] = ("ref", item_ref)
                self._pending[item] = accounted
            self.loads += len(batch)
            asyncio.ensure_future(self._account(batch, item_refs, info_ref, accounted))
        self.cache.shrink()
        self._report()
        waits = {id(f): f for f in (self._pending.get(i) for i in items) if f is not None}
        if waits:
            await asyncio.gather(*waits.values())
        for item in items:  # a small item is a value now; a failed one keeps its ref
            entry = self.cache.peek(item)
            if entry is not None:
                out[item] = entry
        return out

    async def _account(self, batch: list[int], item_refs: list, info_ref, accounted) -> None:
        try:
            infos = await info_ref
        except Exception:
            infos = [None] * len(batch)
        self._spans(batch, infos)
        for item, item_ref, info in zip(batch, item_refs, infos):
            self._pending.pop(item, None)
            if info is None:
                # a failed load: forget it so no one is handed a broken ref twice
                if item in self.cache:
                    self.cache.unpin(item)
                    self.cache.discard(item)
                continue
            self.load_bytes += info["raw_bytes"]
            if item in self.cache:
                entry = ("value", info["value"]) if "value" in info else ("ref", item_ref)
                self.cache.unpin(item)
                self.cache.fill(item, entry, info["nbytes"], shrink=False)
        if not accounted.done():
            accounted.set_result(None)
        await self._shrink()
        self._report()

    def _spans(self, batch: list[int], infos: list) -> None:
        """Trace spans of a load task: per item for a single item, else one span per stage
        covering the batch (three spans per 300-byte sequence cost the metrics more than
        loading it)."""
        done = [(self.item_keys[i], info) for i, info in zip(batch, infos) if info is not None]
        if not done:
            return
        what = done[0][0] if len(done) == 1 else \
            f"{len(done)} items ({done[0][0]} .. {done[-1][0]})"
        for stage in ("load", "parse", "preprocess"):
            spans = [info[stage] for _, info in done if stage in info]
            if spans:
                self.events.span(f"{self.node}/loader", stage, what,
                                 min(a for a, _ in spans), max(b for _, b in spans))

    async def _shrink(self) -> None:
        if isinstance(self.evictor, _AdvisedEviction) and self.cache._over():
            self.evictor.advice = await self.scheduler.next_uses.remote(self.cache.keys())
        self.cache.shrink()  # an eviction changes the state _report sends next

    def _report(self, force: bool = False) -> None:
        # what the L2 holds changes only by loads and evictions: when neither happened since
        # the last report, sending the whole key list again only costs both actors CPU
        state = (self.loads, len(self.cache), self.cache.stats.evictions)
        if force or state != self._reported:
            self._reported = state
            self.scheduler.l2_update.remote(self.node, self.cache.keys())
        self.events.add({"kind": "tier", "source": self.node, "tier": "L2",
                         "stats": self.cache.stats.to_dict()})
        self.events.add({"kind": "loads", "source": self.node, "loads": self.loads,
                         "bytes": self.load_bytes})

    def ready(self) -> bool:
        return True

    async def stats(self) -> dict:
        """Counters, after every pending event reached the metrics."""
        self._report(force=True)
        ref = self.events.flush()
        if ref is not None:
            await ref
        return {"loads": self.loads, "bytes": self.load_bytes, **self.cache.stats.to_dict(),
                "resident": len(self.cache), "resident_bytes": self.cache.nbytes}


@ray.remote(num_cpus=0, enable_task_events=False)
class DeviceActor:
    ADVICE_ITEMS = 256  # next-use advice per tile for at most this many L1 items
    def __init__(self, actor_id: str, node: str, app, space, row_items, col_items,
                 item_keys: list[str], node_cache, scheduler, metrics, sinks: list,
                 l1_bytes: int | None, l1_items: int | None, in_flight: int, device: str,
                 eviction: str, tiles: list[dict], preprocessed_on_host: bool = False):
        self.id, self.node = actor_id, node
        self.app, self.space = app, space
        self.row_items = np.asarray(row_items)
        self.col_items = np.asarray(col_items)
        self.item_keys = item_keys
        self.node_cache, self.scheduler = node_cache, scheduler
        self.sinks = sinks
        self.in_flight = max(1, in_flight)
        self.device = device
        self.tiles = [Tile(**t) for t in tiles]
        self.tile_items_max = max((t.r1 - t.r0) + (t.c1 - t.c0) for t in self.tiles) \
            if self.tiles else 1
        # advice comes for the L1's least recently used items only: the others are kept
        self.evictor = make_eviction(eviction, unknown=-1.0)
        self.l1 = TileCache(BudgetCache(l1_bytes, l1_items, self.evictor), self._load,
                            app.item_nbytes)
        self.events = EventBuffer(metrics)
        # one compare at a time per actor (an actor is one device, a CPU actor one core):
        # in_flight is prefetch depth, not compute threads. Two compute threads in one process
        # fight over the GIL at every kernel call (parasail: per pair) and lost 20-40 % here.
        self.compute_slot = asyncio.Semaphore(1)
        self.tiles_done = 0
        self._l1_told: set = set()  # what the scheduler was last told this L1 holds
        self.preprocessed_on_host = preprocessed_on_host
        import os
        os.environ["PAIRFLOW_ACTOR_ID"] = actor_id  # apps may log or test by it

    def ready(self) -> int:
        """Construction done (the app unpickled, its kernels imported); returns the PID."""
        import os
        warm_process(self.app, self.device)
        for sink in self.sinks:
            sink.attach()
        return os.getpid()

    async def _load(self, items: list[int]) -> dict:
        got = await self.node_cache.get.remote(items)
        refs = {i: got[i][1] for i in items if got[i][0] == "ref"}
        hosts = {i: got[i][1] for i in items if got[i][0] == "value"}
        if refs:
            hosts.update(zip(refs, await asyncio.gather(*refs.values())))
        if self.preprocessed_on_host:  # the node cache holds device-ready items already
            return hosts
        return await asyncio.to_thread(self._preprocess, items, hosts)

    def _preprocess(self, items: list[int], hosts: dict) -> dict:
        """Every item of a load in one hop off the event loop (one per item cost more than a
        small item's preprocess)."""
        out = {}
        for item in items:
            key = self.item_keys[item]
            t0 = time.time()
            out[item] = self.app.preprocess(key, hosts[item], self.device)
            self.events.span(self.id, "preprocess", key, t0, time.time())
        return out

    def _describe(self, tile: Tile) -> str:
        from .scheduler import describe_tile
        keys = np.asarray(self.item_keys, dtype=object)
        return describe_tile(tile, list(keys[self.row_items]), list(keys[self.col_items]))

    def _compute(self, tile: Tile, values: dict):
        """compare -> postprocess, off the event loop (kernels release the GIL)."""
        left = [values[i] for i in self.row_items[tile.r0:tile.r1]]
        right = [values[j] for j in self.col_items[tile.c0:tile.c1]]
        mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        t0, c0 = time.time(), time.thread_time()
        try:
            block = self.app.compare(left, right, mask, self.device)
            t1, c1 = time.time(), time.thread_time()
            fields = self.app.postprocess(block, tile, mask)
        except Exception as exc:
            raise PairflowError(f"{self._describe(tile)}: compare failed: "
                                f"{type(exc).__name__}: {exc}") from exc
        t2 = time.time()
        what = f"tile {tile.id}"
        self.events.span(self.id, "compare", what, t0, t1, cpu=c1 - c0)
        self.events.span(self.id, "postprocess", what, t1, t2)
        return fields, mask

    def _write(self, tile: Tile, fields: dict, mask):
        t2 = time.time()
        entries = []
        for sink in self.sinks:
            entries.extend(sink.write_tile(tile, fields, mask))
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

    async def _process(self, t: int, advice: dict, keep: bool = False) -> dict:
        """Compute and write tile ``t``; returns the scheduler's next hand-out for this slot."""
        tile = self.tiles[t]
        items = self._tile_items(tile)
        if isinstance(self.evictor, _AdvisedEviction) and advice:
            self.evictor.advice = {int(k): v for k, v in advice.items()}
        t_start = time.time()
        self.events.add({"kind": "tile_start", "id": t, "actor": self.id, "t": t_start})
        values = await self.l1.acquire(items)
        try:
            async with self.compute_slot:
                fields, mask = await asyncio.to_thread(self._compute, tile, values)
        finally:
            self.l1.release(items)
        entries = await asyncio.to_thread(self._write, tile, fields, mask)
        kept = {k: np.asarray(v) for k, v in fields.items()} if keep else None
        self.tiles_done += 1
        self.events.add({"kind": "tile", "id": t, "actor": self.id, "t_start": t_start,
                         "t_end": time.time(), "pairs": tile.pairs})
        self._report_tier()
        return await self.scheduler.complete_and_request.remote(
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
        near = isinstance(self.evictor, _AdvisedEviction) and (
            (c.budget_items is not None and len(c) + room > c.budget_items)
            or (c.budget_bytes is not None and c.nbytes > 0.5 * c.budget_bytes))
        return added, removed, c.oldest(self.ADVICE_ITEMS) if near else []

    def _report_tier(self) -> None:
        self.events.add({"kind": "tier", "source": self.id, "tier": "L1",
                         "stats": self.l1.stats.to_dict()})

    async def run(self) -> dict:
        running: set = set()
        replies: list = []  # hand-outs that came back with a completion, not yet started
        finished = False
        try:
            while True:
                while not finished and len(running) < self.in_flight:
                    reply = replies.pop(0) if replies else await self.scheduler.request.remote(
                        self.id, self.node, *self._l1_news())
                    if "tile" in reply:
                        running.add(asyncio.ensure_future(
                            self._process(reply["tile"], reply["next_use"],
                                          reply.get("keep", False))))
                    elif "wait" in reply:
                        if not running:
                            await asyncio.sleep(reply["wait"])
                        break
                    else:
                        finished = True
                if not running:
                    if finished:
                        break
                    continue
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    reply = fut.result()
                    if "tile" in reply:
                        replies.append(reply)  # already the scheduler's: must be run
                    elif "done" in reply:
                        finished = True
        except BaseException as exc:
            for fut in running:
                fut.cancel()
            cause = root_cause(exc)
            message = str(cause) if isinstance(cause, (InputError, PairflowError)) else \
                f"{type(cause).__name__}: {cause}\n{traceback.format_exc()}"
            await self.scheduler.fail.remote(self.id, message)
            self.events.flush()
            if isinstance(cause, InputError):
                raise cause
            raise PairflowError(f"device actor {self.id} failed: {message}") from None
        self._report_tier()
        ref = self.events.flush()
        if ref is not None:
            await ref
        return {"actor": self.id, "tiles": self.tiles_done, "l1": self.l1.stats.to_dict()}
