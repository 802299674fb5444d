"""A node's L2: parsed items loaded by an injected ``load`` function (on Ray: a load task whose
results this cache owns, actors.py; in tests: a fake), kept under a ``tiers.BudgetCache`` budget
and evicted by the scheduler's next-use advice in this node's work; with L3 it asks its peers
(``directory.Peers``) before loading, and hands its own items to them (``take``).

Read-ahead (``policy.read_ahead``): when the driver gives the cache the run's items in the order
the plan needs them (one node, a host tier holding them all), every load slot the actors' own
requests leave idle loads the next of them. Loads on demand alone left compares waiting on a
parse at every stripe's first tile while a slot sat idle; what is asked for is still loaded
first, since read-ahead only fills slots and a request starts its loads at once.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from .loading import load_batches
from .eviction import AdvisedEviction
from .store import add_stats
from .tiers import BudgetCache


class NodeCache:
    """A node's L2: one load per item however many actors ask, small items kept as values.

    ``load(batch) -> (handles, infos)``: starts loading a batch of item ids and returns one
    handle per item (a Ray ObjectRef: this cache submitted the task, so it owns the object and
    a device actor's death does not empty the tier) and an awaitable of their infos
    (``{"raw_bytes", "nbytes"[, "value"]}``; ``None`` when the load failed). An item whose info
    holds its ``value`` is kept by value, the others by handle. ``scheduler``:
    ``next_uses(items, node)`` (awaitable advice for next-use eviction, in this node's work)
    and ``l2_update(node, items)`` (what this tier
    holds, for cache-aware hand-out). ``events``: an ``EventBuffer`` of the run's metrics.
    """

    def __init__(self, node: str, item_keys: list[str], cache: BudgetCache,
                 load: Callable[[list[int]], tuple[list, Awaitable]], scheduler, events,
                 load_batch: int = 1, load_slots: int = 1, read_ahead: list[int] | None = None):
        self.node, self.item_keys = node, item_keys
        self.cache, self.load = cache, load
        self.scheduler, self.events = scheduler, events
        self.load_batch, self.load_slots = max(1, load_batch), max(1, load_slots)
        self.advised = isinstance(cache.eviction, AdvisedEviction)
        self.loads = 0
        self.load_bytes = 0
        self.io: dict[str, dict[str, int]] = {}  # reads by scheme: GETs and bytes
        self.store: dict[str, int] = {}  # L4 item store: hits, misses, corrupt, bytes
        self._reported = None  # (loads, resident, evictions) at the last l2_update
        self._pending: dict[int, asyncio.Future] = {}  # item -> its load's accounting
        self.peers = None  # L3 (directory.Peers), when the run has it
        self._settled = 0  # items that became usable here (loaded or taken from a peer)
        self._asking: set = set()  # items this node is asking its peers for (L3)
        self._looked: dict = {}  # item -> the future set once its directory lookup answered
        self.ahead = list(read_ahead or ())  # items to load before they are asked for
        self._ahead_at = 0
        self._loading = 0  # load batches under way

    async def get(self, items: list[int]) -> dict:
        """``{item: ("value", item) | ("ref", handle)}`` once every item is loaded: small
        items by value, large ones by handle (zero-copy from the object store). A second
        request for an item being loaded waits for that load."""
        missing = [i for i in items if i not in self.cache]
        # 0.9: advice is fetched a little before the byte budget is reached
        if missing and self.advised and self.cache.near_budget(len(missing), 0.9):
            # inserting will evict: decide with fresh next-use advice, not a stale one
            self.cache.eviction.advice = await self.scheduler.next_uses(
                self.cache.keys() + missing, self.node)
        out = {}
        to_load = []
        for item in items:
            entry = self.cache.lookup(item)
            if entry is None:
                to_load.append(item)
            else:
                out[item] = entry
        loop = asyncio.get_running_loop()
        to_load = list(dict.fromkeys(to_load))
        asked, claimed = None, []
        if to_load and self.peers is not None:  # L3: peers first, storage for the rest
            taken, to_load, asked, started, claimed = await self._from_peers(to_load)
            out.update(taken)
            out.update(started)
        for batch in load_batches(to_load, self.load_batch, self.load_slots):
            out.update(self._start_load(batch, loop))
        self._read_ahead(loop)
        if asked is not None:  # after the loads of the rest are under way (waiters re-wait)
            asked.set_result({i: out[i] for i in taken})
        self.cache.shrink()
        self._report()
        settled: dict = {}
        # the loads this node claimed were started while the peers were asked: one may have
        # been accounted (and its item evicted) since, so its entry is the accounted one, not
        # the handle taken at the start (on Ray a small item's handle is the load's info list)
        for entries in await asyncio.gather(*claimed):
            settled.update(entries)
        waiting = [i for i in items if i in self._pending and i not in settled]
        while waiting:  # an item asked of the peers may have gone on to a load meanwhile
            waits = {id(f): f for f in (self._pending.get(i) for i in waiting) if f is not None}
            if not waits:
                break
            for entries in await asyncio.gather(*waits.values()):
                settled.update(entries)
            waiting = [i for i in waiting if i not in settled]
        for item in items:
            # a small item is a value now, even if the tier evicted it the moment its load was
            # accounted (on Ray its handle is then the load's info list, not the item); a
            # failed load keeps its handle, which raises the load's error where it is resolved
            entry = settled.get(item) or self.cache.peek(item)
            if entry is not None:
                out[item] = entry
        return out

    def _start_load(self, batch: list[int], loop) -> dict:
        """Start loading ``batch``; its items' entries (their handles)."""
        handles, infos = self.load(batch)
        accounted = loop.create_future()
        out = {}
        for item, handle in zip(batch, handles):
            # pinned until its size is known; the handle keeps a failed load's error
            self.cache.put(item, ("ref", handle), 0, pin=True, shrink=False)
            out[item] = ("ref", handle)
            self._pending[item] = accounted
        self.loads += len(batch)
        self._loading += 1
        asyncio.ensure_future(self._account(batch, handles, infos, accounted))
        return out

    def _read_ahead(self, loop) -> None:
        """Fill the idle load slots with the next items of the read-ahead list."""
        while self._loading < self.load_slots and self._ahead_at < len(self.ahead):
            batch = []
            while self._ahead_at < len(self.ahead) and len(batch) < self.load_batch:
                item = self.ahead[self._ahead_at]
                self._ahead_at += 1
                if item not in self.cache:  # (loaded, or being loaded, already)
                    batch.append(item)
            if batch:
                self._start_load(batch, loop)

    async def _from_peers(self, items: list[int]) -> tuple[dict, list, asyncio.Future, dict,
                                                           list]:
        """Take what the peers hold (L3); returns (taken entries, items left to load, the
        future a concurrent request for these items waits on, the entries of the loads
        started as soon as the directory said no peer holds them, and those loads' accounting
        futures). Placeholders keep the items
        pinned and visible as under way while the peers are asked."""
        loop = asyncio.get_running_loop()
        asked, looked = loop.create_future(), loop.create_future()
        for item in items:
            self.cache.put(item, ("pending", None), 0, pin=True, shrink=False)
            self._pending[item] = asked
            self._asking.add(item)
            self._looked[item] = looked
        started: dict = {}
        claimed: list = []  # the accounting futures of the loads started for claims

        def load(alone: list) -> None:
            # the directory lists this node for them (a claim): load them now, before taking
            # the rest, so a peer sent here waits for these loads (``take``), never for ours
            for item in alone:
                self._pending.pop(item, None)
                self._asking.discard(item)
                if item in self.cache:
                    self.cache.unpin(item)
            for batch in load_batches(alone, self.load_batch, self.load_slots):
                started.update(self._start_load(batch, loop))
                claimed.append(self._pending[batch[0]])
            for item in items:
                if self._looked.get(item) is looked:
                    del self._looked[item]
            if not looked.done():
                looked.set_result(None)
        try:
            found = await self.peers.find(items, load)
        except Exception:  # L3 is an optimisation: anything wrong there means load
            found = {}
        finally:
            if not looked.done():
                load([])
        taken, rest = {}, []
        for item in items:
            if item in started:
                continue
            self._pending.pop(item, None)
            self._asking.discard(item)
            if item in self.cache:
                self.cache.unpin(item)  # the load below pins it again
            if item not in found:
                rest.append(item)
                continue
            entry, nbytes = found[item]
            taken[item] = entry
            self._settled += 1
            if item in self.cache:
                self.cache.fill(item, entry, nbytes, shrink=False)
            else:
                self.cache.put(item, entry, nbytes, shrink=False)
        return taken, rest, asked, started, claimed

    async def take(self, items: list[int]) -> dict:
        """L3, a peer asking: ``{item: (entry, nbytes)}`` for the items held here, once those
        being loaded from storage here have settled (the directory lists a node from the start
        of its load, and a lookup lists the node that asked first for an item no one held:
        nodes working through the same items load each once, not each). Not counted as hits:
        this node's own use is what L2 counts."""
        # first until this node's own lookup of them answered: what it claimed is then
        # loading here (a lookup waits on nothing, so neither can two nodes asking each other)
        looking = {id(f): f for f in (self._looked.get(i) for i in items) if f is not None}
        if looking:
            await asyncio.gather(*looking.values(), return_exceptions=True)
        loading = {id(f): f for f in (self._pending.get(i) for i in items
                                      if i not in self._asking) if f is not None}
        if loading:
            await asyncio.gather(*loading.values(), return_exceptions=True)
        out = {}
        for item in items:
            if item in self._pending or item not in self.cache:
                continue
            entry = self.cache.peek(item)
            if entry is not None and entry[0] in ("ref", "value"):
                out[item] = (entry, self.cache._entries[item].nbytes)
        return out

    async def _account(self, batch: list[int], handles: list, infos_ref, accounted) -> None:
        try:
            infos = await infos_ref
        except Exception:
            infos = [None] * len(batch)
        self._spans(batch, infos)
        entries = {}  # what each loaded item is, for the requests waiting on this load
        for item, handle, info in zip(batch, handles, infos):
            self._pending.pop(item, None)
            if info is None:
                # a failed load: forget it so no one is handed a broken handle twice
                if item in self.cache:
                    self.cache.unpin(item)
                    self.cache.discard(item)
                continue
            self.load_bytes += info["raw_bytes"]
            if "store" in info:
                add_stats(self.store, info["store"])
            for kind, d in info.get("io", {}).items():
                mine = self.io.setdefault(kind, {"gets": 0, "bytes": 0})
                mine["gets"] += d["gets"]
                mine["bytes"] += d["bytes"]
            entry = ("value", info["value"]) if "value" in info else ("ref", handle)
            entries[item] = entry
            self._settled += 1
            if item in self.cache:
                self.cache.unpin(item)
                self.cache.fill(item, entry, info["nbytes"], shrink=False)
        if not accounted.done():
            accounted.set_result(entries)
        self._loading -= 1
        self._read_ahead(asyncio.get_running_loop())
        await self._shrink()
        self._report()

    def _spans(self, batch: list[int], infos: list) -> None:
        """Trace spans of a load task: per item for a single item, else one span per stage
        covering the batch (three spans per small item cost the metrics more than loading
        it)."""
        done = [(self.item_keys[i], info) for i, info in zip(batch, infos) if info is not None]
        if not done:
            return
        what = done[0][0] if len(done) == 1 else \
            f"{len(done)} items ({done[0][0]} .. {done[-1][0]})"
        for stage in ("load", "store_read", "parse", "preprocess"):
            spans = [info[stage] for _, info in done if stage in info]
            if spans:
                self.events.span(f"{self.node}/loader", stage, what,
                                 min(a for a, _ in spans), max(b for _, b in spans))

    async def _shrink(self) -> None:
        if self.advised and self.cache.near_budget():
            self.cache.eviction.advice = await self.scheduler.next_uses(self.cache.keys(),
                                                                        self.node)
        self.cache.shrink()  # an eviction changes the state _report sends next

    def _report(self, force: bool = False) -> None:
        # what the L2 holds changes only by loads and evictions: when neither happened since
        # the last report, sending the whole key list again only costs both actors CPU
        state = (self.loads, len(self.cache), self.cache.stats.evictions, self._settled)
        if force or state != self._reported:
            self._reported = state
            self.scheduler.l2_update(self.node, self.cache.keys())
            if self.peers is not None:  # the directory learns loads as they start (a peer
                # waits for them: take), never what this node is itself asking the peers for
                self.peers.tell(k for k in self.cache.keys() if k not in self._asking)
        self.events.add({"kind": "tier", "source": self.node, "tier": "L2",
                         "stats": self.cache.stats.to_dict()})
        self.events.add({"kind": "loads", "source": self.node, "loads": self.loads,
                         "bytes": self.load_bytes})

    async def stats(self) -> dict:
        """Counters, after every pending event reached the metrics."""
        self._report(force=True)
        ref = self.events.flush()
        if ref is not None:
            await ref
        return {"node": self.node, "loads": self.loads, "bytes": self.load_bytes,
                "io": self.io, "store": self.store or None,
                "l3": self.peers.stats() if self.peers is not None else None,
                **self.cache.stats.to_dict(),
                "resident": len(self.cache), "resident_bytes": self.cache.nbytes}
