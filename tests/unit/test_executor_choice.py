"""Which executor a run gets (executor.choose, a pure rule) and the work estimate it is fed
(hand-computed cases); importing the executors imports no Ray (the unit suite's own check)."""
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.workers.executor import choose, estimate_work_s, local_node


def test_forced_choices_win_over_size():
    assert choose("inprocess", None, 1e9, 20.0) == "inprocess"
    assert choose("ray", None, 0.001, 20.0) == "ray"
    assert choose("ray", "10.0.0.1:6379", None, 20.0) == "ray"


def test_auto_runs_small_work_here_and_large_work_on_ray():
    assert choose("auto", None, 19.99, 20.0) == "inprocess"
    assert choose("auto", None, 20.0, 20.0) == "inprocess"
    assert choose("auto", None, 20.01, 20.0) == "ray"
    assert choose("auto", None, 0.0, 0.0) == "inprocess"


def test_a_named_cluster_or_no_estimate_means_ray():
    assert choose("auto", "auto", 0.1, 20.0) == "ray"
    assert choose("auto", "10.0.0.1:6379", 0.1, 20.0) == "ray"
    assert choose("auto", None, None, 20.0) == "ray"


def test_inprocess_with_a_cluster_named_and_unknown_names_are_refused():
    with pytest.raises(PairflowError, match="ray_address"):
        choose("inprocess", "10.0.0.1:6379", 0.1, 20.0)
    with pytest.raises(ValueError, match="executor must be one of"):
        choose("threads", None, 0.1, 20.0)


def test_estimate_is_parse_plus_compare_per_cpu():
    m = {"t_pair": 0.01, "t_parse": 0.5}
    # 100 pairs * 0.01 s + 20 items * 0.5 s = 11 s over 2 CPUs
    assert estimate_work_s(m, 100, 20, 2) == pytest.approx(5.5)
    assert estimate_work_s(m, 100, 20, 0) == pytest.approx(11.0)  # never divides by zero
    # weighted: total weight 1e6 at the probe's rate (a pair of weight 400 took 0.01 s)
    assert estimate_work_s(m, 100, 20, 2, weights_total=1e6, probe_weight=400.0) == \
        pytest.approx((1e6 * 0.01 / 400 + 20 * 0.5) / 2)


def test_local_node_has_the_shape_of_a_ray_node():
    node = local_node(3, 256)
    assert node["cpus"] == 3 and node["gpus"] == 0 and node["head"]
    assert node["object_store"] == 256 * 2**20


def test_auto_joins_a_ray_already_up_in_this_process():
    assert choose("auto", None, 0.1, 20.0, ray_up=True) == "ray"


def test_estimate_weighs_the_parse_cpu_not_its_wall_time():
    """A parse of 5.6 s wall but 0.3 s of its thread's CPU (a machine loaded by others): 16
    items, 120 pairs at 0.03 s, 2 CPUs: (120 * 0.03 + 16 * 0.3) / 2 = 4.2 s, in-process;
    from the wall time it would be (3.6 + 16 * 5.6) / 2 = 46.6 s, Ray."""
    m = {"t_pair": 0.03, "t_parse": 5.6, "t_parse_cpu": 0.3}
    assert estimate_work_s(m, 120, 16, 2) == pytest.approx(4.2)
    assert choose("auto", None, estimate_work_s(m, 120, 16, 2), 20.0) == "inprocess"
    # a measurement without the CPU time (a resumed run's meta.json of before) keeps the wall
    assert estimate_work_s({"t_pair": 0.03, "t_parse": 5.6}, 120, 16, 2) == pytest.approx(46.6)
