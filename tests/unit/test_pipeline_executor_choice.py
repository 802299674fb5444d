"""A pipeline's executor follows the rule all-pairs runs and farms follow (one rule, in
engine/run/executor_choice.py): forced values win, a named cluster or a Ray already up means
Ray, an unknown size means Ray, else the work estimate against ``inprocess_max_s``. Pure: an
estimate in, an executor out (the estimate's arithmetic checked by hand)."""
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pipeline.placement import (pipeline_executor, records_total,
                                                 work_estimate_s)
from pairflow.engine.pipeline.run import PipelineConfig
from pairflow.engine.run.executor_choice import INPROCESS_MAX_S
from pairflow.operators.arrays import as_source


def test_one_threshold_and_auto_by_default():
    assert PipelineConfig().executor == "auto"
    assert PipelineConfig().inprocess_max_s == AllPairsConfig().inprocess_max_s == INPROCESS_MAX_S


@pytest.mark.parametrize("estimate, want", [(0.2, "local"), (20.0, "local"), (20.01, "ray"),
                                            (None, "ray")])
def test_auto_follows_the_estimate(estimate, want):
    assert pipeline_executor("auto", None, estimate, 20.0) == want


def test_a_cluster_or_a_ray_up_means_ray_for_auto():
    assert pipeline_executor("auto", "10.0.0.1:6379", 0.1, 20.0) == "ray"
    assert pipeline_executor("auto", None, 0.1, 20.0, ray_up=True) == "ray"


def test_forced_values_win():
    for forced in ("local", "inprocess"):
        assert pipeline_executor(forced, None, 1e9, 20.0) == "local"
        assert pipeline_executor(forced, None, None, 20.0, ray_up=True) == "local"
    assert pipeline_executor("ray", None, 0.0, 20.0) == "ray"
    with pytest.raises(PairflowError, match="cluster is named"):
        pipeline_executor("local", "10.0.0.1:6379", 0.1, 20.0)
    with pytest.raises(ValueError, match="executor must be"):
        pipeline_executor("threads", None, 0.1, 20.0)


def test_estimate_arithmetic():
    # 1 s to read 1,000 records, 0.05 s fixed per batch, 1 ms per record, 10,000 records in
    # 10 batches on 4 CPUs: (10 + 0.5 + 10) / 4
    assert work_estimate_s(1.0, 1_000, 0.05, 1e-3, 10_000, 10, 4) == pytest.approx(20.5 / 4)
    assert work_estimate_s(1.0, 1_000, 0.05, 1e-3, None, 10, 4) is None


def test_records_total_when_the_source_says_or_holds_one_batch():
    import numpy as np

    class Unsized:
        def partitions(self):
            return [0, 1]

        def read(self, spec):
            return {"x": np.arange(3)}
    src = as_source({"x": np.arange(25)}, batch_size=10)
    assert records_total(src, src.partitions(), 10) == 25
    assert records_total(Unsized(), [0, 1], 3) is None
    assert records_total(Unsized(), [0], 3) == 3


def test_one_batch_runs_in_process_under_auto_only():
    assert pipeline_executor("auto", None, None, 20.0, n_batches=1) == "local"
    assert pipeline_executor("auto", None, 1e9, 20.0, n_batches=1) == "local"
    assert pipeline_executor("auto", None, None, 20.0, n_batches=2) == "ray"
    assert pipeline_executor("auto", None, None, 20.0, ray_up=True, n_batches=1) == "ray"
    assert pipeline_executor("auto", "10.0.0.1:6379", None, 20.0, n_batches=1) == "ray"
    assert pipeline_executor("ray", None, None, 20.0, n_batches=1) == "ray"
