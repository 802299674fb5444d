"""Filter pipelines on Ray: adaptive reordering, the run directory, Dask in and out, DS/DP
balancing, errors, and pair filters in front of the all-pairs engine. What runs without Ray is in
tests/unit/test_pipeline_local.py; the shared pipeline and its numpy oracle in
tests/pipeline_cases.py."""
import json
import os
import time

import numpy as np
import pandas as pd
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pipeline import Filter, Pipeline, Source
from pairflow.engine.pipeline.ordering import Backoff, DSDPBalancer, OrderPolicy
from pairflow.operators.arrays import as_source
from pairflow.operators.dask import DaskSource
from pairflow.operators.parquet import ParquetSink
from tests import pipeline_cases
from tests.pipeline_cases import data as _data, expected as _expected, ops as _ops
from tests.conftest import need


def _by_value():
    """Ray workers cannot import the test modules: ship their functions and classes by value."""
    import sys
    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(pipeline_cases)


_by_value()


def test_ray_pipeline_reorders_and_writes_its_run_directory(ray_local, runs):
    """The order comes from measured costs, so which order the run ends on depends on timing;
    that the policy puts the costly operator last on such costs is
    tests/unit/test_pipeline_local.py's, on a counted clock. Here, whatever was measured: every
    re-plan logged is the policy's order for the stats logged with it, and the re-plans come
    when the back-off says (sooner after a change, twice as late while the order holds)."""
    d = _data(120_000)
    res = Pipeline(as_source(d, batch_size=4_000), _ops(60), sinks=[ParquetSink()]).run(
        runs_root=runs, progress=False, replan_every=1, slots=3, batch="source")  # 30 batches
    exp = _expected(d)
    assert np.array_equal(res.selected["id"], exp)
    cut = res.cutflow.set_index("op")
    assert cut.loc["costly", "sample_records_in"] > 0  # every operator kept being measured
    run = res.run_dir
    for name in ("config.yaml", "meta.json", "status.json", "metrics.jsonl", "pipeline.jsonl",
                 "summary.json", "result/cutflow.parquet", "result/selected.parquet"):
        assert os.path.exists(os.path.join(run, name)), name
    meta = json.load(open(os.path.join(run, "meta.json")))
    assert meta["kind"] == "pipeline" and meta["written_order"] == ["costly", "x2", "far", "low"]
    plans = [json.loads(x) for x in open(os.path.join(run, "pipeline.jsonl"))]
    assert {"t", "order", "ops"} <= set(plans[-1])
    policy, due = OrderPolicy([o.spec for o in _ops(60)]), Backoff(1, 16, start=1)
    previous = plans[0]["order"]  # the first line is the run's start, the last its end
    for line in plans[1:-1]:
        assert line["batch"] == due.next_at, (line["batch"], due.next_at)
        stats = {n: (v["cost_s"], v["pass_rate"]) for n, v in line["ops"].items()}
        assert line["order"] == policy.order(stats), line
        assert line["changed"] == (line["order"] != previous)
        due.update(line["changed"], line["batch"])
        previous = line["order"]
    assert due.next_at > 30 and res.summary["replans"] == len(plans)
    assert res.summary["final_order"] == plans[-1]["order"]
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
    res = Pipeline(as_source(ddf), _ops(1)).run(runs_root=runs, progress=False)
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
    """The DS/DP split comes from measured read and process times, so where it ends depends
    on timing (the rule, on given costs: tests/unit/test_ordering.py's balancer tests). Here,
    whatever was measured: each checkpoint comes when the back-off says and decides what the
    balancer's rule decides on the costs it logged, and the run ends on the last split."""
    ops = [Filter("low", lambda b: b["y"] < 0.5)]
    res = Pipeline(SlowSource(24, 500, 0.03), ops).run(
        runs_root=runs, progress=False, slots=3, checkpoint=2, order="written")
    bal = res.summary["balance"]
    assert bal["checkpoints"], bal
    rule = DSDPBalancer(slots=3, cores=res.summary["cpus"], interval0=2, max_interval=64)
    for c in bal["checkpoints"]:
        assert c["batches"] == rule.next_at, (c, rule.next_at)
        rule.checkpoint(c["ds_cost_s"], c["dp_cost_s"], c["batches"])
        assert c == rule.history[-1]
    assert (bal["final_ds"], bal["final_dp"]) == (rule.n_ds, rule.n_dp)
    fixed = Pipeline(SlowSource(6, 500, 0.0), ops).run(
        runs_root=runs, progress=False, slots=3, ds_slots=1, order="written")
    assert fixed.summary["balance"]["final_ds"] == 1
    assert not fixed.summary["balance"]["checkpoints"]


def test_operator_failure_names_the_operator_and_batch(ray_local, runs):
    def boom(b):
        if b["id"][0] >= 4_000:
            raise ZeroDivisionError("bad record")
        return b["y"] < 2
    p = Pipeline(as_source(_data(8_000), batch_size=2_000), [Filter("boom", boom)])
    with pytest.raises(PairflowError, match=r"operator 'boom' failed on batch [23] .*bad record"):
        p.run(runs_root=runs, progress=False)
    latest = sorted(os.listdir(os.path.join(runs, "pipeline")))[-1]
    status = json.load(open(os.path.join(runs, "pipeline", latest, "status.json")))
    assert status["state"] == "failed" and "boom" in status["error"]


@pytest.mark.slow
def test_threshold_jaccard_with_sketch_prefilter_equals_a_full_exact_run(ray_local, runs,
                                                                         tmp_path):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.apps.jaccard_filtered import threshold_jaccard
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import Threshold
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
