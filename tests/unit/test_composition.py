"""Composition-vector kernel against the brute-force CVTree references (numpy and torch)."""
import os
import random

import numpy as np
import pytest

from pairflow.kernels.composition import (composition_vector, cv_distance, cv_distance_matrix,
                                 encode_proteins, prefer_dense, word_counts)
from tests.conftest import need, need_module
from tests.oracles import PROTEOMES
from tests.unit.cvtree_oracle import (AA, dense_distances, dense_vector, dict_distance,
                                      dict_vector, read_proteins)



def _namespaces():
    import array_api_compat.numpy as npx
    out = [("numpy", npx, lambda a: a)]
    torch = need_module("torch")
    import array_api_compat.torch as tx
    out.append(("torch-cpu", tx, lambda a: torch.from_numpy(np.ascontiguousarray(a))))
    return out


def _kernel_distances(proteomes, k, xp, move):
    vectors = [composition_vector(xp, move(encode_proteins([p.encode() for p in prots])), k)
               for prots in proteomes]
    n = len(vectors)
    return np.array([[cv_distance(xp, vectors[i], vectors[j]) for j in range(n)]
                     for i in range(n)])


def _synthetic_proteomes(seed, n_proteomes=3, n_proteins=25):
    """Random proteins with skewed composition, non-standard letters (X, U, B, *) that break
    words, lower case, and proteins shorter than k."""
    rng = random.Random(seed)
    weights = [rng.random() ** 2 for _ in AA]
    out = []
    for _ in range(n_proteomes):
        prots = []
        for _ in range(n_proteins):
            n = rng.choice([1, 2, 3, rng.randint(4, 400)])
            letters = rng.choices(AA, weights, k=n)
            for _ in range(rng.randint(0, 3)):
                letters[rng.randrange(n)] = rng.choice("XUB*")
            s = "".join(letters)
            prots.append(s.lower() if rng.random() < 0.1 else s)
        out.append(prots)
    return out


@pytest.mark.parametrize("k", [3, 4])
def test_distances_equal_dict_bruteforce_on_synthetic_proteomes(k):
    proteomes = _synthetic_proteomes(seed=k)
    vectors = [dict_vector(p, k) for p in proteomes]
    want = np.array([[dict_distance(a, b) for b in vectors] for a in vectors])
    for name, xp, move in _namespaces():
        got = _kernel_distances(proteomes, k, xp, move)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9, err_msg=name)
    assert want[np.triu_indices(3, 1)].min() > 0.05  # the proteomes really differ


def _real_proteomes(n_proteins: int) -> list:
    """The first proteins of three predicted proteomes of two species."""
    paths = [os.path.join(PROTEOMES, rel) for rel in
             ("S.Aureus/COL.faa", "S.Aureus/N315.faa", "H.Pylori/G27.faa")]
    return [read_proteins(str(need(p)))[:n_proteins] for p in paths]


def test_distances_equal_dict_bruteforce_on_real_proteins():
    """Slices of three predicted proteomes of two species at k = 4 (160,000 words)."""
    proteomes = _real_proteomes(150)
    vectors = [dict_vector(p, 4) for p in proteomes]
    want = np.array([[dict_distance(a, b) for b in vectors] for a in vectors])
    for name, xp, move in _namespaces():
        np.testing.assert_allclose(_kernel_distances(proteomes, 4, xp, move), want,
                                   rtol=0, atol=1e-9, err_msg=name)


