"""Bottom-k sketches and the safe pair test (no Ray)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.sketch import (EMPTY, bottom_k, length_ratio, may_reach, mix64, pair_shared,
                            pair_shared_reference)


def test_mix64_is_a_bijection_on_a_sample():
    x = np.arange(200_000, dtype=np.uint64)
    assert len(np.unique(mix64(x))) == len(x)


M64 = 2**64 - 1


def _splitmix64_finalizer(x: int) -> int:
    """SplitMix64's finalizer on a Python int, each step reduced mod 2**64 (Steele, Lea and
    Flood, 2014): the hash the sketches are defined by, computed without numpy."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def test_mix64_is_the_splitmix64_finalizer():
    xs = [0, 1, 2, 3, 2**32, 2**63, M64, 0x0123456789ABCDEF]
    assert mix64(np.array(xs, np.uint64)).tolist() == [_splitmix64_finalizer(x) for x in xs]


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.lists(st.integers(0, M64), max_size=300), st.integers(1, 64))
def test_bottom_k_is_the_k_smallest_distinct_hashes(kmers, s):
    """A sketch is sorted(set of hashes, the padding value left out)[:s], padded to s."""
    hashes = sorted({_splitmix64_finalizer(x) for x in kmers} - {M64})[:s]
    want = hashes + [M64] * (s - len(hashes))
    assert bottom_k(np.array(kmers, np.uint64), s).tolist() == want


def test_pair_shared_equals_set_operations():
    rng = np.random.default_rng(0)
    sets = [np.unique(rng.integers(0, 4000, size=rng.integers(0, 2500)).astype(np.uint64))
            for _ in range(25)]
    sk = np.stack([bottom_k(x, 128) for x in sets])
    assert sk.dtype == np.uint64 and np.all(np.diff(sk.astype(object), axis=1) >= 0)
    i, j = np.triu_indices(25, 1)
    for got, want in zip(pair_shared(sk, i, j), pair_shared_reference(sk, i, j)):
        assert np.array_equal(got, want)
    small = bottom_k(np.array([5, 3, 5], np.uint64), 4)
    assert (small == EMPTY).sum() == 2


def test_estimate_tracks_true_jaccard_and_the_test_is_safe():
    rng = np.random.default_rng(1)
    s, t, alpha = 512, 0.3, 1e-6
    universe = rng.integers(0, 2**62, size=200_000).astype(np.uint64)
    keep_true = []
    for trial in range(60):
        j_true = rng.uniform(0.0, 0.6)
        n_a = 5_000
        shared = int(round(2 * n_a * j_true / (1 + j_true)))
        perm = rng.permutation(len(universe))
        a = universe[perm[:n_a]]
        b = np.concatenate([a[:shared], universe[perm[n_a:2 * n_a - shared]]])
        j = shared / (2 * n_a - shared)
        sk = np.stack([bottom_k(a, s), bottom_k(b, s)])
        sh, se, _ = pair_shared(sk, [0], [1])
        assert abs(sh[0] / se[0] - j) < 0.12
        keep = may_reach(sh, se, t, alpha)[0]
        if j >= t:
            keep_true.append(keep)
        if sh[0] / se[0] < t - 0.2:
            assert not keep  # far below t: ruled out
    assert all(keep_true)


def test_exact_decision_for_small_sets_and_length_ratio():
    sk = np.stack([bottom_k(np.arange(10, dtype=np.uint64), 64),
                   bottom_k(np.arange(5, 15, dtype=np.uint64), 64)])
    sh, se, nu = pair_shared(sk, [0], [1])
    assert (sh[0], se[0], nu[0]) == (5, 15, 15)
    assert may_reach(sh, se, 1 / 3, 0.1, exact=np.array([True]))[0]
    assert not may_reach(sh, se, 0.34, 0.1, exact=np.array([True]))[0]
    assert length_ratio([10, 0], [40, 0]).tolist() == [0.25, 1.0]
    with pytest.raises(ValueError):
        may_reach(sh, se, 0.0, 0.1)
