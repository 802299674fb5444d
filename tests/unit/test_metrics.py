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


def test_the_trace_is_bounded_and_keeps_every_span_s_time(tmp_path):
    """Spans one a line up to the budget, then one line per actor, stage and second: the lines'
    ``n`` count every span once, ``busy`` their seconds, t0/t1 their first start and last
    end; the file is a few lines a second however many spans; trace.parquet reads it."""
    import json
    import random

    import pyarrow.parquet as pq

    from pairflow.engine.run.metrics import SpanTrace, trace_to_parquet
    from pairflow.engine.run.rundir import JsonlWriter, RunDir
    rng = random.Random(0)
    spans, t = [], 1000.0
    for i in range(20_000):  # 2 actors x 3 stages, a span every ~1 ms: ~20 s
        t += rng.random() * 0.002
        actor, stage = f"a{i % 2}", ("compare", "postprocess", "write")[i % 3]
        spans.append({"actor": actor, "stage": stage, "what": f"tile {i}", "t0": t,
                      "t1": t + rng.random() * 0.003, "cpu": 0.001})
    path = tmp_path / "trace.jsonl"
    out = JsonlWriter(str(path))
    trace = SpanTrace(out, budget=500, bucket_s=1.0)
    for lo in range(0, len(spans), 97):  # in batches, as actors send them
        trace.write(spans[lo:lo + 97])
    trace.close()
    out.close()
    lines = [json.loads(x) for x in open(path)]
    assert lines[:500] == spans[:500]
    rest, later = lines[500:], spans[500:]
    assert sum(x["n"] for x in rest) == len(later)
    assert abs(sum(x["busy"] for x in rest) - sum(s["t1"] - s["t0"] for s in later)) < 1e-6
    assert abs(sum(x["cpu"] for x in rest) - 0.001 * len(later)) < 1e-6
    seconds = later[-1]["t1"] - later[0]["t0"]
    assert len(rest) <= 6 * (seconds + 2)  # a line per actor, stage and second, at most
    for key in {(s["actor"], s["stage"]) for s in later}:
        mine = [x for x in rest if (x["actor"], x["stage"]) == key]
        theirs = [s for s in later if (s["actor"], s["stage"]) == key]
        assert min(x["t0"] for x in mine) == min(s["t0"] for s in theirs)
        assert max(x["t1"] for x in mine) == max(s["t1"] for s in theirs)
        assert all(x["t1"] - x["t0"] < 1.0 + 0.003 for x in mine)
    trace_to_parquet(RunDir(str(tmp_path)))
    table = pq.read_table(tmp_path / "trace.parquet")
    assert table.num_rows == len(lines)
    for name in ("actor", "stage", "what", "t0", "t1", "cpu", "n", "busy"):
        assert table.column(name).to_pylist() == [x.get(name) for x in lines], name
    # a damaged line (a writer killed mid-line, appended after): the rows that parse
    with open(path, "a") as fh:
        fh.write('{"actor": "a0", "stage": "comp\n{"actor": "a1", "stage": "write", "what": '
                 '"w", "t0": 1.0, "t1": 2.0}\n')
    trace_to_parquet(RunDir(str(tmp_path)))
    table = pq.read_table(tmp_path / "trace.parquet")
    assert table.num_rows == len(lines) + 1
    assert table.column("t1").to_pylist()[-1] == 2.0


def test_tiles_count_once_by_id_also_beyond_the_plan():
    m = MetricsState(n_items=4, tiles_total=3, pairs_total=6, bound_R=None)
    ev = [{"kind": "tile", "id": i, "actor": "a", "t_start": 0.0, "t_end": 1.0, "pairs": 1}
          for i in (0, 2, 2, 7, 7, 0, 1)]
    m.add(ev)
    assert m.snapshot()["tiles_done"] == 4  # 0, 1, 2 and an id the plan does not have
