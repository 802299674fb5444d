"""L3 (engine/pairs/cache/directory.py) without Ray: node caches (``node_cache.NodeCache`` with fake
loads) joined through in-memory clients. A node takes what a peer holds instead of loading it;
lookups are one call per shard per batch; what a peer no longer holds, or fails to hand over, is
loaded; hits per hop and misses are counted and agree with the loads the fake loader saw."""
import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pairflow.engine.pairs.cache.directory import DirectoryShard, Peers, l3_summary, shard_of
from pairflow.engine.pairs.cache.eviction import LRUEviction
from pairflow.engine.pairs.cache.node_cache import NodeCache
from pairflow.engine.pairs.cache.tiers import BudgetCache
from pairflow.engine.run.metrics import EventBuffer
from pairflow.engine.testing.host_tier import Events, FakeScheduler
from tests.conformance.test_node_cache import FakeLoads


def test_a_shard_keeps_every_holder_most_recent_first():
    shard = DirectoryShard(hops=1)
    shard.record(0, added=[5, 6])
    shard.record(1, added=[5])
    shard.record(2, added=[5])
    assert shard.lookup([5, 6, 7]) == {5: [2, 1, 0], 6: [0]}
    shard.record(2, removed=[5])
    assert shard.lookup([5]) == {5: [1, 0]}
    shard.record(1, removed=[5])  # the latest copies gone: the first holder is still found
    assert shard.lookup([5]) == {5: [0]}
    shard.record(0, removed=[5])
    assert shard.lookup([5]) == {}
    shard.record(0, added=[6])  # again: stays one entry, first
    assert shard.holders[6] == [0]
    with pytest.raises(ValueError):
        DirectoryShard(0)
    assert [shard_of(i, 3) for i in range(6)] == [0, 1, 2, 0, 1, 2]


class Client:
    """What ``NodeCacheClient`` gives a peer, answered in this process; calls are counted."""

    def __init__(self, cache: NodeCache, calls: list, fail_take: bool = False):
        self.cache, self.calls, self.fail_take = cache, calls, fail_take

    async def _answer(self, value):
        return value

    def take(self, items):
        self.calls.append(("take", self.cache.node, list(items)))
        if self.fail_take:
            async def lost():
                raise ConnectionError("peer lost")
            return lost()
        return self.cache.take(items)

    def dir_lookup(self, items, claim=None):
        self.calls.append(("lookup", self.cache.node, list(items)))
        return self._answer(self.cache.peers.shard_lookup(items, claim))

    def dir_record(self, node, added, removed):
        self.cache.peers.shard_record(node, added, removed)


def cluster(n_nodes: int, hops: int = 1, budget_items: int = 100, own=None, fail_take=()):
    calls: list = []
    caches, loads = [], []
    for n in range(n_nodes):
        load = FakeLoads()
        cache = NodeCache(f"node-{n}", [f"key-{i}" for i in range(1000)],
                          BudgetCache(None, budget_items, LRUEviction()), load, FakeScheduler(),
                          EventBuffer(Events()), load_batch=4, load_slots=2)
        caches.append(cache)
        loads.append(load)
    clients = [Client(c, calls, n in fail_take) for n, c in enumerate(caches)]

    async def pulled(entry):  # the Ray version pulls the object and puts it here
        return ("ref", f"own({entry[1]})")

    for n, cache in enumerate(caches):
        cache.peers = Peers(n, clients, hops, own=own or pulled)
    return caches, loads, calls


def test_a_node_takes_what_a_peer_holds_instead_of_loading():
    async def go():
        caches, loads, calls = cluster(3)
        items = list(range(12))
        first = await caches[0].get(items)
        assert sorted(loads[0].loaded) == items
        calls.clear()
        second = await caches[1].get(items)
        assert loads[1].loaded == []  # nothing from storage
        for i in items:  # small items by value, the others pulled and owned here
            kind, value = second[i]
            assert (kind, value) == first[i] if kind == "value" else \
                (kind, value) == ("ref", f"own({first[i][1]})")
        stats = caches[1].peers.stats()
        assert stats["hits_per_hop"] == [12] and stats["misses"] == 0
        # batched: the two remote shards once each (node 1's own shard is local), one take
        assert sorted(c[:2] for c in calls) == [("lookup", "node-0"), ("lookup", "node-2"),
                                                ("take", "node-0")]
        assert caches[1].loads == 0 and caches[0].loads == 12
        # now node 1 holds them too: the directory's most recent holder is node 1
        third = await caches[2].get([0, 1, 2])
        assert loads[2].loaded == [] and set(third) == {0, 1, 2}
        assert {c[1] for c in calls if c[0] == "take"} >= {"node-1"}
    asyncio.run(go())


