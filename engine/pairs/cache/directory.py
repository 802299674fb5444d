"""L3: a directory of which nodes hold which items, so a node takes an item from a peer's
object store instead of loading it from storage again (Rocket's distributed cache).

``DirectoryShard`` is the pure bookkeeping of one shard: item ``i`` belongs to shard
``i mod p`` (p = the run's node caches, shard s lives in node cache s), and a shard remembers,
per item, the nodes that hold it (most recent first); an asker tries at most ``h`` of them.

``Peers`` is one node cache's side of L3 (node_cache.NodeCache calls it on an L2 miss): ask each
item's shard for its candidates (one call per shard per batch of misses, never one per item),
then take the items from at most ``h`` candidates, hop by hop (one call per candidate node per
hop). What a candidate no longer holds, or fails to hand over (evicted meanwhile, its node
lost), goes on to the next hop and finally to the storage load. Hits per hop and misses are
counted. It also tells the shards what entered and left this node's L2 (batched per shard, fire
and forget).

A lost node takes its shard with it, not the directory: a node whose lookup or take on a peer
fails with the peer gone (``is_peer_lost``) marks it lost (``Peers.lose``); the lost node's shard
moves to a stand-in (``stand_in``: the next live node round the ring, the same on every node
that knows the same losses), which every live node fills again from its own holdings as it
learns of the loss (``rebuilt``), and every shard drops the lost node as a holder.

Nothing here imports Ray: the peers are ``NodeCacheClient``-like objects whose methods return
awaitables, and ``own(entry)`` (injected: on Ray, pull the object and put it in this node's
store, so this node owns its copy and the peer may evict its own) makes a taken entry local.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable


def shard_of(item: int, shards: int) -> int:
    return int(item) % max(1, shards)


def stand_in(shard: int, shards: int, lost) -> int:
    """The node hosting ``shard`` when the nodes in ``lost`` are gone: the shard's own node if
    it lives, else the next live one round the ring (the shard itself when none lives)."""
    for k in range(max(1, shards)):
        node = (shard + k) % max(1, shards)
        if node not in lost:
            return node
    return shard


class PeerLost(Exception):
    """A peer's node is gone (what ``is_peer_lost`` recognises besides Ray's actor errors)."""


def is_peer_lost(err: BaseException) -> bool:
    """Does ``err`` say the peer is gone for good (its actor died with its node), not that one
    call failed? Ray's ``RayActorError`` (``ActorDiedError``) by name: this module imports no
    Ray. A transient ``ActorUnavailableError`` is not a loss."""
    names = {c.__name__ for c in type(err).__mro__}
    return isinstance(err, PeerLost) or ("RayActorError" in names
                                         and "ActorUnavailableError" not in names)


class DirectoryShard:
    """Per item, every node that holds it, most recent first; a lookup's caller asks at most
    ``hops`` of them. Every holder is kept, not only the latest ``hops``: a copy taken from a
    peer is often the first to go (a node streams a column past its stripe and drops it), and a
    shard that had forgotten the peer still holding the item would send the next asker to
    storage."""

    def __init__(self, hops: int = 1):
        if hops < 1:
            raise ValueError("l3_hops must be >= 1")
        self.hops = hops
        self.holders: dict[int, list[int]] = {}
        self.records = 0
        self.lookups = 0
        self.claims = 0  # items a lookup listed its asker for (it loads them)

    def record(self, node: int, added=(), removed=()) -> None:
        self.records += 1
        for item in removed:
            nodes = self.holders.get(int(item))
            if nodes and node in nodes:
                nodes.remove(node)
                if not nodes:
                    del self.holders[int(item)]
        for item in added:
            nodes = self.holders.setdefault(int(item), [])
            if node in nodes:
                nodes.remove(node)
            nodes.insert(0, node)

    def forget(self, node: int) -> None:
        """``node`` is gone: it holds nothing any more."""
        for item in [i for i, nodes in self.holders.items() if node in nodes]:
            self.record(node, removed=[item])

    def lookup(self, items, claim: int | None = None) -> dict[int, list[int]]:
        """The holders of every item that has any, most recent first. ``claim``: the asking
        node, listed as the holder of every item that has none (it loads them; ``Peers.find``).
        Rule: the lookup and the claim are one step of the shard, so of two nodes asking for
        an item no one holds, one loads it and the other takes it from the first (which waits
        for its own load: ``NodeCache.take``). Dealt nodes, paced, ask for a column together:
        without the claim both loaded it (issue 57: 28 of 220 loads of a 2-node run)."""
        self.lookups += 1
        out = {int(i): list(self.holders[int(i)]) for i in items if int(i) in self.holders}
        if claim is not None:
            for i in items:
                if int(i) not in out:
                    self.holders[int(i)] = [int(claim)]
                    self.claims += 1
        return out


class Peers:
    """One node cache's view of L3: the shard it hosts, the other node caches, the counters."""

    def __init__(self, index: int, peers: list, hops: int = 1,
                 own: Callable[[tuple], Awaitable[tuple]] | None = None):
        self.index, self.peers, self.hops = index, list(peers), max(1, int(hops))
        self.shard = DirectoryShard(self.hops)
        self.own = own
        self.hits = [0] * self.hops       # items taken from the k-th candidate
        self.misses = 0                   # items no candidate handed over: loaded
        self.failed = 0                   # hand-overs that failed (peer lost, object gone)
        self.stale = 0                    # candidates that no longer held the item
        self.lookup_calls = 0
        self.take_calls = 0
        self.lost: set = set()            # peers found gone (``lose``)
        self.rebuilt = 0                  # entries this node sent again to a lost shard's stand-in
        self._told: set = set()

    # -- the shard this node hosts (called by the other nodes) -----------------------------
    def shard_lookup(self, items, claim: int | None = None) -> dict:
        return self.shard.lookup(items, claim)

    def shard_record(self, node: int, added, removed) -> None:
        self.shard.record(node, added, removed)

    # -- this node's side -------------------------------------------------------------------
    def shard_host(self, item: int) -> int:
        """The node hosting ``item``'s shard, the lost ones' moved to their stand-ins."""
        return stand_in(shard_of(item, len(self.peers)), len(self.peers), self.lost)

    def _by_shard(self, items) -> dict[int, list]:
        out: dict[int, list] = {}
        for i in items:
            out.setdefault(self.shard_host(i), []).append(int(i))
        return out

    def _record_at(self, s: int, added, removed) -> None:
        if s == self.index:
            self.shard_record(self.index, added, removed)
            return
        try:
            self.peers[s].dir_record(self.index, added, removed)
        except Exception:  # a lost node's shard: its records are gone with it
            pass

    def lose(self, node: int) -> None:
        """``node`` is gone: its shard moves to a stand-in, which gets this node's entries of
        it again (the shard's other entries come from the other live nodes as each learns of
        the loss), and the shard hosted here forgets the node as a holder."""
        node = int(node)
        if node == self.index or node in self.lost or not 0 <= node < len(self.peers):
            return
        moved = [i for i in self._told if self.shard_host(i) == node]
        self.lost.add(node)
        self.shard.forget(node)
        for s, part in self._by_shard(moved).items():
            self._record_at(s, part, [])
        self.rebuilt += len(moved)

    def _gone(self, node: int, err: BaseException) -> bool:
        if is_peer_lost(err):
            self.lose(node)
            return True
        return False

    def tell(self, resident) -> None:
        """What entered and left this node's L2 since the last call, to each item's shard."""
        now = set(resident)
        added, removed = now - self._told, self._told - now
        self._told = now
        if not added and not removed:
            return
        add_by, rm_by = self._by_shard(added), self._by_shard(removed)
        for s in set(add_by) | set(rm_by):
            self._record_at(s, add_by.get(s, []), rm_by.get(s, []))

    async def _lookup(self, items: list) -> dict[int, list[int]]:
        """Each item's holders; every item without one is claimed for this node."""
        calls, local = {}, {}
        for s, part in self._by_shard(items).items():
            if s == self.index:
                local.update(self.shard_lookup(part, self.index))
            else:
                calls[s] = self.peers[s].dir_lookup(part, self.index)
        self.lookup_calls += len(calls)
        found = dict(local)
        if calls:
            answers = await asyncio.gather(*calls.values(), return_exceptions=True)
            for s, got in zip(calls, answers):
                if isinstance(got, BaseException):
                    self._gone(s, got)  # its items are misses this time
                    continue
                found.update({int(k): [n for n in v if n not in self.lost]
                              for k, v in got.items()})
        return found

    async def find(self, items: list, load: Callable[[list], None] | None = None
                   ) -> dict[int, tuple]:
        """``{item: (entry, nbytes)}`` for the items some peer handed over; the others are the
        caller's to load (counted as misses here). ``load``: called once the lookup answered
        (before any take) with the items no peer holds, which the lookup claimed for this node:
        the caller starts their loads at once, so a peer sent here for them waits for those
        loads instead of loading them too."""
        items = list(dict.fromkeys(int(i) for i in items))
        if not items:
            if load is not None:
                load([])
            return {}
        try:
            candidates = await self._lookup(items)
        except BaseException:
            if load is not None:
                load([])
            raise
        alone = [i for i in items if not any(n != self.index for n in candidates.get(i, []))]
        if load is not None:
            # claimed: the shard lists this node; a later removal must reach it (``tell``)
            self._told.update(alone)
            load(alone)
            self.misses += len(alone)
            items = [i for i in items if i not in set(alone)]
        got: dict[int, tuple] = {}
        for hop in range(self.hops):
            by_node: dict[int, list] = {}
            for item in items:
                if item in got:
                    continue
                nodes = [n for n in candidates.get(item, []) if n != self.index]
                if hop < len(nodes):
                    by_node.setdefault(nodes[hop], []).append(item)
            if not by_node:
                break
            self.take_calls += len(by_node)
            answers = await asyncio.gather(
                *(self.peers[n].take(part) for n, part in by_node.items()),
                return_exceptions=True)
            for (node, part), answer in zip(by_node.items(), answers):
                if isinstance(answer, BaseException):
                    self.failed += len(part)
                    self._gone(node, answer)
                    continue
                taken = await asyncio.gather(
                    *(self._own(answer[i]) for i in part if i in answer),
                    return_exceptions=True)
                for item, entry in zip([i for i in part if i in answer], taken):
                    if isinstance(entry, BaseException) or entry is None:
                        self.failed += 1  # evicted and gone, or its node lost mid-pull
                        continue
                    got[item] = entry
                    self.hits[hop] += 1
                self.stale += sum(1 for i in part if i not in answer)
        self.misses += sum(1 for i in items if i not in got)
        return got

    async def _own(self, held: tuple):
        entry, nbytes = held
        if entry[0] == "ref" and self.own is not None:
            entry = await self.own(entry)
        return entry, nbytes

    def stats(self) -> dict:
        return {"hits_per_hop": list(self.hits), "hits": sum(self.hits), "misses": self.misses,
                "failed": self.failed, "stale": self.stale, "lookup_calls": self.lookup_calls,
                "take_calls": self.take_calls, "hops": self.hops,
                "shard_items": len(self.shard.holders), "lost_peers": sorted(self.lost),
                "rebuilt": self.rebuilt, "claims": self.shard.claims}


def l3_summary(enabled: bool, hops: int, cache_stats: list[dict]) -> dict:
    """``summary.json``'s ``l3``: hits per hop, misses and failed hand-overs summed over the
    nodes, and per node."""
    per_node = {s["node"]: s["l3"] for s in cache_stats if s.get("l3")}
    out = {"enabled": bool(enabled) and bool(per_node), "hops": hops,
           "hits_per_hop": [0] * hops, "hits": 0, "misses": 0, "failed": 0, "stale": 0,
           "lookup_calls": 0, "take_calls": 0, "rebuilt": 0, "claims": 0}
    for part in per_node.values():
        for k, v in enumerate(part["hits_per_hop"][:hops]):
            out["hits_per_hop"][k] += v
        for key in ("hits", "misses", "failed", "stale", "lookup_calls", "take_calls",
                    "rebuilt", "claims"):
            out[key] += part.get(key, 0)
    out["nodes"] = per_node
    return out
