"""intersection_counts / jaccard_from_counts against set arithmetic and np.intersect1d."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.jaccard import GALLOP_RATIO, intersection_count, intersection_counts, jaccard_from_counts
from tests.conftest import need_module

# values from a small range overlap often; a few huge ones check that all 62 bits are compared
_value = st.one_of(st.integers(0, 300), st.integers(2**62 - 50, 2**62 - 1))
_set = st.sets(_value, max_size=120).map(lambda s: np.array(sorted(s), dtype=np.uint64))
_tile = st.lists(_set, min_size=0, max_size=4)


def expected(lefts, rights):
    return np.array(
        [[len(set(a.tolist()) & set(b.tolist())) for b in rights] for a in lefts], dtype=np.int64
    ).reshape(len(lefts), len(rights))


@settings(derandomize=True, max_examples=200, deadline=None)
@given(lefts=_tile, rights=_tile)
def test_matches_set_intersection(lefts, rights):
    got = intersection_counts(lefts, rights)
    assert got.dtype == np.int64 and got.shape == (len(lefts), len(rights))
    assert np.array_equal(got, expected(lefts, rights))


@settings(derandomize=True, max_examples=100, deadline=None)
@given(lefts=_tile, rights=_tile, data=st.data())
def test_mask_leaves_zeros(lefts, rights, data):
    shape = (len(lefts), len(rights))
    mask = np.array(
        data.draw(st.lists(st.booleans(), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])),
        dtype=bool,
    ).reshape(shape)
    got = intersection_counts(lefts, rights, mask=mask)
    assert np.array_equal(got, np.where(mask, expected(lefts, rights), 0))


def test_mask_shape_checked():
    a = np.arange(3, dtype=np.uint64)
    with pytest.raises(ValueError, match="mask"):
        intersection_counts([a], [a, a], mask=np.ones((2, 1), bool))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_small=st.integers(0, 40), n_big=st.integers(400, 3000))
def test_galloping_path(seed, n_small, n_big):
    rng = np.random.default_rng(seed)
    big = np.unique(rng.integers(0, 5000, n_big)).astype(np.uint64)
    small = np.unique(rng.integers(0, 5000, n_small)).astype(np.uint64)
    assert len(big) >= GALLOP_RATIO * len(small)  # these sizes always take the galloping branch
    want = len(set(small.tolist()) & set(big.tolist()))
    assert intersection_count(small, big) == want == intersection_count(big, small)


def test_read_only_inputs():
    a = np.arange(0, 1000, 2, dtype=np.uint64)
    b = np.arange(0, 1000, 3, dtype=np.uint64)
    a.flags.writeable = False
    b.flags.writeable = False
    assert intersection_counts([a], [b])[0, 0] == len(np.intersect1d(a, b))


def test_dtype_mismatch_is_an_error():
    with pytest.raises(TypeError, match="dtype"):
        intersection_count(np.arange(3, dtype=np.uint64), np.arange(3, dtype=np.int64))


def test_torch_path_equals_numpy():
    torch = need_module("torch")
    from pairflow.kernels.backend import namespace_for, to_device

    xp = namespace_for("torch-cpu")
    rng = np.random.default_rng(7)
    sets = [np.unique(rng.integers(0, 3000, n)).astype(np.uint64) for n in (0, 1, 50, 900, 2000)]
    sets.append(np.array([2**62 - 1], dtype=np.uint64))
    mask = rng.random((len(sets), len(sets))) < 0.7
    dev = [to_device(xp, s, "torch-cpu") for s in sets]
    assert all(isinstance(d, torch.Tensor) and d.dtype == torch.int64 for d in dev)
    for m in (None, mask):
        want = intersection_counts(sets, sets, mask=m)
        got = intersection_counts(dev, dev, mask=m)  # namespace inferred from the tensors
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        assert np.array_equal(got, want)
        assert np.array_equal(intersection_counts(dev, dev, mask=m, xp=xp), want)


def test_empty_tiles():
    assert intersection_counts([], []).shape == (0, 0)
    a = np.arange(5, dtype=np.uint64)
    assert intersection_counts([a], []).shape == (1, 0)


def test_real_genomes_match_intersect1d(ragout_path):
    from pairflow.kernels.kmers import canonical_kmers
    from pairflow.operators.sequences import read_records

    items = [
        canonical_kmers([r.sequence for r in read_records(ragout_path("H.Pylori", s))], 21).hashes
        for s in ("G27", "Puno120")
    ]
    got = intersection_counts(items, items)
    for i, a in enumerate(items):
        for j, b in enumerate(items):
            assert got[i, j] == np.intersect1d(a, b, assume_unique=True).size
    assert got[0, 0] == items[0].size
    j = jaccard_from_counts(got, [x.size for x in items], [x.size for x in items])
    assert np.allclose(np.diag(j), 1.0) and 0.1 < j[0, 1] < 0.9  # H. pylori strains are diverse: J ~ 0.24


def test_jaccard_from_counts():
    inter = np.array([[2, 0], [3, 0]])
    j = jaccard_from_counts(inter, [4, 3], [5, 0])
    assert j.dtype == np.float64
    assert np.allclose(j, [[2 / 7, 0.0], [3 / 5, 0.0]])
    # elementwise form and an empty union: J = 0 by choice, not NaN
    assert np.allclose(jaccard_from_counts([0, 1], [0, 1], [0, 1]), [0.0, 1.0])
    assert not np.isnan(jaccard_from_counts(0, 0, 0))


@settings(derandomize=True, max_examples=100, deadline=None)
@given(a=_set, b=_set)
def test_jaccard_matches_sets(a, b):
    sa, sb = set(a.tolist()), set(b.tolist())
    inter = intersection_counts([a], [b])
    j = jaccard_from_counts(inter, [len(a)], [len(b)])[0, 0]
    union = len(sa | sb)
    assert j == pytest.approx(len(sa & sb) / union if union else 0.0)


def test_large_sets_counted_pair_by_pair_equal_intersect1d():
    """Sets of genome size take the per-pair path (no packing copy); mixed with small ones,
    masked, and with one empty set."""
    from pairflow.kernels.jaccard import PACK_MAX_MEAN
    rng = np.random.default_rng(7)
    pool = np.unique(rng.integers(0, 2**62, 6 * PACK_MAX_MEAN, dtype=np.uint64))
    sets = [np.sort(rng.choice(pool, n, replace=False)) for n in
            (3 * PACK_MAX_MEAN, 2 * PACK_MAX_MEAN, 50, 0)]
    mask = np.array([[True, True, False, True], [True, False, True, True]])
    got = intersection_counts(sets[:2], sets, mask=mask)
    want = np.array([[len(np.intersect1d(a, b)) if mask[i, j] else 0
                      for j, b in enumerate(sets)] for i, a in enumerate(sets[:2])])
    assert np.array_equal(got, want)
    with pytest.raises(TypeError, match="dtype"):
        intersection_counts([sets[0]], [sets[1].astype(np.int64)])