def test_dense_reference_agrees_with_dict_reference():
    """The two references (used at k = 5 on whole proteomes) are the same definition."""
    proteomes = _synthetic_proteomes(seed=7)
    want = np.array([[dict_distance(dict_vector(a, 3), dict_vector(b, 3)) for b in proteomes]
                     for a in proteomes])
    got = dense_distances([dense_vector(p, 3) for p in proteomes])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_words_stay_within_proteins_and_stop_at_other_letters():
    import array_api_compat.numpy as xp
    residues = encode_proteins([b"ACDXEF", b"GH", b"kM"])
    codes, counts = word_counts(xp, residues, 2)
    words = sorted("".join(AA[(int(c) // 20 ** (1 - t)) % 20] for t in range(2)) for c in codes)
    assert words == ["AC", "CD", "EF", "GH", "KM"]  # no DX, XE, FG or HK
    assert counts.tolist() == [1] * 5


def test_k_out_of_range_is_refused():
    import array_api_compat.numpy as xp
    residues = encode_proteins([b"ACDEFGHIK"])
    for k in (2, 8):
        with pytest.raises(ValueError, match="k must be from 3 to 7"):
            composition_vector(xp, residues, k)


def test_merge_membership_equals_numpy_isin_on_sorted_and_run_sorted_codes():
    """Past the table's range (k >= 6) membership on numpy is a merge walk; the codes it gets
    are sorted or sorted within runs (a proteome's k-words' suffixes restart at each first
    letter). np.isin is the oracle."""
    from pairflow.kernels.composition_vectors import ALPHABET, _merge_member
    rng = np.random.default_rng(7)
    k = 7
    universe = ALPHABET ** (k - 1)
    for trial in range(5):
        words = np.unique(rng.integers(0, ALPHABET ** k, 20_000 + 5_000 * trial))
        sorted_set = np.unique(np.concatenate([words // ALPHABET,
                                               rng.integers(0, universe, 10_000)]))
        # sorted, sorted with repeats, and twenty sorted runs; and arbitrary order
        for x in (words // ALPHABET, np.sort(rng.integers(0, universe, 30_000)),
                  words % ALPHABET ** (k - 1), rng.integers(0, universe, 30_000),
                  np.zeros(3, np.int64), np.array([universe - 1, 0, universe - 1])):
            x = np.ascontiguousarray(x, dtype=np.int64)
            out = np.empty(len(x), np.bool_)
            _merge_member(sorted_set, x, out)
            assert np.array_equal(out, np.isin(x, sorted_set))


@pytest.mark.parametrize("k", [6, 7])
def test_numpy_and_torch_paths_agree_past_the_table_range(k):
    """At k = 6 and 7 the numpy path's merge and torch's searchsorted give the same distances
    on real proteome slices (the dictionary reference cannot hold 20^k words)."""
    proteomes = _real_proteomes(400)
    (_, npx, to_np), (_, tx, to_t) = _namespaces()
    got = _kernel_distances(proteomes, k, npx, to_np)
    want = _kernel_distances(proteomes, k, tx, to_t)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[np.triu_indices(3, 1)].min() > 0.01


def test_shorter_words_counted_from_longer_ones_equal_a_plain_count():
    """The numpy path counts the (k−1)- and (k−2)-words from the k-words' prefixes plus the
    words that end a protein or a break; a plain Python count of every window is the oracle
    (random residues with breaks, empty and one-residue inputs, with and without a final −1)."""
    from collections import Counter

    from pairflow.kernels.composition_vectors import (ALPHABET, _breaks, _merge_index,
                                                      _shorter_word_counts)
    rng = np.random.default_rng(11)
    for trial in range(200):
        res = rng.integers(-1, int(rng.integers(1, 21)), size=int(rng.integers(0, 80)))
        if trial % 2:
            res = np.concatenate([res, [-1]])
        res = res.astype(np.int8)
        for length in range(1, 6):
            longer, counts = word_counts(np, res, length + 1)
            words, got = _shorter_word_counts(_breaks(np, res), longer, counts, length)
            want = Counter(
                sum(int(c) * ALPHABET ** (length - 1 - t) for t, c in enumerate(res[i:i + length]))
                for i in range(len(res) - length + 1) if min(res[i:i + length]) >= 0)
            assert words.tolist() == sorted(want)
            assert got.tolist() == [want[w] for w in sorted(want)]
            if len(words):  # and a word's position found by the merge walk, runs included
                x = np.ascontiguousarray(np.concatenate([words[::2], words[1::3]]))
                at = np.empty(len(x), np.int64)
                _merge_index(words, x, at)
                assert np.array_equal(words[at], x)


def _numpy_vectors(proteomes, k):
    import array_api_compat.numpy as npx
    return [composition_vector(npx, encode_proteins([p.encode() for p in prots]), k)
            for prots in proteomes]


@pytest.mark.parametrize("k", [3, 4])
@pytest.mark.parametrize("dense", [True, False])
def test_a_tiles_distances_dense_or_sparse_equal_dict_bruteforce(k, dense):
    """A tile's distances, by dense blocks of words (several blocks at k = 4: 160,000 words)
    or by each pair's sparse walks, against the brute force; NaN where the mask says no."""
    import array_api_compat.numpy as npx
    proteomes = _synthetic_proteomes(seed=10 + k, n_proteomes=4)
    vectors = [dict_vector(p, k) for p in proteomes]
    want = np.array([[dict_distance(a, b) for b in vectors[2:]] for a in vectors])
    mask = np.ones((4, 2), bool)
    mask[3, 0] = False
    ours = _numpy_vectors(proteomes, k)
    got = cv_distance_matrix(npx, ours, ours[2:], mask, dense=dense)
    assert np.isnan(got[3, 0])
    np.testing.assert_allclose(got[mask], want[mask], rtol=0, atol=1e-9)


def test_dense_tiles_equal_the_dense_reference_on_real_proteins_at_k5():
    """Slices of three real proteomes at k = 5 (3.2 M words): the dense blocks against the
    oracle's whole-array vectors."""
    import array_api_compat.numpy as npx
    proteomes = _real_proteomes(300)
    want = dense_distances([dense_vector(p, 5) for p in proteomes])
    ours = _numpy_vectors(proteomes, 5)
    got = cv_distance_matrix(npx, ours, ours, np.ones((3, 3), bool), dense=True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_dense_tiles_are_chosen_for_many_pairs_at_small_k():
    """The cost model, by hand: at k = 5 a 26 x 26 tile of ~0.5 M words a vector costs
    52 x 3.2 M x 5 ns + 676 x 3.2 M x 0.1 ns ~ 1.05 s dense, 676 x 1 M x 30 ns ~ 20.8 s
    sparse; one pair of small vectors is cheaper walked; k = 7's 1.28 G words never dense."""
    assert prefer_dense(5, 52, 676, 514_000)
    assert not prefer_dense(5, 2, 1, 20_000)
    assert not prefer_dense(7, 52, 676, 1_300_000)
    assert not prefer_dense(4, 10, 0, 100_000)