def test_what_a_peer_no_longer_holds_or_fails_to_hand_over_is_loaded():
    async def go():
        # node 0 holds at most 4 items: it evicts 0..7 while loading 0..11
        caches, loads, _ = cluster(2, budget_items=4)
        await caches[0].get(list(range(4)))
        await caches[0].get(list(range(4, 12)))
        got = await caches[1].get(list(range(12)))
        assert set(got) == set(range(12))
        held = set(caches[0].cache.keys())
        assert len(held) == 4
        assert sorted(loads[1].loaded) == sorted(set(range(12)) - held)
        s = caches[1].peers.stats()
        assert s["hits"] == 4 and s["misses"] == 8
        assert s["hits"] + s["misses"] == 12

        async def gone(entry):  # the object vanished mid-pull (its owner died)
            raise RuntimeError("object lost")
        caches, loads, _ = cluster(2, own=gone)
        await caches[0].get(list(range(8)))
        got = await caches[1].get(list(range(8)))
        assert set(got) == set(range(8))
        pulled = [i for i in range(8) if got[i][0] == "value"]  # values need no pull
        s = caches[1].peers.stats()
        assert s["failed"] == 8 - len(pulled) and s["hits"] == len(pulled)
        assert sorted(loads[1].loaded) == sorted(set(range(8)) - set(pulled))
    asyncio.run(go())


def test_a_second_hop_when_the_first_candidate_is_lost():
    async def go():
        caches, loads, calls = cluster(3, hops=2, fail_take={2})
        await caches[0].get(list(range(6)))
        await caches[2].get(list(range(6)))  # node 2 took them from node 0: holders [2, 0]
        assert loads[2].loaded == []
        for c in caches:
            c._report(force=True)
        got = await caches[1].get(list(range(6)))
        assert set(got) == set(range(6)) and loads[1].loaded == []
        s = caches[1].peers.stats()
        assert s["hits_per_hop"] == [0, 6] and s["failed"] == 6 and s["misses"] == 0
        summary = l3_summary(True, 2, [await c.stats() for c in caches])
        assert summary["hits_per_hop"] == [6, 6] and summary["hits"] == 12
        assert summary["enabled"] and set(summary["nodes"]) == {"node-0", "node-1", "node-2"}
    asyncio.run(go())


def test_concurrent_requests_for_an_item_asked_of_the_peers_get_it_once():
    async def go():
        caches, loads, _ = cluster(2)
        await caches[0].get([1, 2, 3])
        a, b = await asyncio.gather(caches[1].get([1, 2, 3, 4, 5]),
                                    caches[1].get([2, 3, 4, 5, 6]))
        assert set(a) == {1, 2, 3, 4, 5} and set(b) == {2, 3, 4, 5, 6}
        assert all(v[0] in ("ref", "value") for v in list(a.values()) + list(b.values()))
        assert sorted(loads[1].loaded) == [4, 5, 6]  # each missing item loaded once
        assert a[4] == b[4] and a[2] == b[2]
    asyncio.run(go())


def test_a_node_waits_for_a_peers_load_under_way_instead_of_loading_again():
    """The directory lists a node from the start of its load: a peer asking meanwhile waits for
    that load (nodes working through the same items load each once, not once per node)."""
    async def go():
        caches, loads, _ = cluster(2)
        for load in loads:
            load.delay = 0.2
        first = asyncio.ensure_future(caches[0].get(list(range(6))))
        await asyncio.sleep(0.05)  # node 0's loads are under way, not finished
        assert sorted(loads[0].loaded) == list(range(6)) and not first.done()
        second = await caches[1].get(list(range(6)))
        assert first.done() and set(second) == set(range(6))
        assert loads[1].loaded == []
        assert caches[1].peers.stats()["hits_per_hop"] == [6]
    asyncio.run(go())


def test_stand_ins_and_lost_peer_errors():
    from pairflow.engine.pairs.cache.directory import PeerLost, is_peer_lost, stand_in
    assert [stand_in(s, 4, set()) for s in range(4)] == [0, 1, 2, 3]
    assert [stand_in(s, 4, {1, 2}) for s in range(4)] == [0, 3, 3, 3]
    assert stand_in(3, 4, {3}) == 0 and stand_in(0, 2, {0, 1}) == 0  # round the ring; none
    RayActorError = type("RayActorError", (Exception,), {})  # Ray's, by name (no Ray here)
    ActorDiedError = type("ActorDiedError", (RayActorError,), {})
    ActorUnavailableError = type("ActorUnavailableError", (RayActorError,), {})
    assert is_peer_lost(PeerLost()) and is_peer_lost(ActorDiedError())
    assert not is_peer_lost(ActorUnavailableError()) and not is_peer_lost(ConnectionError())
    shard = DirectoryShard()
    shard.record(2, added=[1, 4])
    shard.record(0, added=[4])
    shard.forget(2)
    assert shard.lookup([1, 4]) == {4: [0]}


