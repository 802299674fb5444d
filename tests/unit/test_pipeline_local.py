"""Filter pipelines in this process (the local executor, no Ray): survivors independent of the
order, cutflow and histogram, columnar inputs, dependency errors, the run directory, pair
filters and the Parquet source. The oracle is numpy on the raw columns (tests/pipeline_cases)."""
import json
import os

import numpy as np
import pandas as pd
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pipeline import Filter, Map, PairSource, Pipeline, prefilter
from pairflow.operators.arrays import as_source
from pairflow.operators.histogram import Histogram
from tests.pipeline_cases import data as _data, expected as _expected, ops as _ops


@pytest.fixture
def runs(tmp_path):
    return str(tmp_path / "runs")


def test_local_executor_survivors_cutflow_histogram(runs):
    d = _data(20_000)
    hist = Histogram("x", "x", bins=8, range=(-4, 4))
    res = Pipeline(as_source(d, batch_size=2_000), _ops(5), sinks=[hist]).run(
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
    fixed = Pipeline(as_source(d, batch_size=2_000), _ops(5)).run(
        executor="local", order=["low", "x2", "far", "costly"], runs_root=runs, progress=False)
    assert np.array_equal(fixed.selected["id"], exp)
    assert fixed.summary["distinct_orders"] == 1


def test_columnar_inputs_and_undeclared_dependencies(runs):
    import awkward as ak
    import pyarrow as pa
    d = _data(3_000)
    exp = _expected(d)
    for src in (pd.DataFrame(d), pa.table(d), ak.zip(d)):
        res = Pipeline(as_source(src, batch_size=1_000), _ops(1)).run(
            executor="local", runs_root=runs, progress=False)
        assert np.array_equal(res.selected["id"], exp), type(src)
    # a filter reading a map's column without after= fails in every order, naming the operator
    bad = [Map("x2", lambda b: np.asarray(b["x"]) ** 2), Filter("far", lambda b: b["x2"] > 1)]
    for order in (["x2", "far"], ["far", "x2"]):
        with pytest.raises(PairflowError, match="'far'.*after="):
            Pipeline(as_source(d), bad).run(executor="local", order=order, runs_root=runs,
                                            progress=False)
    with pytest.raises(ValueError, match="'far'.*'nope'"):
        Pipeline(as_source(d), [Filter("far", lambda b: b["x"] > 0, after=["nope"])])
    with pytest.raises(PairflowError, match="one boolean per record"):
        Pipeline(as_source(d), [Filter("f", lambda b: np.asarray(b["x"]))]).run(
            executor="local", runs_root=runs, progress=False)


def test_the_engine_takes_sources_and_names_the_wrapper_for_data():
    with pytest.raises(TypeError, match="as_source"):
        Pipeline(_data(10), _ops(1))


def test_local_run_directory_and_a_failed_run(runs):
    d = _data(4_000)
    res = Pipeline(as_source(d, batch_size=1_000), _ops(1)).run(
        executor="local", runs_root=runs, progress=False, name="loc")
    for name in ("config.yaml", "meta.json", "status.json", "metrics.jsonl", "pipeline.jsonl",
                 "summary.json", "result/cutflow.parquet", "result/cutflow.json"):
        assert os.path.exists(os.path.join(res.run_dir, name)), name
    assert os.path.dirname(res.run_dir) == os.path.join(os.path.abspath(runs), "loc")
    meta = json.load(open(os.path.join(res.run_dir, "meta.json")))
    assert meta["kind"] == "pipeline" and meta["n_batches"] == 4 and meta["executor"] == "local"
    summary = json.load(open(os.path.join(res.run_dir, "summary.json")))
    assert summary["records_selected"] == len(_expected(d))
    snaps = [json.loads(x) for x in open(os.path.join(res.run_dir, "metrics.jsonl"))]
    assert snaps[-1]["batches_done"] == snaps[-1]["batches_total"] == 4
    assert json.load(open(os.path.join(res.run_dir, "status.json")))["state"] == "finished"

    def boom(b):
        raise ZeroDivisionError("bad record")
    with pytest.raises(PairflowError, match=r"operator 'boom' failed on batch 0 .*bad record"):
        Pipeline(as_source(d), [Filter("boom", boom)]).run(
            executor="local", runs_root=runs, progress=False, name="bad")
    (failed,) = os.listdir(os.path.join(runs, "bad"))
    status = json.load(open(os.path.join(runs, "bad", failed, "status.json")))
    assert status["state"] == "failed" and "boom" in status["error"]


def test_pair_filters_over_a_pair_space(runs):
    from pairflow.engine.pairs.space import PairList, Triangle
    sizes = np.array([10, 12, 40, 11, 39])
    ops = [Filter("ratio", lambda b: np.minimum(sizes[b["i"]], sizes[b["j"]])
                  / np.maximum(sizes[b["i"]], sizes[b["j"]]) >= 0.8)]
    pairs, res = prefilter(Triangle(5), ops, batch_size=3, runs_root=runs)
    assert isinstance(pairs, PairList) and pairs.symmetric
    assert pairs.pairs.tolist() == [[0, 1], [0, 3], [1, 3], [2, 4]]
    assert len(PairSource(Triangle(5), 3).partitions()) >= 2


def test_parquet_source_and_reusable_operators(runs, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pairflow.operators.columnar import ParquetSource, at_least, between, derive
    from pairflow.operators.parquet import ParquetSink
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
    from pairflow.engine.errors import InputError
    with pytest.raises(InputError, match="no column"):
        ParquetSource(str(tmp_path / "d.parquet"), columns=["nope"])


class _WorkClock:
    """The operators' clock, a counter of declared work: each operator below advances it by
    its cost per record times the records it is given, so the costs the pipeline measures are
    those, whatever else the machine runs."""

    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def spend(self, batch, per_record: float) -> None:
        self.t += per_record * len(np.asarray(batch["y"]))


def _counted_ops(clock: _WorkClock):
    """tests/pipeline_cases.ops with declared costs: costly 100 us a record and passing all,
    the others 0.1 us."""
    def run(per_record, f):
        def op(b):
            clock.spend(b, per_record)
            return f(b)
        return op
    return [Filter("costly", run(1e-4, lambda b: np.ones(len(np.asarray(b["y"])), bool))),
            Map("x2", run(1e-7, lambda b: np.asarray(b["x"]) ** 2)),
            Filter("far", run(1e-7, lambda b: b["x2"] > 1.0), after=["x2"]),
            Filter("low", run(1e-7, lambda b: b["y"] < 0.25))]


def test_the_adaptive_order_follows_the_measured_costs(runs):
    """On the counted clock: the costly operator, written first and passing everything, never
    runs first (the first batches order themselves from their own sample) and ends last; by
    hand (ranks c / (1 - p)): low (0.1 / 0.75 us), then the map and the filter it unlocks
    ((0.1 + 0.1) / (1 - 0.32) us), then costly (it filters nothing)."""
    d = _data(60_000)
    clock = _WorkClock()
    res = Pipeline(as_source(d, batch_size=4_000), _counted_ops(clock)).run(
        executor="local", runs_root=runs, progress=False, replan_every=1, op_clock=clock)
    assert np.array_equal(res.selected["id"], _expected(d))
    assert res.summary["final_order"] == ["low", "x2", "far", "costly"]
    assert all(o[0] != "costly" for o in res.orders), res.orders
    cut = res.cutflow.set_index("op")
    assert cut.loc["costly", "records_in"] < 0.5 * len(d["id"])  # it ran late on most batches
    assert cut.loc["costly", "sample_records_in"] > 0             # and kept being measured
