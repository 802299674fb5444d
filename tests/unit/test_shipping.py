"""Nothing shared, without Ray: sinks encoded in one place and stored in another give the same
bytes and journal as writing in place; the driver's ResultWriter journals what it stores; the
metrics' outbox; nodes without CPUs get no device actors; fetch answers provided URLs and
counts reads; memory:// inputs are refused."""
import json
import os
import pickle

import numpy as np
import pytest

from pairflow.engine.errors import InputError, PairflowError
from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pairs.sinks.shipped import ResultWriter, ShippedJournal, check_sinks
from pairflow.engine.pairs.sinks import DenseMatrix, Sink, SinkContext, Threshold, TopK
from pairflow.engine.pairs.plan.sizing import plan_nodes
from pairflow.engine.pairs.space import Triangle, leaves
from pairflow.engine.run import io
from pairflow.engine.run.metrics import Metrics
from pairflow.engine.run.rundir import RunDir
from pairflow.engine.run.shipping import check_reachable, local_path


def _ctx(out, n, leaf):
    keys = [f"k{i}" for i in range(n)]
    return SinkContext(str(out), Triangle(n), leaf, keys, keys, {"value": "float64"})


def _sinks():
    return [DenseMatrix(diagonal=1.0), TopK(2), Threshold(0.5)]


def test_encoded_then_stored_by_the_driver_equals_written_in_place(tmp_path):
    n, leaf = 11, 3
    rng = np.random.default_rng(1)
    v = rng.random((n, n))
    v = np.triu(v, 1) + np.triu(v, 1).T
    tiles = leaves(Triangle(n), leaf)
    # in place, as a device actor that sees the run directory writes
    here = _sinks()
    for s in here:
        s.open(_ctx(tmp_path / "here", n, leaf))
    journal_here = []
    for t in tiles:
        mask = Triangle(n).mask(t.r0, t.r1, t.c0, t.c1)
        for s in here:
            journal_here.append([t.id, s.write_tile(t, {"value": v[t.r0:t.r1, t.c0:t.c1]}, mask)])
    # opened by the driver, encoded by "workers" (copies of the opened sinks, as Ray ships
    # them, which never touch the output), shipped through the scheduler's ShippedJournal,
    # stored by the driver's ResultWriter
    there = _sinks()
    run = RunDir(str(tmp_path / "there")).create()
    for s in there:
        s.open(_ctx(run.result_dir, n, leaf))
    workers = pickle.loads(pickle.dumps(there))
    shipped = ShippedJournal()
    for t in reversed(tiles):  # any order
        mask = Triangle(n).mask(t.r0, t.r1, t.c0, t.c1)
        shipped.append(t.id, "a", [(s.name, s.encode_tile(t, {"value": v[t.r0:t.r1, t.c0:t.c1]},
                                                          mask)) for s in workers])
    writer = ResultWriter(run, there, tiles, run.file("journal.jsonl"))
    writer.write({"shipped": shipped.drain(), "files": {"tiles.jsonl": [{"id": 1}]}})
    assert shipped.drain() == []
    writer.close()
    with open(run.file("journal.jsonl")) as fh:
        lines = [json.loads(l) for l in fh]
    assert len(lines) == len(tiles) * 3  # one entry per sink (dense: one field)
    assert all(s.verify(e) for e in lines for s in there if s.name == e["sink"])
    # the same CRCs as the in-place writes
    crc_here = sorted((t, e["sink"], e["crc32"]) for t, es in journal_here for e in es)
    crc_there = sorted((e["tile"], e["sink"], e["crc32"]) for e in lines)
    assert crc_here == crc_there
    with open(run.file("tiles.jsonl")) as fh:
        assert [json.loads(l) for l in fh] == [{"id": 1}]
    import pandas as pd
    import zarr
    a, b = here[0].finalize(), there[0].finalize()
    assert np.array_equal(zarr.open_group(a, mode="r")["value"][...],
                          zarr.open_group(b, mode="r")["value"][...], equal_nan=True)
    for x, y in zip(here[1:], there[1:]):
        assert pd.read_parquet(x.finalize()).equals(pd.read_parquet(y.finalize()))


