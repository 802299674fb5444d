"""The bitset Jaccard as a matrix product (kernels/bitset_mm.py) against plain Python sets:
every pair's count, and each row's k best J with ties to the lower index, on numpy and on
torch (its int8 product and the float32 one), in one block or many."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.bitset_mm import intersections_mm, jaccard_topk_mm, unpack_bits
from tests.conftest import need_module


def _pack(sets: list[set], words: int) -> np.ndarray:
    """Rows of 64-bit words with bit b of word w set for member 64·w + b (the oracle's own)."""
    rows = np.zeros((len(sets), words), dtype=np.uint64)
    for r, members in enumerate(sets):
        for m in members:
            rows[r, m // 64] |= np.uint64(1) << np.uint64(m % 64)
    return rows


def _oracle_topk(sets: list[set], k: int):
    """Each row's k best (J, then lower j) among the other rows, with |A ∩ B| of each."""
    out_j, out_c = [], []
    for i, a in enumerate(sets):
        scored = []
        for j, b in enumerate(sets):
            if i != j:
                union = len(a | b)
                scored.append((Fraction(len(a & b), union) if union else Fraction(0), j,
                               len(a & b)))
        scored.sort(key=lambda t: (-t[0], t[1]))
        out_j.append([t[1] for t in scored[:k]])
        out_c.append([t[2] for t in scored[:k]])
    return np.array(out_j, dtype=np.int64), np.array(out_c, dtype=np.int64)


def _namespaces():
    import array_api_compat.numpy as npx
    torch = need_module("torch")
    import array_api_compat.torch as tx
    return [("numpy", npx, lambda a: a, None),
            ("torch-int8", tx, lambda a: torch.from_numpy(a.view(np.int64)), "int8"),
            ("torch-float32", tx, lambda a: torch.from_numpy(a.view(np.int64)), "float32")]


_sets = st.integers(1, 3).flatmap(lambda words: st.tuples(
    st.just(words),
    st.lists(st.sets(st.integers(0, 64 * words - 1), max_size=24), min_size=2, max_size=30)))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(drawn=_sets, k=st.integers(1, 6), block=st.integers(1, 9))
def test_topk_equals_python_sets_with_ties_to_the_lower_index(drawn, k, block):
    words, sets = drawn
    rows = _pack(sets, words)
    want_j, want_c = _oracle_topk(sets, k)
    for name, xp, move, form in _namespaces():
        got_j, got_c = jaccard_topk_mm(xp, move(rows), k, block_rows=block, form=form)
        assert np.array_equal(got_j, want_j), name
        assert np.array_equal(got_c, want_c), name


@settings(derandomize=True, max_examples=40, deadline=None)
@given(drawn=_sets)
def test_every_count_equals_the_sets_intersection(drawn):
    words, sets = drawn
    rows = _pack(sets, words)
    want = np.array([[len(a & b) for b in sets] for a in sets], dtype=np.int64)
    for name, xp, move, form in _namespaces():
        u = unpack_bits(xp, move(rows))
        assert tuple(u.shape) == (len(sets), 64 * words)
        got = np.asarray(intersections_mm(xp, u, u[: len(sets) // 2 + 1], form)).astype(np.int64)
        assert np.array_equal(got, want[:, : len(sets) // 2 + 1]), name


def test_full_rows_and_empty_rows_and_the_top_bit():
    """Rows of 512 bits (k = 5's canonical rows) all set, none set, and only bit 63 of each word
    (the sign bit of torch's int64): counts up to the row's length, J of two empty sets 0."""
    sets = [set(range(512)), set(), set(range(63, 512, 64)), set(range(0, 512, 2)), set()]
    rows = _pack(sets, 8)
    want_j, want_c = _oracle_topk(sets, 4)
    for name, xp, move, form in _namespaces():
        got_j, got_c = jaccard_topk_mm(xp, move(rows), 4, form=form)
        assert np.array_equal(got_j, want_j) and np.array_equal(got_c, want_c), name


def test_fewer_rows_than_k_gives_every_other_row():
    sets = [{1, 2}, {2, 3}, {9}]
    got_j, got_c = jaccard_topk_mm(np, _pack(sets, 1), k=10)
    assert got_j.tolist() == [[1, 2], [0, 2], [0, 1]]
    assert got_c.tolist() == [[1, 0], [1, 0], [0, 0]]
    single_j, _ = jaccard_topk_mm(np, _pack([{1}], 1), k=3)
    assert single_j.shape == (1, 0)


def test_sizes_past_int32_scaling_take_int64_keys():
    """Rows of 2,048 bits: c · 2U² passes 2^31, so the keys are computed in int64."""
    rng = np.random.default_rng(3)
    sets = [set(rng.choice(2048, size=int(rng.integers(0, 1500)), replace=False).tolist())
            for _ in range(12)]
    want_j, want_c = _oracle_topk(sets, 5)
    for name, xp, move, form in _namespaces():
        got_j, got_c = jaccard_topk_mm(xp, move(_pack(sets, 32)), 5, block_rows=5, form=form)
        assert np.array_equal(got_j, want_j) and np.array_equal(got_c, want_c), name
