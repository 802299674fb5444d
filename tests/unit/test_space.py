"""Every pair of every space is covered by exactly one leaf (property-based, no Ray)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pairflow.engine.pairs.space import PairList, Rectangle, Triangle, leaves, quadtree


def covered(space, leaf):
    counts = np.zeros((space.n_rows, space.n_cols), np.int64)
    for t in leaves(space, leaf):
        m = space.mask(t.r0, t.r1, t.c0, t.c1)
        assert m.sum() == t.pairs > 0, "empty leaves are dropped"
        assert t.r0 % leaf == 0 and t.c0 % leaf == 0, "leaves sit on the chunk grid"
        assert t.r1 - t.r0 <= leaf and t.c1 - t.c0 <= leaf
        counts[t.r0:t.r1, t.c0:t.c1] += m
    return counts


@settings(derandomize=True, max_examples=60, deadline=None)
@given(n=st.integers(0, 40), leaf=st.integers(1, 9))
def test_triangle_covers_each_pair_once(n, leaf):
    counts = covered(Triangle(n), leaf)
    expected = np.triu(np.ones((n, n), np.int64), 1)
    assert np.array_equal(counts, expected)
    assert Triangle(n).total == n * (n - 1) // 2


@settings(derandomize=True, max_examples=60, deadline=None)
@given(q=st.integers(0, 30), t=st.integers(0, 50), leaf=st.integers(1, 9))
def test_rectangle_covers_each_pair_once(q, t, leaf):
    counts = covered(Rectangle(q, t), leaf)
    assert np.array_equal(counts, np.ones((q, t), np.int64))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(st.integers(0, 25), st.integers(0, 25)), max_size=80),
       leaf=st.integers(1, 7))
def test_pairlist_covers_each_listed_pair_once(pairs, leaf):
    space = PairList(pairs, n_rows=26, n_cols=26)
    counts = covered(space, leaf)
    expected = np.zeros((26, 26), np.int64)
    for i, j in set(pairs):
        expected[i, j] = 1
    assert np.array_equal(counts, expected)


def test_leaves_come_in_z_order():
    tl = leaves(Rectangle(4, 4), 1)
    firsts = [(t.r0, t.c0) for t in tl[:4]]
    assert firsts == [(0, 0), (0, 1), (1, 0), (1, 1)]  # the top-left quadrant first, in Z
    assert [t.id for t in tl] == list(range(16))


def test_empty_quadrants_are_dropped():
    root = quadtree(Triangle(8), 2)
    # the bottom-left quadrant of a triangle holds no pair i < j
    assert [(c.r0, c.c0) for c in root.children] == [(0, 0), (0, 4), (4, 4)]


def test_bad_arguments():
    with pytest.raises(ValueError):
        Triangle(-1)
    with pytest.raises(ValueError):
        leaves(Triangle(3), 0)
    with pytest.raises(ValueError):
        PairList([(5, 1)], n_rows=3, n_cols=3)


def test_masks_are_read_only_and_shared_by_blocks_of_one_shape():
    """A tile's mask is made once per block shape (a 2,495-sided one took 4-6 ms a tile) and
    handed out read-only: no tile can change another's."""
    t = Triangle(30)
    a, b = t.mask(0, 10, 10, 20), t.mask(10, 20, 20, 30)  # two blocks right of the diagonal
    assert a is b and a.all() and not a.flags.writeable
    assert t.mask(0, 10, 0, 10) is t.mask(20, 30, 20, 30)  # two diagonal blocks
    assert np.array_equal(t.mask(0, 10, 0, 10), np.triu(np.ones((10, 10), bool), 1))
    with pytest.raises(ValueError):
        a[0, 0] = False
    r = Rectangle(7, 9)
    assert r.mask(0, 4, 0, 4) is r.mask(0, 4, 4, 8) and r.mask(0, 4, 0, 4).all()
    assert r.mask(4, 8, 4, 8).shape == (3, 4)  # the last rows' block is cut at n_rows
