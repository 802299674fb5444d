"""Filter pipelines: survivors independent of order, adaptive reordering, the run directory,
Dask in and out, DS/DP balancing, errors, and pair filters in front of the all-pairs engine."""
import json
import os
import time

import numpy as np
import pandas as pd
import pytest

from engine.errors import PairflowError
from tests.conftest import need
from engine.pipeline import (Batch, DaskSource, Filter, Histogram, Map, ParquetSink, Pipeline,
                             PairSource, Source, prefilter)


def _by_value():
    """Ray workers cannot import this test module: ship its functions and classes by value."""
    import sys
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


_by_value()


def _data(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    return {"id": np.arange(n), "x": rng.normal(size=n), "y": rng.uniform(size=n),
            "z": rng.uniform(size=n)}


def _spin(b, reps):
    """Real CPU work proportional to the records (a costly operator)."""
    v = np.asarray(b["z"], float)
    for _ in range(reps):
        v = np.sqrt(v * v + 1.0) - 0.5
    return v


def _ops(reps=40):
    return [
        Filter("costly", lambda b: _spin(b, reps) > -1e9),     # expensive, passes everything
        Map("x2", lambda b: np.asarray(b["x"]) ** 2),
        Filter("far", lambda b: b["x2"] > 1.0, after=["x2"]),  # cheap, ~32% pass
        Filter("low", lambda b: b["y"] < 0.25),                # cheap, 25% pass
    ]


def _expected(d):
    return d["id"][(d["x"] ** 2 > 1.0) & (d["y"] < 0.25)]


def test_local_executor_survivors_cutflow_histogram(runs):
    d = _data(20_000)
    hist = Histogram("x", "x", bins=8, range=(-4, 4))
    res = Pipeline(d, _ops(5), sinks=[hist], batch_size=2_000).run(
        executor="local", runs_root=runs, progress=False)
    exp = _expected(d)
    assert np.array_equal(res.selected["id"], exp)
    assert res.n_selected == len(exp) and res.summary["records_in"] == 20_000
    counts, _ = np.histogram(d["x"][np.isin(d["id"], exp)], np.linspace(-4, 4, 9))
    assert res.histograms["x"]["counts"] == counts.tolist()
    cut = res.cutflow.set_index("op")
    assert cut.loc["x2", "kind"] == "map" and list(cut.loc["far", "after"]) == ["x2"]
    assert res.to_pandas()["id"].tolist() == exp.tolist()
    # a fixed order gives the same survivors, and every order the run used is a valid one
    fixed = Pipeline(d, _ops(5), batch_size=2_000).run(
        executor="local", order=["low", "x2", "far", "costly"], runs_root=runs, progress=False)
    assert np.array_equal(fixed.selected["id"], exp)
    assert fixed.summary["distinct_orders"] == 1


def test_columnar_inputs_and_undeclared_dependencies(runs):
    import awkward as ak
    import pyarrow as pa
    d = _data(3_000)
    exp = _expected(d)
    for src in (pd.DataFrame(d), pa.table(d), ak.zip(d)):
        res = Pipeline(src, _ops(1), batch_size=1_000).run(executor="local", runs_root=runs,
                                                            progress=False)
        assert np.array_equal(res.selected["id"], exp), type(src)
    # a filter reading a map's column without after= fails in every order, naming the operator
    bad = [Map("x2", lambda b: np.asarray(b["x"]) ** 2), Filter("far", lambda b: b["x2"] > 1)]
    for order in (["x2", "far"], ["far", "x2"]):
        with pytest.raises(PairflowError, match="'far'.*after="):
            Pipeline(d, bad).run(executor="local", order=order, runs_root=runs, progress=False)
    with pytest.raises(ValueError, match="'far'.*'nope'"):
        Pipeline(d, [Filter("far", lambda b: b["x"] > 0, after=["nope"])])
    with pytest.raises(PairflowError, match="one boolean per record"):
        Pipeline(d, [Filter("f", lambda b: np.asarray(b["x"]))]).run(
            executor="local", runs_root=runs, progress=False)


def test_ray_pipeline_reorders_and_writes_its_run_directory(ray_local, runs):
    """The order comes from measured costs, so it depends on timing: 20/20 passed with the other
    core busy: `taskset -c 1 python -c 'while True: pass' &`, then `pytest -p no:cacheprovider
    -q --count=20` on this test and test_ds_dp_balance_follows_measured_costs (pytest-repeat;
    2026-11-24, the machine also running other developers' tests, load average 5 to 28)."""
    d = _data(120_000)
    res = Pipeline(d, _ops(60), sinks=[ParquetSink()], batch_size=4_000).run(
        runs_root=runs, progress=False, replan_every=1, slots=3)
    exp = _expected(d)
    assert np.array_equal(res.selected["id"], exp)
    final = res.summary["final_order"]
    assert final[-1] == "costly" and final.index("x2") < final.index("far"), final
    # the first batches chose their order from their own sample (no stats yet): the costly
    # operator written first never ran first
    assert all(o[0] != "costly" for o in res.orders), res.orders
    assert 3 <= res.summary["replans"] < 30  # re-planned, less often while the order held
    cut = res.cutflow.set_index("op")
    assert cut.loc["costly", "records_in"] < 0.5 * len(d["id"])  # it ran late on most batches
    assert cut.loc["costly", "sample_records_in"] > 0             # and kept being measured
    run = res.run_dir
    for name in ("config.yaml", "meta.json", "status.json", "metrics.jsonl", "pipeline.jsonl",
                 "summary.json", "result/cutflow.parquet", "result/selected.parquet"):
        assert os.path.exists(os.path.join(run, name)), name
    meta = json.load(open(os.path.join(run, "meta.json")))
    assert meta["kind"] == "pipeline" and meta["written_order"] == ["costly", "x2", "far", "low"]
    plans = [json.loads(x) for x in open(os.path.join(run, "pipeline.jsonl"))]
    assert {"t", "order", "ops"} <= set(plans[-1])
    assert set(plans[-1]["ops"]["far"]) >= {"cost_s", "pass_rate", "records_in"}
    assert plans[-1]["ops"]["low"]["pass_rate"] == pytest.approx(0.25, abs=0.08)
    snaps = [json.loads(x) for x in open(os.path.join(run, "metrics.jsonl"))]
    assert snaps[-1]["batches_done"] == snaps[-1]["batches_total"] == 30
    assert json.load(open(os.path.join(run, "status.json")))["state"] == "finished"
    assert pd.read_parquet(res.outputs["parquet"])["id"].sort_values().tolist() == exp.tolist()


def test_dask_dataframe_and_bag_in_and_out_on_ray(ray_local, runs):
    import dask.bag as db
    import dask.dataframe as dd
    from ray.util.dask import ray_dask_get
    d = _data(20_000)
    ddf = dd.from_pandas(pd.DataFrame(d), npartitions=5)
    res = Pipeline(ddf, _ops(1)).run(runs_root=runs, progress=False)
    assert res.summary["batches"] == 5
    out = res.to_dask()
    assert hasattr(out, "npartitions")
    got = out.compute(scheduler=ray_dask_get)
    want = pd.DataFrame(d)
    want = want[(want.x ** 2 > 1) & (want.y < 0.25)]
    assert got["id"].sort_values().tolist() == want["id"].tolist()
    bag = db.from_sequence([{"id": i, "x": float(d["x"][i]), "y": float(d["y"][i]),
                             "z": float(d["z"][i])} for i in range(2_000)], npartitions=4)
    res2 = Pipeline(DaskSource(bag), _ops(1)).run(runs_root=runs, progress=False)
    assert res2.selected["id"].tolist() == [i for i in _expected(d) if i < 2_000]


class SlowSource(Source):
    """Batches that cost ``read_s`` of CPU to decode."""

    def __init__(self, n_batches, size, read_s):
        self.n, self.size, self.read_s = n_batches, size, read_s

    def partitions(self):
        return list(range(self.n))

    def read(self, i):
        t = time.thread_time()
        while time.thread_time() - t < self.read_s:
            pass
        rng = np.random.default_rng(i)
        return {"id": np.arange(i * self.size, (i + 1) * self.size),
                "x": rng.normal(size=self.size), "y": rng.uniform(size=self.size),
                "z": rng.uniform(size=self.size)}


def test_ds_dp_balance_follows_measured_costs(ray_local, runs):
    """The DS/DP split comes from measured read and process times: 20/20 passed with the other
    core busy (command in test_ray_pipeline_reorders_and_writes_its_run_directory)."""
    ops = [Filter("low", lambda b: b["y"] < 0.5)]
    res = Pipeline(SlowSource(24, 500, 0.03), ops).run(
        runs_root=runs, progress=False, slots=3, checkpoint=2, order="written")
    bal = res.summary["balance"]
    assert bal["final_ds"] == 2 and bal["final_dp"] == 1, bal  # reading is the slow side
    assert bal["checkpoints"][0]["changed"]
    intervals = [c["interval"] for c in bal["checkpoints"] if not c["changed"]]
    assert intervals == sorted(intervals) and intervals[-1] > 2  # doubling while stable
    fixed = Pipeline(SlowSource(6, 500, 0.0), ops).run(
        runs_root=runs, progress=False, slots=3, ds_slots=1, order="written")
    assert fixed.summary["balance"]["final_ds"] == 1
    assert not fixed.summary["balance"]["checkpoints"]


def test_operator_failure_names_the_operator_and_batch(ray_local, runs):
    def boom(b):
        if b["id"][0] >= 4_000:
            raise ZeroDivisionError("bad record")
        return b["y"] < 2
    p = Pipeline(_data(8_000), [Filter("boom", boom)], batch_size=2_000)
    with pytest.raises(PairflowError, match=r"operator 'boom' failed on batch [23] .*bad record"):
        p.run(runs_root=runs, progress=False)
    latest = sorted(os.listdir(os.path.join(runs, "pipeline")))[-1]
    status = json.load(open(os.path.join(runs, "pipeline", latest, "status.json")))
    assert status["state"] == "failed" and "boom" in status["error"]


def test_pair_filters_over_a_pair_space(runs):
    from engine.pairs.space import PairList, Triangle
    sizes = np.array([10, 12, 40, 11, 39])
    ops = [Filter("ratio", lambda b: np.minimum(sizes[b["i"]], sizes[b["j"]])
                  / np.maximum(sizes[b["i"]], sizes[b["j"]]) >= 0.8)]
    pairs, res = prefilter(Triangle(5), ops, batch_size=3, runs_root=runs)
    assert isinstance(pairs, PairList) and pairs.symmetric
    assert pairs.pairs.tolist() == [[0, 1], [0, 3], [1, 3], [2, 4]]
    assert len(PairSource(Triangle(5), 3).partitions()) >= 2


@pytest.mark.slow
def test_threshold_jaccard_with_sketch_prefilter_equals_a_full_exact_run(ray_local, runs,
                                                                         tmp_path):
    from apps.jaccard import JaccardApp
    from apps.jaccard_filtered import threshold_jaccard
    from engine.pairs.driver import allpairs
    from engine.pairs.sinks import Threshold
    from tests.oracles import KLEBSIELLA
    need(KLEBSIELLA)
    t = 0.15
    full = allpairs(app=JaccardApp([KLEBSIELLA], item="record"), sink=Threshold(t, "similarity"),
                    wait=True, progress=False, runs_root=runs)
    filt = threshold_jaccard([KLEBSIELLA], t=t, item="record", runs_root=runs)
    a, b = filt.edges, full.edges
    assert len(b) > 50  # a real result: over a hundred pairs of the 13,041 reach t
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    pre = filt.summary["prefilter"]
    assert pre["pairs_total"] == 162 * 161 // 2
    assert pre["skipped"] > 0.8 * pre["pairs_total"]  # exact work skipped for most pairs
    assert filt.summary["pairs_total"] == pre["candidates"]
    # both pair filters were measured by the pipeline engine (at t = 0.15 the length ratio of
    # these similar-sized loci rejects nothing; the sketch test does the work)
    assert pre["ops"]["sketch"]["records_in"] == pre["pairs_total"]
    assert pre["ops"]["sketch"]["passed"] == pre["candidates"]


def test_parquet_source_and_reusable_operators(runs, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from operators.columnar import ParquetSource, at_least, between, derive
    d = _data(5_000)
    pq.write_table(pa.table(d), str(tmp_path / "d.parquet"), row_group_size=1_000)
    src = ParquetSource(str(tmp_path / "d.parquet"), columns=["id", "x", "y"])
    assert len(src.partitions()) == 5
    ops = [derive("x2", lambda x: np.asarray(x) ** 2, ["x"]),
           at_least("far", "x2", 1.0 + 1e-12, after=["x2"]), between("low", "y", -1, 0.25)]
    res = Pipeline(src, ops, sinks=[ParquetSink("out.parquet")]).run(
        executor="local", runs_root=runs, progress=False)
    exp = d["id"][(d["x"] ** 2 >= 1.0 + 1e-12) & (d["y"] < 0.25)]
    assert np.array_equal(res.selected["id"], exp)
    again = Pipeline(ParquetSource(res.outputs["parquet"]), []).run(
        executor="local", runs_root=runs, progress=False)  # a sink's output reads back
    assert sorted(again.selected["id"].tolist()) == exp.tolist()
    from engine.errors import InputError
    with pytest.raises(InputError, match="no column"):
        ParquetSource(str(tmp_path / "d.parquet"), columns=["nope"])
