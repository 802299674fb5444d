"""The endgame as the device actors live it: once no more tiles are pending than there are
actors, a tile goes only to an actor with nothing left to compute. Two real ``DeviceWorker``
run loops and the real ``Scheduler`` in one event loop, no Ray: every call to the scheduler
takes a round trip (``LATENCY_S``), as an actor's call to the coordinator does, and a tile
computes for a known time, one actor's 2.5x the other's (so the faster one reaches the endgame
while the other computes). The oracle is the rule itself, checked by hand on what the scheduler
handed out and when each compare ended."""
import asyncio
import threading
import time

import numpy as np

from pairflow.engine import FunctionApp
from pairflow.engine.pairs.workers.device_worker import DeviceSpec, DeviceWorker
from pairflow.engine.pairs.plan.scheduler import Scheduler
from pairflow.engine.pairs.space import Triangle, leaves

LATENCY_S = 0.02
COMPUTE_S = (0.06, 0.15)  # a tile's compare on each of the two actors


class _RoundTrips:
    """The scheduler as a device actor's client sees it: each call arrives after a round trip,
    and each hand-out is logged with the tiles not yet handed out at that moment."""

    def __init__(self, scheduler: Scheduler):
        self.scheduler, self.grants = scheduler, []

    async def _call(self, method, actor, *args, **kw):
        await asyncio.sleep(LATENCY_S)
        reply = method(actor, *args, **kw)
        if "tile" in reply:
            self.grants.append((actor, reply["tile"], time.time(),
                                self.scheduler.policy.pending() + 1))
        return reply

    async def request(self, actor, *args, **kw):
        return await self._call(self.scheduler.request, actor, *args, **kw)

    async def complete_and_request(self, actor, *args, **kw):
        return await self._call(self.scheduler.complete_and_request, actor, *args, **kw)

    def heartbeat(self, actor):
        pass

    async def fail(self, actor, message):
        raise AssertionError(message)


class _Items:
    async def get(self, items):
        return {i: ("value", i) for i in items}


def test_no_actor_is_handed_a_last_tile_while_it_still_has_one_to_compute(tmp_path):
    n, leaf = 12, 3  # 4 x 5 / 2 = 10 tiles for 2 actors
    ended = {}  # (first row, first column) of a tile -> when its compare ended
    lock = threading.Lock()

    def app(compute_s):
        def compare(lefts, rights):
            time.sleep(compute_s)
            with lock:
                ended[(lefts[0], rights[0])] = time.time()
            return np.add.outer(np.asarray(lefts, float), np.asarray(rights, float))
        return FunctionApp([str(i) for i in range(n)], load=int, compare=compare, tile=True)

    space = Triangle(n)
    tiles = [t.to_dict() for t in leaves(space, leaf)]
    items = np.arange(n)
    scheduler = _RoundTrips(Scheduler(str(tmp_path), tiles, items, items,
                                      list(range(len(tiles))), journal=False))

    async def run():
        workers = [DeviceWorker(DeviceSpec(
            actor_id=f"node-0/dev-{d}", node="node-0", space=space, row_items=items,
            col_items=items, item_keys=[str(i) for i in range(n)], tiles=tiles, sinks=[],
            node_cache=_Items(), scheduler=scheduler, metrics=None, device="cpu", in_flight=2,
            l1_bytes=None, l1_items=None, eviction="lru"), app(COMPUTE_S[d])) for d in range(2)]
        return await asyncio.gather(*(w.run() for w in workers))

    done = asyncio.run(run())
    assert sum(d["tiles"] for d in done) == len(tiles)
    handed = {t: actor for actor, t, _, _ in scheduler.grants}
    assert sorted(handed) == list(range(len(tiles)))  # each tile handed out once
    corner = {i: (tiles[i]["r0"], tiles[i]["c0"]) for i in range(len(tiles))}
    endgame = [g for g in scheduler.grants if g[3] <= 2]
    assert len(endgame) == 2
    for actor, t, when, _ in endgame:
        mine = [u for a, u, w, _ in scheduler.grants if a == actor and w < when]
        assert all(ended[corner[u]] <= when for u in mine), (actor, t, mine)
