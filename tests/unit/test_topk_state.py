"""The TopK sink's bounded finalize state (``topk_state_merge`` / ``topk_state_rows``): parts
merged one at a time, in any order, give each query's k best as a plain Python sort of all
candidates by (value, target) does; a NaN or an out-of-range query is refused, not merged."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st


def _oracle(cands, k, largest):
    """Each query's k best (value, then lower target), by sorting Python tuples."""
    by_q = {}
    for q, t, v in cands:
        by_q.setdefault(q, []).append((-v if largest else v, t))
    out = []
    for q in sorted(by_q):
        for rank, (key, t) in enumerate(sorted(by_q[q])[:k], 1):
            out.append((q, t, -key if largest else key, rank))
    return out


@settings(derandomize=True, max_examples=80, deadline=None)
@given(st.integers(1, 4), st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9),
                                                      st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                                            max_size=25), min_size=1, max_size=6),
       st.booleans())
def test_parts_merged_one_at_a_time_equal_a_sort(k, parts, largest):
    from pairflow.engine.pairs.sinks.topk_passes import topk_state_merge, topk_state_rows
    seen, cands, split = set(), [], []
    for part in parts:  # a (query, target) is a candidate once in a run
        mine = [c for c in part if (c[0], c[1]) not in seen]
        seen.update((c[0], c[1]) for c in mine)
        cands += mine
        split.append(mine)
    n = 7
    bv, bt, bn = np.empty((n, k)), np.empty((n, k), np.int64), np.zeros(n, np.int64)
    sign = 1.0 if largest else -1.0
    for part in split:
        q = np.array([c[0] for c in part], np.int64)
        t = np.array([c[1] for c in part], np.int64)
        v = np.array([c[2] for c in part], float)
        assert topk_state_merge(bv, bt, bn, q, t, v, sign)
    got = list(zip(*(a.tolist() for a in topk_state_rows(bv, bt, bn))))
    assert got == _oracle(cands, k, largest)


def test_a_nan_or_a_query_out_of_range_is_refused_untouched():
    from pairflow.engine.pairs.sinks.topk_passes import topk_state_merge
    bv, bt, bn = np.zeros((3, 2)), np.zeros((3, 2), np.int64), np.zeros(3, np.int64)
    one = np.array([1], np.int64)
    assert not topk_state_merge(bv, bt, bn, one, one, np.array([np.nan]), 1.0)
    assert not topk_state_merge(bv, bt, bn, np.array([3], np.int64), one, np.ones(1), 1.0)
    assert not bn.any()


def test_strided_fields_of_a_part_merge_as_contiguous_ones():
    """The finalize hands the fields of a part (a structured array) as they are: strided."""
    from pairflow.engine.pairs.sinks.topk_passes import topk_state_merge, topk_state_rows
    rng = np.random.default_rng(3)
    part = np.zeros(200, [("qi", np.int64), ("ti", np.int64), ("score", np.float64)])
    part["qi"] = rng.integers(0, 20, 200)
    part["ti"] = np.arange(200)
    part["score"] = rng.choice([0.1, 0.2, 0.3], 200)
    state = np.empty((20, 3)), np.empty((20, 3), np.int64), np.zeros(20, np.int64)
    assert topk_state_merge(*state, part["qi"], part["ti"], part["score"], 1.0)
    got = list(zip(*(a.tolist() for a in topk_state_rows(*state))))
    assert got == _oracle(list(zip(part["qi"].tolist(), part["ti"].tolist(),
                                   part["score"].tolist())), 3, True)