class Lost(Client):
    """A peer whose node is gone once ``dead``: every call fails as Ray's would."""

    dead = False

    def _fail(self):
        async def lost():
            from pairflow.engine.pairs.cache.directory import PeerLost
            raise PeerLost("node gone")
        return lost()

    def take(self, items):
        return self._fail() if self.dead else super().take(items)

    def dir_lookup(self, items, claim=None):
        return self._fail() if self.dead else super().dir_lookup(items, claim)

    def dir_record(self, node, added, removed):
        if not self.dead:
            super().dir_record(node, added, removed)


def test_a_lost_nodes_shard_is_rebuilt_from_the_live_nodes_holdings():
    """Node 2 hosts the shard of items 2, 5, 8, 11, ... and is lost after node 0 loaded items
    0..11. Each live node learns of the loss from a failed lookup (one miss), moves the shard
    to its stand-in (node 0: the next live node round the ring) and sends it what it holds
    there; then node 1 takes all twelve items from node 0, none loaded: the shard's entries were
    rebuilt, not dropped. Without the rebuild the four of shard 2 would be loaded again."""
    async def go():
        calls: list = []
        caches, loads = [], []
        for n in range(3):
            load = FakeLoads()
            caches.append(NodeCache(f"node-{n}", [f"key-{i}" for i in range(1000)],
                                    BudgetCache(None, 100, LRUEviction()), load,
                                    FakeScheduler(), EventBuffer(Events()), load_batch=4,
                                    load_slots=2))
            loads.append(load)
        clients = [Lost(c, calls) for c in caches]

        async def pulled(entry):
            return ("ref", f"own({entry[1]})")
        for n, cache in enumerate(caches):
            cache.peers = Peers(n, clients, 1, own=pulled)
        await caches[0].get(list(range(12)))
        assert caches[2].peers.shard_lookup([2, 5, 8, 11]) == {2: [0], 5: [0], 8: [0], 11: [0]}
        clients[2].dead = True
        await caches[0].get([14])  # shard 2's lookup fails: node 0 learns of the loss
        await caches[1].get([17])  # and node 1
        assert loads[0].loaded[-1:] == [14] and loads[1].loaded == [17]
        for c in caches[:2]:
            assert c.peers.stats()["lost_peers"] == [2]
            assert c.peers.shard_host(5) == 0 and c.peers.shard_host(4) == 1
        assert caches[0].peers.stats()["rebuilt"] == 4  # 2, 5, 8, 11 sent to the stand-in
        got = await caches[1].get(list(range(12)))
        assert set(got) == set(range(12)) and loads[1].loaded == [17]
        s = caches[1].peers.stats()
        assert s["hits"] == 12 and s["misses"] == 1 and s["failed"] == 0
    asyncio.run(go())


def test_nodes_asking_together_for_items_no_one_holds_load_each_once():
    """Two nodes ask at once for the same items, which no node holds: the directory lists the
    first asker of each item (a claim, in the same step as its lookup), the other takes the item
    from it once its load is done. Without the claim both saw no holder and both loaded every
    item (dealt nodes, paced, ask for a streamed column together)."""
    async def go():
        caches, loads, _ = cluster(2)
        for load in loads:
            load.delay = 0.05
        items = list(range(8))
        a, b = await asyncio.gather(caches[0].get(items), caches[1].get(items))
        assert set(a) == set(b) == set(items)
        assert all(v[0] in ("ref", "value") for v in list(a.values()) + list(b.values()))
        assert sorted(loads[0].loaded + loads[1].loaded) == items
        s = [c.peers.stats() for c in caches]
        assert s[0]["hits"] + s[1]["hits"] == len(items)
        assert s[0]["misses"] + s[1]["misses"] == len(items)
    asyncio.run(go())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=8), min_size=2, max_size=4),
       st.lists(st.floats(0.0, 0.02), min_size=4, max_size=4))
def test_drawn_concurrent_asks_load_every_item_once_across_the_cluster(wants, delays):
    """Drawn: each node asks for its own items at once (some shared, in any order, loads of
    drawn delays). Every request gets every item it asked for, and, no node evicting, each item
    is loaded once in the whole cluster: an item no one held is claimed by one asker, the
    others take it from that node."""
    async def go():
        caches, loads, _ = cluster(len(wants))
        for load, delay in zip(loads, delays):
            load.delay = delay
        got = await asyncio.gather(*(c.get(w) for c, w in zip(caches, wants)))
        for g, w in zip(got, wants):
            assert set(g) == set(w)
            assert all(v[0] in ("ref", "value") for v in g.values())
        loaded = [i for load in loads for i in load.loaded]
        assert sorted(loaded) == sorted({i for w in wants for i in w})
    asyncio.run(go())
