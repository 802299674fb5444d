"""Batch size from the work (engine/pipeline/sizing.py), the local executor's worker threads and
the allocator setting (memory.py), without Ray.

The rule is checked on numbers worked by hand; the mechanism against oracles that do not import
it: the survivors against numpy on the raw columns (tests/pipeline_cases), a re-cut ROOT source
against uproot reading the file directly, kept memory against the kernel's own count of page
faults."""
import json
import os
import resource

import numpy as np
import pytest

from pairflow.engine.pipeline import Pipeline
from pairflow.engine.pipeline.local import local_threads
from pairflow.engine.pipeline.memory import keep_freed_memory
from pairflow.engine.pipeline.sizing import BatchSizer, Grouped, resized
from pairflow.operators.arrays import as_source
from tests.pipeline_cases import data as _data, expected as _expected, ops as _ops


@pytest.fixture
def runs(tmp_path):
    return str(tmp_path / "runs")


def test_the_rule_on_hand_numbers():
    s = BatchSizer()  # fixed share 5 %, 4 batches per worker, 8 batches at least, 256 MiB
    # 0.2 s fixed per batch, 20 us per record: 0.2 / (0.05 * 2e-5) = 200,000 records wanted;
    # 1,000,000 records on 2 workers: at most 1e6 / max(8, 2 * 4) = 125,000
    assert s.records(2_421, 1_000_000, 0.2, 2e-5, 200.0, 2) == 125_000
    # with 16 workers the parallel bound is 1e6 / 64 = 15,625
    assert s.records(2_421, 1_000_000, 0.2, 2e-5, 200.0, 16) == 15_625
    # cheap fixed costs: 0.01 / (0.05 * 2e-5) = 10,000 wanted, below both bounds
    assert s.records(2_421, 1_000_000, 0.01, 2e-5, 200.0, 2) == 10_000
    # memory: 256 MiB / 4 KiB per record = 65,536 records
    assert s.records(2_421, 1_000_000, 0.2, 2e-5, 4096.0, 2) == 65_536
    # never below the source's own batches, nor anything when the size is unknown or small
    assert s.records(50_000, 1_000_000, 0.0, 2e-5, 200.0, 2) == 50_000
    assert s.records(2_421, None, 0.2, 2e-5, 200.0, 2) == 2_421
    assert s.records(2_421, 2_421, 0.2, 2e-5, 200.0, 2) == 2_421
    # merged batches: whole multiples of the source's
    assert s.merge(2_421, 1_000_000, 0.2, 2e-5, 200.0, 2) == 125_000 // 2_421
    assert BatchSizer(min_batches=1, per_worker=1).records(10, 1_000, 1.0, 1e-3, 0, 1) == 1_000
    with pytest.raises(ValueError):
        BatchSizer(fixed_share=0.0)


def test_grouped_source_reads_consecutive_batches_as_one():
    d = _data(10_000)
    src = as_source(d, batch_size=1_000)
    g = Grouped(src, src.partitions(), 3)
    parts = g.partitions()
    assert len(parts) == 4 and [len(g.read(p)) for p in parts] == [3_000, 3_000, 3_000, 1_000]
    ids = np.concatenate([np.asarray(g.read(p)["id"]) for p in parts])
    assert np.array_equal(ids, d["id"])
    assert resized(src, src.partitions(), 1_000, 1_999) is src  # nothing to merge


def test_auto_batches_select_what_the_source_batches_select(runs):
    d = _data(60_000)
    res = Pipeline(as_source(d, batch_size=500), _ops(5)).run(
        executor="local", runs_root=runs, progress=False, threads=2)
    assert np.array_equal(res.selected["id"], _expected(d))
    with open(os.path.join(res.run_dir, "meta.json")) as f:
        sizing = json.load(f)["batch_sizing"]
    assert sizing["source_records"] == 500 and sizing["records"] >= 500
    k = sizing["records"] // 500 if sizing["merged"] else 1
    assert res.summary["batches"] == -(-120 // k)
    kept = Pipeline(as_source(d, batch_size=500), _ops(5)).run(
        executor="local", runs_root=runs, progress=False, batch="source", threads=2)
    assert np.array_equal(kept.selected["id"], _expected(d)) and kept.summary["batches"] == 120
    with pytest.raises(ValueError, match="batch must be"):
        Pipeline(as_source(d), _ops(5)).run(executor="local", batch=1000, runs_root=runs)


def test_worker_threads():
    assert local_threads(None, "cpu", 1) == 1
    assert local_threads(4, "cpu", 10) == 4 and local_threads(4, "wall", 3) == 3
    assert local_threads(4, lambda: 0.0, 10) == 1  # one clock for the whole process


def test_root_source_recut_holds_the_same_events():
    import awkward as ak
    import uproot

    from pairflow.apps.hep import BRANCHES, data_file
    from pairflow.operators.root import RootSource
    path = data_file("uproot-HZZ.root")
    with uproot.open(path) as f:
        want = f["events"].arrays(["Jet_Px", "MET_px"], library="ak")
    src = RootSource([path], branches=["Jet_Px", "MET_px"], step_size=1_000, repeat=3)
    big = src.rebatch(5_000)
    assert len(src.partitions()) == 9 and len(big.partitions()) == 2  # 2 + 1 of 2,421
    assert [sum(p[2] - p[1] for p in spec) for spec in big.partitions()] == [4_842, 2_421]
    got = [big.read(spec) for spec in big.partitions()]
    event = np.concatenate([np.asarray(b["event"]) for b in got])
    assert np.array_equal(event, np.arange(3 * len(want)))
    met = np.concatenate([np.asarray(b["MET_px"]) for b in got])
    assert np.array_equal(met, np.tile(ak.to_numpy(want["MET_px"]), 3))
    jets = ak.concatenate([b["Jet_Px"] for b in got])
    assert ak.all(ak.num(jets) == ak.concatenate([ak.num(want["Jet_Px"])] * 3))
    assert BRANCHES  # the app's branches exist in the same file (checked by the app's tests)


def _faults_of_two_allocations(mb: int) -> int:
    """Minor page faults of the second of two allocate-zero-free rounds of ``mb`` MiB (a
    bytearray: plain malloc, none of numpy's huge-page advice)."""
    a = bytearray(mb << 20)
    del a
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    b = bytearray(mb << 20)
    del b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_kept_memory_is_reused_without_faulting_it_in_again():
    pages = (64 << 20) // 4096
    plain = _faults_of_two_allocations(64)
    with keep_freed_memory() as ok:
        assert ok  # glibc: the machines this project runs on
        kept = _faults_of_two_allocations(64)
    assert plain > pages // 4   # the default: a fresh mmap, faulted in again
    assert kept < pages // 20   # kept: the pages the first round freed
