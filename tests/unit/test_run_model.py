"""The small pure decisions behind a run's speed: tile size, load batches, top-k selection.

Each is checked against a hand-computed case or a brute-force reference, without Ray.
"""
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.pairs.driver import choose_leaf
from engine.pairs.sinks import TopK
from engine.pairs.space import Rectangle, Triangle
from engine.pairs.workers import load_batches


def test_leaf_aims_at_the_overhead_and_tail_optimum():
    # Triangle(200): 19900 pairs at 1 ms, 200 items at 44 ms, 2 actors:
    # W = (200 * 0.044 + 19900 * 0.001) / 2 = 14.35 s; t* = sqrt(2 * 0.02 * 14.35) = 0.7576 s;
    # side = ceil(sqrt(0.7576 / 0.001)) = 28
    leaf = choose_leaf(0.001, Triangle(200), host_items=10_000, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02)
    assert leaf == 28
    # with a host tier of all 200 items, a stripe of >= 4 blocks plus the 4 tiles under way
    # must fit: 200 // (4 + 4) = 25 (the leaf benchmarks/allpairs.py part a reports)
    assert choose_leaf(0.001, Triangle(200), host_items=200, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02) == 25


def test_leaf_never_aims_below_the_target_tile():
    # a tiny run: t* = sqrt(2 * 0.02 * (45 * 1e-3) / 1) = 0.042 s < 0.05 s, so 0.05 s is aimed
    # at: side = ceil(sqrt(0.05 / 0.001)) = 8, then capped to >= 4 tiles per actor:
    # floor(sqrt(45 / 4)) = 3
    leaf = choose_leaf(0.001, Triangle(10), host_items=1000, per_node_tiles=2, n_actors=1,
                       target_s=0.05, overhead_s=0.02)
    assert leaf == 3
    big = choose_leaf(0.001, Triangle(2000), host_items=2000, per_node_tiles=2, n_actors=1,
                      target_s=0.05, overhead_s=0.0)
    assert big == math.ceil(math.sqrt(0.05 / 0.001))


def test_leaf_grows_with_the_work_and_respects_the_host_tier():
    small = choose_leaf(0.01, Rectangle(100, 100), 1000, 4, 2, t_item=0.0, n_items=200)
    large = choose_leaf(0.01, Rectangle(1000, 1000), 1000, 4, 2, t_item=0.0, n_items=2000)
    assert large > small
    # a host tier of 40 items with 4 tiles under way: a stripe of >= 4 blocks must fit
    capped = choose_leaf(0.01, Rectangle(1000, 1000), 40, 4, 2, t_item=0.0, n_items=2000)
    assert capped == 40 // (4 + 4)


def test_load_batches_cover_every_item_once_in_order():
    items = list(range(23))
    for per_task in (1, 3, 10, 100):
        for slots in (1, 2, 4):
            got = load_batches(items, per_task, slots)
            assert [i for b in got for i in b] == items
            assert max(len(b) for b in got) <= per_task
            # never fewer batches than slots, while there are items enough
            assert len(got) >= min(slots, len(items))


def test_load_batches_hand_cases():
    assert load_batches([5, 6, 7, 8, 9], 100, 2) == [[5, 6, 7], [8, 9]]
    assert load_batches([5, 6, 7, 8, 9], 2, 1) == [[5, 6], [7, 8], [9]]
    assert load_batches([], 4, 2) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(-3, 3)),
                max_size=60),
       st.integers(1, 4), st.booleans(), st.sampled_from(["int32", "float64", "uint8"]))
def test_topk_select_equals_a_brute_force_sort(rows, k, largest, dtype):
    q = np.array([r[0] for r in rows], dtype=np.int64)
    t = np.array([r[1] for r in rows], dtype=np.int64)
    v = np.array([r[2] + (3 if dtype == "uint8" else 0) for r in rows], dtype=dtype)
    sink = TopK(k, largest=largest)
    gq, gt, gv, rank = sink._select(q, t, v)
    want = []
    for qi in sorted(set(q.tolist())):
        mine = [(float(vv), int(tt)) for qq, tt, vv in zip(q, t, v) if qq == qi]
        mine.sort(key=lambda x: ((-x[0]) if largest else x[0], x[1]))
        want += [(qi, tt, vv, r + 1) for r, (vv, tt) in enumerate(mine[:k])]
    got = list(zip(gq.tolist(), gt.tolist(), [float(x) for x in gv], rank.tolist()))
    assert got == want


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 7), st.integers(1, 12), st.integers(1, 5), st.booleans(),
       st.sampled_from(["int16", "float32", "uint8"]), st.integers(0, 2**31))
def test_topk_row_candidates_keep_every_rows_k_best(rows, cols, k, largest, dtype, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, (rows, cols)).astype(dtype)  # many ties at the k-th place
    sink = TopK(k, largest=largest)
    mask = np.ones((rows, cols), bool)
    qa, ta = np.nonzero(mask)
    want = sink._select(qa, ta, values[qa, ta])
    cand = sink._row_candidates(values, mask)
    if cols <= k:
        assert cand is None
        return
    qc, tc = cand
    got = sink._select(qc, tc, values[qc, tc])
    for w, g in zip(want, got):
        assert np.array_equal(w, g)
