"""Metrics aggregation without Ray: tiers summed over sources, tiles counted once, busy time."""
from pairflow.engine.run.metrics import MetricsState


def test_snapshot_counts():
    m = MetricsState(n_items=10, tiles_total=4, pairs_total=45, bound_R=1.0)
    m.add([{"kind": "tile_start", "id": 0, "actor": "a", "t": 100.0},
           {"kind": "tile_start", "id": 1, "actor": "a", "t": 101.0},
           {"kind": "tile", "id": 0, "actor": "a", "t_start": 100.0, "t_end": 102.0, "pairs": 10},
           {"kind": "tile", "id": 1, "actor": "a", "t_start": 101.0, "t_end": 104.0, "pairs": 5},
           {"kind": "tile", "id": 1, "actor": "b", "t_start": 101.0, "t_end": 104.0, "pairs": 5},
           {"kind": "tier", "source": "node-0", "tier": "L2",
            "stats": {"hits": 3, "misses": 2, "bytes_in": 80, "evictions": 1}},
           {"kind": "tier", "source": "node-1", "tier": "L2",
            "stats": {"hits": 1, "misses": 4, "bytes_in": 20, "evictions": 0}},
           {"kind": "loads", "source": "node-0", "loads": 6, "bytes": 600},
           {"kind": "loads", "source": "node-1", "loads": 9, "bytes": 900},
           {"kind": "span", "actor": "a", "stage": "compare", "what": "t", "t0": 1.0, "t1": 1.5}])
    s = m.snapshot()
    assert (s["tiles_done"], s["pairs_done"]) == (2, 15), "a retried tile counts once"
    assert s["tiers"]["L2"]["hits"] == 4 and s["tiers"]["L2"]["misses"] == 6
    assert s["loads"] == 15 and s["R"] == 1.5
    assert s["actors"]["a"]["busy_s"] == 4.0, "overlapping tiles count wall time once"
    assert s["actors"]["a"]["running"] == []
    assert s["stage_seconds"]["compare"] == 0.5
    # later counters of the same source replace earlier ones (they are cumulative)
    m.add([{"kind": "loads", "source": "node-0", "loads": 7, "bytes": 700}])
    assert m.snapshot()["loads"] == 16


def test_event_buffer_sends_a_lone_event_within_its_interval():
    import asyncio

    from pairflow.engine.run.metrics import EventBuffer

    class Sink:
        def __init__(self):
            self.batches = []

        def record(self, batch):
            self.batches.append(list(batch))

    async def main():
        sink = Sink()
        buf = EventBuffer(sink, interval=0.05)
        buf.add({"kind": "loads", "source": "node-0", "loads": 3, "bytes": 30})
        buf.add({"kind": "loads", "source": "node-0", "loads": 4, "bytes": 40})
        assert sink.batches == []  # batched, not sent one by one
        await asyncio.sleep(0.5)
        return sink.batches

    assert [len(b) for b in asyncio.run(main())] == [2]
    # without an event loop (a worker thread) an event waits for the next add or flush
    sink = Sink()
    buf = EventBuffer(sink, interval=60)
    buf.add({"kind": "x"})
    assert sink.batches == []
    buf.flush()
    assert sink.batches == [[{"kind": "x"}]]


def test_event_buffer_loses_no_event_when_threads_add_while_it_flushes():
    """Compute threads add spans while the event loop's timer flushes: every event is sent
    exactly once (each batch is taken as it is when sent, as a Ray call pickles it)."""
    import sys
    import threading
    from pairflow.engine.run.metrics import EventBuffer
    sent = []

    class Sink:
        def record(self, batch):
            sent.extend(list(batch))  # what goes over the wire: the batch as it is now

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        buf = EventBuffer(Sink(), interval=0.0)  # every add flushes: the most swaps
        n, per = 4, 20000

        def adder(t):
            for i in range(per):
                buf.add({"t": t, "i": i})

        threads = [threading.Thread(target=adder, args=(t,)) for t in range(n)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        buf.flush()
    finally:
        sys.setswitchinterval(old)
    keys = [(e["t"], e["i"]) for e in sent]
    assert len(keys) == n * per and len(set(keys)) == n * per
