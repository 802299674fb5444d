"""The weighted (capacity-aware) quadtree: every wanted pair in exactly one leaf, no leaf heavier
than max_weight unless it is a single pair, and exact block weights for every space (no Ray)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pairflow.engine.pairs.space import PairList, PairWeights, Rectangle, Triangle, leaves, quadtree


def brute_weight(space, r0, r1, c0, c1, rw, cw):
    m = space.mask(r0, r1, c0, c1)
    return float((np.outer(rw[r0:r0 + m.shape[0]], cw[c0:c0 + m.shape[1]]) * m).sum())


def check(space, leaf, rw, cw, max_weight):
    counts = np.zeros((space.n_rows, space.n_cols), np.int64)
    tiles = leaves(space, leaf, weights=(rw, cw), max_weight=max_weight)
    for t in tiles:
        m = space.mask(t.r0, t.r1, t.c0, t.c1)
        assert m.sum() == t.pairs > 0, "empty leaves are dropped"
        assert t.r1 - t.r0 <= leaf and t.c1 - t.c0 <= leaf, "never larger than the leaf"
        w = brute_weight(space, t.r0, t.r1, t.c0, t.c1, rw, cw)
        if (t.r1 - t.r0, t.c1 - t.c0) != (1, 1):
            assert w <= max_weight * (1 + 1e-12), (t, w, max_weight)
        counts[t.r0:t.r1, t.c0:t.c1] += m
    assert [t.id for t in tiles] == list(range(len(tiles)))
    return counts


weights_st = st.lists(st.integers(0, 5000), min_size=0, max_size=40)


@settings(derandomize=True, max_examples=80, deadline=None)
@given(w=weights_st, leaf=st.integers(1, 9), frac=st.floats(0.001, 2.0))
def test_weighted_triangle_covers_each_pair_once(w, leaf, frac):
    n = len(w)
    rw = np.asarray(w, float)
    space = Triangle(n)
    total = PairWeights(rw, rw).total(space)
    counts = check(space, leaf, rw, rw, max(1.0, frac * total))
    assert np.array_equal(counts, np.triu(np.ones((n, n), np.int64), 1))


@settings(derandomize=True, max_examples=80, deadline=None)
@given(rw=weights_st, cw=weights_st, leaf=st.integers(1, 9), frac=st.floats(0.001, 2.0))
def test_weighted_rectangle_covers_each_pair_once(rw, cw, leaf, frac):
    rw, cw = np.asarray(rw, float), np.asarray(cw, float)
    space = Rectangle(len(rw), len(cw))
    total = PairWeights(rw, cw).total(space)
    counts = check(space, leaf, rw, cw, max(1.0, frac * total))
    assert np.array_equal(counts, np.ones((len(rw), len(cw)), np.int64))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25)), max_size=80),
       leaf=st.integers(1, 7), seed=st.integers(0, 99), frac=st.floats(0.001, 2.0))
def test_weighted_pairlist_covers_each_listed_pair_once(pairs, leaf, seed, frac):
    rng = np.random.default_rng(seed)
    rw, cw = rng.integers(1, 3000, 26).astype(float), rng.integers(1, 3000, 26).astype(float)
    space = PairList(pairs, n_rows=26, n_cols=26)
    total = PairWeights(rw, cw).total(space)
    counts = check(space, leaf, rw, cw, max(1.0, frac * total))
    expected = np.zeros((26, 26), np.int64)
    for i, j in set(pairs):
        expected[i, j] = 1
    assert np.array_equal(counts, expected)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(n=st.integers(1, 30), m=st.integers(1, 30), seed=st.integers(0, 99),
       r0=st.integers(0, 30), r1=st.integers(0, 30), c0=st.integers(0, 30), c1=st.integers(0, 30))
def test_block_weights_are_exact(n, m, seed, r0, r1, c0, c1):
    rng = np.random.default_rng(seed)
    rw, cw = rng.random(n) * 100, rng.random(m) * 100
    w = PairWeights(rw, cw)
    pairs = rng.integers(0, [n, m], size=(40, 2))
    spaces = [Rectangle(n, m), PairList(pairs, n_rows=n, n_cols=m)]
    if n == m:
        spaces.append(Triangle(n))
        w2 = PairWeights(rw, rw)
    for space in spaces:
        ww = w2 if isinstance(space, Triangle) else w
        cws = rw if isinstance(space, Triangle) else cw
        r1c, c1c = min(max(r0, r1), space.n_rows), min(max(c0, c1), space.n_cols)
        r0c, c0c = min(r0, r1c), min(c0, c1c)
        got = space.weight(r0c, r1c, c0c, c1c, ww)
        assert got == pytest.approx(brute_weight(space, r0c, r1c, c0c, c1c, rw, cws), rel=1e-9,
                                    abs=1e-9)


def test_one_long_target_is_cut_off_from_the_short_ones():
    """One 5 Mb target among a thousand 300-letter ones: the long column ends up in tiles of
    its own (a few rows each), while the short pairs keep full leaf-sized tiles."""
    nq, nt = 64, 1000
    rw = np.full(nq, 300.0)
    cw = np.full(nt, 300.0)
    cw[-1] = 5e6
    leaf = 32
    budget = 32 * 32 * 300 * 300.0  # a full leaf of short pairs
    tiles = leaves(Rectangle(nq, nt), leaf, weights=(rw, cw), max_weight=budget)
    long_tiles = [t for t in tiles if t.c0 <= nt - 1 < t.c1]
    assert all(t.c1 - t.c0 == 1 for t in long_tiles)
    assert all((t.r1 - t.r0) * 300 * 5e6 <= budget or t.r1 - t.r0 == 1 for t in long_tiles)
    short = [t for t in tiles if t.c1 <= nt - 32]
    assert all((t.r1 - t.r0, t.c1 - t.c0) == (32, 32) for t in short)
    unweighted = leaves(Rectangle(nq, nt), leaf)
    assert sum(t.pairs for t in tiles) == sum(t.pairs for t in unweighted) == nq * nt


def test_without_weights_nothing_changes():
    a = [t.to_dict() for t in leaves(Triangle(37), 5)]
    b = [t.to_dict() for t in leaves(Triangle(37), 5, weights=(np.ones(37), np.ones(37)),
                                      max_weight=1e18)]
    assert a == b


def test_bad_weight_arguments():
    with pytest.raises(ValueError, match="both weights and max_weight"):
        quadtree(Triangle(4), 2, weights=(np.ones(4), np.ones(4)))
    with pytest.raises(ValueError, match="max_weight must be > 0"):
        quadtree(Triangle(4), 2, weights=(np.ones(4), np.ones(4)), max_weight=0)
    with pytest.raises(ValueError, match="weights are for 3 x 4"):
        quadtree(Triangle(4), 2, weights=(np.ones(3), np.ones(4)), max_weight=1)
    with pytest.raises(ValueError, match="finite and >= 0"):
        quadtree(Triangle(2), 2, weights=(np.array([1, -1]), np.ones(2)), max_weight=1)


@pytest.mark.parametrize("space", [Triangle(37), Rectangle(23, 41)])
@pytest.mark.parametrize("levels", [1, 2])
def test_split_tail_covers_every_pair_once_and_ends_fine(space, levels):
    """The tail of the plan is quartered (twice with levels=2): every pair still lies in
    exactly one tile, the body keeps its tiles, and the last tiles weigh less than the body's."""
    from pairflow.engine.pairs.space import split_tail
    rng = np.random.default_rng(5)
    w = PairWeights(rng.integers(50, 500, space.n_rows).astype(float),
                    rng.integers(50, 500, space.n_cols).astype(float))
    max_weight = w.total(space) / 24
    tiles = leaves(space, 8, w, max_weight)
    order = list(range(len(tiles)))
    tail = 2 * max_weight
    out, new_order = split_tail(space, tiles, order, tail, w, levels=levels)
    assert new_order == list(range(len(out))) and [t.id for t in out] == new_order
    seen = np.zeros((space.n_rows, space.n_cols), int)
    for t in out:
        m = space.mask(t.r0, t.r1, t.c0, t.c1)
        assert t.pairs == int(m.sum()) > 0
        seen[t.r0:t.r1, t.c0:t.c1] += m
    assert np.array_equal(seen, space.mask(0, space.n_rows, 0, space.n_cols).astype(int))
    assert len(out) > len(tiles)
    weigh = lambda t: space.weight(t.r0, t.r1, t.c0, t.c1, w)  # noqa: E731
    # the body (everything before the split part) is unchanged, in the same order
    body = [t for t in tiles if (t.r0, t.r1, t.c0, t.c1) in {(u.r0, u.r1, u.c0, u.c1) for u in out}]
    assert [(t.r0, t.c0) for t in body] == [(t.r0, t.c0) for t in out[:len(body)]]
    assert max(weigh(t) for t in out[-2:]) < max(weigh(t) for t in out[:len(body)])
    if levels == 2:
        once, _ = split_tail(space, tiles, order, tail, w, levels=1)
        assert len(out) > len(once)
