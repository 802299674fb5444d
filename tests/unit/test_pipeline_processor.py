"""One batch through the operators (engine.pipeline.processor) and the Batch it works on, without
Ray: in every valid order the survivors and what each operator saw match a numpy reference
computed here from the raw columns; the sample sees what its own dependencies pass."""
import itertools

import numpy as np
import pytest

from pairflow.engine.pipeline import Batch, Filter, Map
from pairflow.engine.pipeline.processor import Processor


def _columns(n=2_000, seed=0):
    rng = np.random.default_rng(seed)
    return {"id": np.arange(n), "a": rng.uniform(size=n), "b": rng.uniform(size=n),
            "c": rng.normal(size=n)}


# maps and filters with dependencies; the reference below restates each as numpy on raw columns
OPS = [
    Map("s", lambda v: np.asarray(v["a"]) + np.asarray(v["b"])),
    Filter("s_big", lambda v: v["s"] > 0.8, after=["s"]),
    Filter("a_low", lambda v: v["a"] < 0.7),
    Map("c2", lambda v: {"c2": np.asarray(v["c"]) ** 2}),
    Filter("c_far", lambda v: v["c2"] > 0.25, after=["c2", "a_low"]),
    Filter("b_mid", lambda v: (v["b"] > 0.1) & (v["b"] < 0.9)),
]
AFTER = {o.name: set(o.after) for o in OPS}


def _passes(d):
    """Per filter, which records it accepts, from the raw columns."""
    s, c2 = d["a"] + d["b"], d["c"] ** 2
    return {"s_big": s > 0.8, "a_low": d["a"] < 0.7, "c_far": c2 > 0.25,
            "b_mid": (d["b"] > 0.1) & (d["b"] < 0.9)}


def _valid_orders():
    names = [o.name for o in OPS]
    for perm in itertools.permutations(names):
        pos = {n: i for i, n in enumerate(perm)}
        if all(pos[d] < pos[n] for n in names for d in AFTER[n]):
            yield list(perm)


def _ancestors(name):
    out, todo = set(), list(AFTER[name])
    while todo:
        d = todo.pop()
        if d not in out:
            out.add(d)
            todo += AFTER[d]
    return out


def test_every_valid_order_gives_the_same_survivors_and_counts():
    d = _columns()
    ok = _passes(d)
    want = d["id"][np.logical_and.reduce(list(ok.values()))]
    proc = Processor(OPS)
    orders = list(_valid_orders())
    assert len(orders) > 50
    for order in orders[::7]:
        survivors, obs, used = proc.process(Batch(d), order, None, "a test batch")
        assert used == order
        assert np.array_equal(survivors["id"], want), order
        assert np.allclose(survivors["s"], d["a"][want] + d["b"][want])  # map columns travel
        alive = np.ones(len(d["id"]), bool)
        for name, n_in, n_pass, _, sampled in obs:
            assert not sampled
            assert n_in == alive.sum(), (order, name)
            if name in ok:
                alive &= ok[name]
            assert n_pass == alive.sum(), (order, name)


def test_the_sample_runs_every_operator_on_what_its_own_dependencies_pass():
    d = _columns(seed=1)
    ok = _passes(d)
    rows = np.arange(0, len(d["id"]), 9)
    _, obs, _ = Processor(OPS).process(Batch(d), ["b_mid", "a_low", "s", "s_big", "c2",
                                                  "c_far"], rows, "a test batch")
    sample = {name: (n_in, n_pass) for name, n_in, n_pass, _, sampled in obs if sampled}
    assert set(sample) == {o.name for o in OPS}
    for name in sample:
        mask = np.ones(len(rows), bool)
        for dep in _ancestors(name):
            if dep in ok:
                mask &= ok[dep][rows]
        n_pass = (mask & ok[name][rows]).sum() if name in ok else mask.sum()
        assert sample[name] == (mask.sum(), n_pass), name


def test_without_an_order_the_batch_plans_from_its_sample():
    d = _columns(seed=2)
    rows = np.arange(0, len(d["id"]), 4)
    survivors, _, used = Processor(OPS).process(Batch(d), None, rows, "a test batch")
    pos = {n: i for i, n in enumerate(used)}
    assert sorted(used) == sorted(o.name for o in OPS)
    assert all(pos[dep] < pos[n] for n in pos for dep in AFTER[n])
    ok = _passes(d)
    assert np.array_equal(survivors["id"], d["id"][np.logical_and.reduce(list(ok.values()))])


def test_batch_from_tables_and_back():
    import awkward as ak
    import pandas as pd
    import pyarrow as pa
    d = _columns(10)
    for obj in (d, pd.DataFrame(d), pa.table(d), ak.zip(d)):
        b = Batch.from_any(obj)
        assert len(b) == 10 and sorted(b.keys()) == sorted(d)
        assert np.array_equal(np.asarray(b["c"]), d["c"]), type(obj)
    rec = np.zeros(3, dtype=[("x", "f8"), ("n", "i4")])
    assert Batch.from_any(rec)["n"].tolist() == [0, 0, 0]
    jagged = Batch({"id": np.arange(3), "jets": ak.Array([[1.0], [], [2.0, 3.0]])})
    both = Batch.concat([jagged, jagged.take(np.array([2]))])
    assert ak.to_list(both["jets"]) == [[1.0], [], [2.0, 3.0], [2.0, 3.0]]
    assert both.to_arrow().column("jets").to_pylist() == [[1.0], [], [2.0, 3.0], [2.0, 3.0]]
    nullable = Batch.from_any(pa.table({"v": pa.array([1, None, 3])}))
    assert ak.to_list(nullable["v"]) == [1, None, 3]
    with pytest.raises(ValueError, match="one length"):
        Batch({"x": np.arange(3), "y": np.arange(4)})
    with pytest.raises(TypeError, match="record batch"):
        Batch.from_any(42)
