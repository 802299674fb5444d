"""Cache tiers: one accounting core, and the asynchronous fronts of L1 and L2.

``BudgetCache`` is the synchronous core every tier shares (L1 in a device actor, L2 in a
node cache, the simulator): entries with a size, a pin count, LRU recency, a byte and/or
item budget, a pluggable eviction policy, and the same counters everywhere (hits, misses,
bytes_in, evictions), in the spirit of fsspec's ``caching.py``. ``near_budget`` is the one rule
for "an insert may evict soon" that the tiers use to fetch eviction advice in time.

``TileCache`` is the asynchronous front a device actor uses (L1). ``acquire(keys)`` is one
transaction: in a single step of the event loop it pins every key of a tile, starts a load for
each missing one and joins the load already under way for keys being loaded (a second request
waits for that one load instead of loading again). Pinned entries are never evicted; the budget is
soft only while pinned entries alone exceed it (the engine sizes leaves so they do not).

A node's L2 (``node_cache.NodeCache``) is a ``BudgetCache`` behind a front of its own.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Hashable, Iterable

from .eviction import LRUEviction


def device_cache_items(leaf: int, in_flight: int, configured: int | None = None) -> int:
    """L1 items per device actor: the tiles under way plus one being prefetched, twice over
    (row and column items), unless configured."""
    return configured or max(4, 2 * leaf * (in_flight + 1))


def largest_leaf_held(items: int, in_flight: int) -> int:
    """The largest leaf whose tiles under way (and one more) an L1 of ``items`` holds: the
    inverse of ``device_cache_items``, 0 when not even a leaf of 1 fits."""
    return items // (2 * (in_flight + 1))


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    bytes_in: int = 0
    evictions: int = 0
    waits: int = 0  # requests that joined a load already under way

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class _Entry:
    value: Any
    nbytes: int
    pins: int = 0


class BudgetCache:
    """Sized entries under a byte and/or item budget, evicted by a policy, never while pinned."""

    def __init__(self, budget_bytes: int | None = None, budget_items: int | None = None,
                 eviction=None):
        if budget_bytes is not None and budget_bytes < 0:
            raise ValueError("budget_bytes must be >= 0")
        if budget_items is not None and budget_items < 1:
            raise ValueError("budget_items must be >= 1")
        self.budget_bytes = budget_bytes
        self.budget_items = budget_items
        self.eviction = eviction or LRUEviction()
        self._entries: "OrderedDict[Hashable, _Entry]" = OrderedDict()  # LRU first
        self.nbytes = 0
        self.stats = CacheStats()

    def __contains__(self, key) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list:
        return list(self._entries)

    def oldest(self, k: int) -> list:
        """Up to ``k`` unpinned keys, least recently used first (eviction's candidates)."""
        out = []
        for key, entry in self._entries.items():
            if len(out) >= k:
                break
            if entry.pins == 0:
                out.append(key)
        return out

    def lookup(self, key):
        """The value, counting a hit or a miss; ``None`` on a miss."""
        entry = self._entries.get(key)
        if entry is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        self._entries.move_to_end(key)
        return entry.value

    def peek(self, key):
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    def put(self, key, value, nbytes: int, pin: bool = False, shrink: bool = True) -> list:
        """Insert (or replace) ``key``; returns the keys evicted to make room.

        ``shrink=False`` defers eviction to one ``shrink()`` after a batch of inserts: choosing
        victims ranks every candidate, so once per batch, not once per item."""
        old = self._entries.pop(key, None)
        if old is not None:
            self.nbytes -= old.nbytes
        entry = _Entry(value, int(nbytes), (old.pins if old else 0) + (1 if pin else 0))
        self._entries[key] = entry
        self.nbytes += entry.nbytes
        self.stats.bytes_in += entry.nbytes
        return self.shrink() if shrink else []

    def fill(self, key, value, nbytes: int, shrink: bool = True) -> list:
        """Give a placeholder entry its value and size, keeping its pins and recency."""
        entry = self._entries[key]
        self.nbytes += int(nbytes) - entry.nbytes
        self.stats.bytes_in += int(nbytes)
        entry.value, entry.nbytes = value, int(nbytes)
        return self.shrink() if shrink else []

    def pin(self, key) -> None:
        self._entries[key].pins += 1

    def unpin(self, key) -> None:
        entry = self._entries.get(key)
        if entry is None or entry.pins <= 0:
            raise KeyError(f"unpin of {key!r} which is not pinned")
        entry.pins -= 1

    def pins(self, key) -> int:
        entry = self._entries.get(key)
        return 0 if entry is None else entry.pins

    def discard(self, key) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.nbytes -= entry.nbytes

    def near_budget(self, extra_items: int = 0, byte_fraction: float = 1.0) -> bool:
        """Would ``extra_items`` more exceed the item budget, or is more than ``byte_fraction``
        of the byte budget in use? With the defaults: is the cache over its budget."""
        if self.budget_items is not None and len(self._entries) + extra_items > self.budget_items:
            return True
        return self.budget_bytes is not None and self.nbytes > byte_fraction * self.budget_bytes

    def shrink(self, extra_items: int = 0) -> list:
        """Evict unpinned entries until under budget (leaving room for ``extra_items``)."""
        if not self.near_budget(extra_items):
            return []
        candidates = [k for k, e in self._entries.items() if e.pins == 0]
        evicted = []
        for key in self.eviction.victims(candidates):
            if not self.near_budget(extra_items):
                break
            self.discard(key)
            self.stats.evictions += 1
            evicted.append(key)
        return evicted


class TileCache:
    """Asynchronous L1: pins a tile's keys as one transaction; one load per missing key."""

    def __init__(self, cache: BudgetCache,
                 loader: Callable[[list], Awaitable[dict]],
                 sizeof: Callable[[Any], int]):
        self.cache = cache
        self.loader = loader  # async: list of keys -> {key: value}
        self.sizeof = sizeof
        self._loading: dict[Hashable, asyncio.Future] = {}

    @property
    def stats(self) -> CacheStats:
        return self.cache.stats

    async def acquire(self, keys: Iterable) -> dict:
        """Pin every key and return {key: value}; the caller must ``release`` the same keys."""
        keys = list(dict.fromkeys(keys))
        waiting: dict = {}  # id -> a load's future (one per load, shared by its keys)
        to_load: list = []
        loaded = None  # the future of this call's own load
        # --- one synchronous step: nothing else runs on the event loop in between ---
        for key in keys:
            if key in self._loading:
                self.cache.stats.hits += 1
                self.cache.stats.waits += 1
                fut = self._loading[key]
                waiting[id(fut)] = fut
                self.cache.pin(key)
            elif key in self.cache:
                self.cache.lookup(key)  # counts the hit, refreshes recency
                self.cache.pin(key)
            else:
                if loaded is None:  # one future for every key of the load: a tile has
                    # thousands of small items, and a future apiece cost ms to await
                    loaded = asyncio.get_running_loop().create_future()
                    waiting[id(loaded)] = loaded
                self._loading[key] = loaded
                # placeholder entry so pins and budget see it at once
                self.cache.put(key, None, 0, pin=True, shrink=False)
                self.cache.stats.misses += 1
                to_load.append(key)
        self.cache.shrink()
        if to_load:
            asyncio.ensure_future(self._load(to_load))
        # --- end of the transaction ---
        try:
            if waiting:
                await asyncio.gather(*waiting.values())
        except BaseException:
            self.release(keys)
            raise
        return {k: self.cache.peek(k) for k in keys}

    async def _load(self, keys: list) -> None:
        try:
            values = await self.loader(keys)
            # every value is checked and sized before any is filled in: a failure here fails
            # every waiter at once (it left them waiting until the tile's deadline)
            missing = [key for key in keys if key not in values]
            if missing:
                raise LookupError(f"the loader returned no value for {missing[:3]!r}")
            sizes = {key: self.sizeof(values[key]) for key in keys}
        except BaseException as exc:  # every waiter sees the failure; nothing half-loaded stays
            for key in keys:
                fut = self._loading.pop(key)
                if key in self.cache and self.cache.pins(key) == 0:
                    self.cache.discard(key)  # otherwise release() removes the placeholder
                if not fut.done():
                    fut.set_exception(exc)
            return
        for key in keys:
            if key in self.cache:
                self.cache.fill(key, values[key], sizes[key], shrink=False)
            fut = self._loading.pop(key)
            if not fut.done():
                fut.set_result(None)
        self.cache.shrink()

    def release(self, keys: Iterable) -> None:
        for key in dict.fromkeys(keys):
            if key in self.cache and self.cache.pins(key) > 0:
                self.cache.unpin(key)
                if self.cache.peek(key) is None and key not in self._loading:
                    self.cache.discard(key)  # a failed load's placeholder
        self.cache.shrink()

    def resident(self) -> list:
        return [k for k in self.cache.keys() if k not in self._loading]
