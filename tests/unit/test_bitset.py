"""The bitset Jaccard kernel (kernels/bitset.py) against plain Python sets, and against the merge
kernel on every pair of real reads."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.bitset import (bitset_intersections, bitset_jaccard, bitset_sizes, bitset_words,
                            canonical_slots, kmer_bitsets, prefer_bitset)
from pairflow.kernels.jaccard import intersection_counts
from pairflow.kernels.kmers import canonical_kmers, record_kmer_sets
from tests.conftest import need, need_module
from tests.oracles import READS, jaccard, kmer_set, read_fastq

_seq = st.text(alphabet="ACGTacgtNRY", min_size=0, max_size=60)


def _members(row: np.ndarray) -> list[int]:
    return [i for i in range(64 * len(row)) if int(row[i // 64]) >> (i % 64) & 1]


def _slot_of(kmer: str, k: int, canonical: bool) -> int:
    code = int(kmer.translate(str.maketrans("ACGT", "0123")), 4)
    return int(canonical_slots(k)[0][code]) if canonical else code


@settings(derandomize=True, max_examples=150, deadline=None)
@given(seqs=st.lists(_seq, min_size=1, max_size=5), k=st.integers(1, 6),
       canonical=st.booleans())
def test_bitsets_hold_exactly_the_kmers(seqs, k, canonical):
    bits = kmer_bitsets([s.encode() for s in seqs], k, canonical)
    assert bits.shape == (len(seqs), bitset_words(k, canonical)) and bits.dtype == np.uint64
    for row, seq in zip(bits, seqs):
        want = sorted(_slot_of(m, k, canonical) for m in kmer_set(seq, k, canonical))
        assert _members(row) == want
    assert bitset_sizes(bits).tolist() == [len(kmer_set(s, k, canonical)) for s in seqs]


def test_canonical_slots_count():
    """Odd k: half the codes are canonical; even k adds the reverse-complement palindromes."""
    for k in range(1, 9):
        n = len(canonical_slots(k)[1])
        assert n == (4 ** k + (4 ** (k // 2) if k % 2 == 0 else 0)) // 2


@pytest.mark.parametrize("count", ["dense", "sparse", "auto"])
@settings(derandomize=True, max_examples=100, deadline=None)
@given(lefts=st.lists(_seq, max_size=6), rights=st.lists(_seq, max_size=6),
       k=st.integers(1, 5), canonical=st.booleans(), data=st.data())
def test_tile_counts_and_jaccard_equal_sets(lefts, rights, k, canonical, data, count):
    """Both ways of counting (a popcount per word; the right rows' postings) against Python
    sets, with and without a mask."""
    a = kmer_bitsets([s.encode() for s in lefts], k, canonical)
    b = kmer_bitsets([s.encode() for s in rights], k, canonical)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=len(lefts) * len(rights),
                                       max_size=len(lefts) * len(rights))),
                    bool).reshape(len(lefts), len(rights))
    sa = [kmer_set(s, k, canonical) for s in lefts]
    sb = [kmer_set(s, k, canonical) for s in rights]
    want = np.array([[len(x & y) for y in sb] for x in sa], np.int64).reshape(mask.shape)
    want_j = np.array([[jaccard(x, y) for y in sb] for x in sa]).reshape(mask.shape)
    assert np.array_equal(bitset_intersections(a, b, count=count), want)
    assert np.array_equal(bitset_intersections(a, b, mask=mask, count=count),
                          np.where(mask, want, 0))
    inter, sim = bitset_jaccard(list(a), list(b), mask, count=count)
    assert np.array_equal(inter, np.where(mask, want, 0))
    np.testing.assert_allclose(sim, np.where(mask, want_j, 0.0), rtol=0, atol=1e-15)


def test_record_kmer_sets_equal_one_call_per_record():
    rng = random.Random(3)
    seqs = ["".join(rng.choice("ACGTN") for _ in range(rng.randrange(0, 90)))
            for _ in range(200)]
    for k, canonical in ((3, True), (7, False), (21, True)):
        values, offsets = record_kmer_sets([s.encode() for s in seqs], k, canonical)
        for r, s in enumerate(seqs):
            one = canonical_kmers([s.encode()], k, canonical=canonical).hashes
            assert np.array_equal(values[offsets[r]:offsets[r + 1]], one)


@pytest.fixture(scope="module")
def reads():
    path = str(need(os.path.join(READS, "reads_1.fq.gz")))
    return read_fastq(path)[:400]


@pytest.mark.parametrize("k", [5, 7])
@pytest.mark.parametrize("canonical", [True, False])
def test_bitset_and_merge_agree_on_every_pair_of_real_reads(reads, k, canonical):
    seqs = [s.encode() for _, s in reads]
    bits = kmer_bitsets(seqs, k, canonical)
    values, offsets = record_kmer_sets(seqs, k, canonical)
    sets = [values[offsets[i]:offsets[i + 1]] for i in range(len(seqs))]
    by_bits = bitset_intersections(bits, bits, count="dense")
    by_merge = intersection_counts(sets, sets)
    assert np.array_equal(by_bits, by_merge)
    assert np.array_equal(bitset_intersections(bits, bits, count="sparse"), by_merge)
    assert np.array_equal(bitset_sizes(bits), np.diff(offsets))
    # and both equal Python sets on a sample of the pairs
    rng = random.Random(k)
    oracle = [kmer_set(s, k, canonical) for _, s in reads]
    for _ in range(2000):
        i, j = rng.randrange(len(reads)), rng.randrange(len(reads))
        assert by_bits[i, j] == len(oracle[i] & oracle[j])


def test_torch_path_equals_numpy(reads):
    torch = need_module("torch")
    from pairflow.kernels.backend import namespace_for, to_device
    xp = namespace_for("torch-cpu")
    bits = kmer_bitsets([s.encode() for _, s in reads[:120]], 5)
    rows = [to_device(xp, r.view(np.int64), "torch-cpu") for r in bits]
    assert isinstance(rows[0], torch.Tensor)
    mask = np.triu(np.ones((60, 60), bool), 1)
    got = bitset_intersections(rows[:60], rows[60:], mask=mask, xp=xp)
    assert np.array_equal(got, bitset_intersections(bits[:60], bits[60:], mask=mask))


def test_prefer_sparse_rule():
    """Steps a pair from postings (|A| |B| / bits) times their cost against words a pair:
    reads of ~90 k-mers are counted from postings at k = 7 (8,192 canonical codes, 128 words)
    and by popcount at k = 5 and 6."""
    from pairflow.kernels.bitset import SPARSE_STEP_COST, prefer_sparse
    assert prefer_sparse(128, 90, 90)       # 90 * 90 / 8192 * 16 = 15.8 < 128
    assert not prefer_sparse(33, 90, 90)    # 90 * 90 / 2112 * 16 = 61 > 33
    assert not prefer_sparse(8, 90, 90)
    assert prefer_sparse(514, 90, 90) and not prefer_sparse(128, 300, 300)
    assert SPARSE_STEP_COST == 16.0


def test_prefer_bitset_rule():
    assert prefer_bitset(5, 100) and prefer_bitset(7, 100) and prefer_bitset(8, 100)
    assert not prefer_bitset(8, 20)  # 514 words against 20 k-mers: the merge
    assert not prefer_bitset(8, 20, canonical=False)
    assert prefer_bitset(8, 100_000)  # a genome at k = 8
    assert not prefer_bitset(9, 10**7)  # past k = 8, never
    with pytest.raises(ValueError, match="up to 8"):
        kmer_bitsets([b"ACGT" * 5], 9)