def test_a_sink_that_only_writes_in_place_is_refused_when_nothing_is_shared():
    class InPlace(Sink):
        name = "inplace"

        def write_tile(self, tile, fields, mask):
            return []
    check_sinks(_sinks())
    with pytest.raises(PairflowError, match="inplace.*shared_fs"):
        check_sinks([InPlace()])


def test_metrics_outbox_keeps_records_for_the_driver(tmp_path):
    m = Metrics(str(tmp_path / "nowhere"), n_items=2, tiles_total=1, pairs_total=1,
                bound_R=None, outbox=True)
    m.record([{"kind": "span", "actor": "a", "stage": "compare", "what": "x", "t0": 0, "t1": 1},
              {"kind": "tile", "id": 0, "actor": "a", "t_start": 0, "t_end": 1, "pairs": 1}])
    m.close()
    files = m.drain()
    assert set(files) == {"trace.jsonl", "tiles.jsonl", "metrics.jsonl"}
    assert files["tiles.jsonl"][0]["id"] == 0 and m.drain() == {}
    assert not os.path.exists(tmp_path / "nowhere"), "an outbox writes nothing"


def _node(cpus, gpus=0, head=False):
    return {"node_id": f"n{cpus}{gpus}{head}", "address": "10.0.0.1", "head": head,
            "cpus": cpus, "gpus": gpus, "object_store": 2**30}


def test_a_node_without_cpu_or_gpu_gets_no_device_actor():
    plan = plan_nodes([_node(0, head=True), _node(1), _node(2)], AllPairsConfig())
    assert [p.node["cpus"] for p in plan] == [1, 2] and [p.actors for p in plan] == [1, 2]
    gpu_head = plan_nodes([_node(0, 2, head=True)], AllPairsConfig())
    assert gpu_head[0].device == "cuda" and gpu_head[0].actors == 2
    with pytest.raises(PairflowError, match="no node"):
        plan_nodes([_node(0, head=True)], AllPairsConfig())


def test_fetch_answers_provided_urls_and_counts_reads(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"hello")
    io.io_stats(reset=True)
    assert io.fetch(str(path)) == b"hello"
    io.provide("nowhere://x", lambda: b"shipped bytes")
    assert io.fetch("nowhere://x") == b"shipped bytes"
    stats = io.io_stats(reset=True)
    assert stats == {"file": {"gets": 1, "bytes": 5}, "shipped": {"gets": 1, "bytes": 13}}


def test_memory_urls_are_refused_and_local_paths_recognised():
    with pytest.raises(InputError, match="memory://.*driver's process only"):
        check_reachable(["/data/a.fa", "memory://a.fa"])
    check_reachable(["/data/a.fa", "s3://b/a.fa", "https://x/a.fa"])
    assert local_path("/data/a.fa") == "/data/a.fa"
    assert local_path("file:///data/a.fa") == "/data/a.fa"
    assert local_path("s3://b/a.fa") is None


def test_liveness_limit_follows_the_tile_costs_not_a_fixed_floor():
    from pairflow.engine.pairs.plan.sizing import liveness
    cfg = AllPairsConfig()
    # small tiles: beats at the 0.25 s floor, silent after 10 beats but never under 5 s
    assert liveness([0.01] * 10, cfg) == (0.25, 5.0)
    # typical 1 s tiles: beat each second, 10 s of silence
    assert liveness([1.0] * 9 + [2.0], cfg) == (1.0, 10.0)
    # a very costly tile: a quarter of it (a live actor's loop may be busy around it)
    assert liveness([1.0] * 9 + [400.0], cfg) == (1.0, 100.0)
    # long typical tiles: beats capped at 2 s
    assert liveness([60.0] * 5, cfg) == (2.0, 20.0)
    assert liveness([1.0], AllPairsConfig(heartbeat_s=0.5, silent_after_s=3.0)) == (0.5, 3.0)
    assert liveness([], cfg) == (0.25, 5.0)
