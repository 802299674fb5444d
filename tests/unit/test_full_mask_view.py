"""A large tile's full mask is one True seen as the block (``space.block_mask``: no block of
bytes per tile shape, 516 MB at a leaf of 22,700 reads); every consumer reads it as the block
of True it stands for (the oracle: the same call with a real block of True)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.pairs import space as sp


def _view(rows, cols):
    return np.broadcast_to(np.ones(1, bool), (rows, cols))


def test_block_mask_of_a_large_full_block_is_a_view_of_one_true():
    m = sp.block_mask(4096, 4096, None)
    assert m.strides == (0, 0) and m.shape == (4096, 4096) and not m.flags.writeable
    assert m.size >= sp.FULL_VIEW_CELLS and bool(m[4095, 17]) and bool(m[0, 0])
    small = sp.block_mask(8, 9, None)
    assert small.strides != (0, 0) and small.all()
    tri = sp.Triangle(5000)
    d = tri.mask(0, 4096, 0, 4096)  # a large diagonal block: a view of one line of bytes
    assert d.strides == (-1, 1) and not d.flags.writeable
    assert np.array_equal(d, ~np.tri(4096, 4096, k=0, dtype=bool))
    small = tri.mask(0, 9, 0, 12)  # a small one stays a block of bytes
    assert small.flags.c_contiguous and np.array_equal(small, ~np.tri(9, 12, k=0, dtype=bool))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(-45, 45), st.integers(0, 2 ** 31),
       st.integers(1, 4))
def test_a_diagonal_view_reads_as_its_block(nr, nc, diagonal, seed, k):
    """A large diagonal block's mask (a strided view, cell (i, j) = j - i > diagonal) is read
    by the kernels as the block of bytes ``np.tri`` makes (the oracle)."""
    from pairflow.kernels.bitset import bitset_intersections, bitset_jaccard_topk, kmer_bitsets
    from pairflow.kernels.jaccard import intersection_counts
    from pairflow.kernels.kmers import record_kmer_sets
    block_mask, cells = sp.block_mask, sp.FULL_VIEW_CELLS
    try:
        sp.FULL_VIEW_CELLS = 1  # every block "large": the view
        block_mask.cache_clear()
        view = block_mask(nr, nc, diagonal)
    finally:
        sp.FULL_VIEW_CELLS = cells
        block_mask.cache_clear()
    want = ~np.tri(nr, nc, k=diagonal, dtype=bool)
    want.flags.writeable = False
    assert view.strides == (-1, 1) and np.array_equal(view, want)
    rng = np.random.default_rng(seed)
    seqs = [bytes(rng.choice(list(b"ACGT"), 20)) for _ in range(nr + nc)]
    bits = kmer_bitsets(seqs, 3)
    a, b = bits[:nr], bits[nr:]
    for got, exp in zip(bitset_jaccard_topk(a, b, view, k, True, True, True),
                        bitset_jaccard_topk(a, b, want, k, True, True, True)):
        assert np.array_equal(got, exp)
    assert np.array_equal(bitset_intersections(a, b, view), bitset_intersections(a, b, want))
    vals, offs = record_kmer_sets(seqs, 3)
    sets = [vals[offs[i]:offs[i + 1]] for i in range(nr + nc)]
    assert np.array_equal(intersection_counts(sets[:nr], sets[nr:], view),
                          intersection_counts(sets[:nr], sets[nr:], want))
    from pairflow.kernels.synthetic import synthetic_topk  # read in place, not copied
    left, right = np.arange(nr)[:, None], np.arange(nr, nr + nc)[:, None]  # packs' rows
    for got, exp in zip(synthetic_topk(left, right, view, k, True, True, True),
                        synthetic_topk(left, right, want, k, True, True, True)):
        assert np.array_equal(got, exp)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 2 ** 31), st.integers(1, 4))
def test_kernels_and_topk_read_a_view_as_the_full_block(nr, nc, seed, k):
    from pairflow.engine.pairs.sinks.parts import TopK, _all_true
    from pairflow.kernels.bitset import bitset_intersections, bitset_jaccard_topk, kmer_bitsets
    from pairflow.kernels.jaccard import intersection_counts
    from pairflow.kernels.kmers import record_kmer_sets
    rng = np.random.default_rng(seed)
    seqs = [bytes(rng.choice(list(b"ACGT"), 20)) for _ in range(nr + nc)]
    bits = kmer_bitsets(seqs, 3)
    a, b = bits[:nr], bits[nr:]
    ones, view = np.ones((nr, nc), bool), _view(nr, nc)
    assert _all_true(view) and _all_true(ones)
    for got, want in zip(bitset_jaccard_topk(a, b, view, k, True, True, True),
                         bitset_jaccard_topk(a, b, ones, k, True, True, True)):
        assert np.array_equal(got, want)
    assert np.array_equal(bitset_intersections(a, b, view), bitset_intersections(a, b, ones))
    vals, offs = record_kmer_sets(seqs, 3)
    sets = [vals[offs[i]:offs[i + 1]] for i in range(nr + nc)]
    assert np.array_equal(intersection_counts(sets[:nr], sets[nr:], view),
                          intersection_counts(sets[:nr], sets[nr:], ones))
    values = rng.integers(0, 5, (nr, nc)) / 4.0
    sink = TopK(k)
    for both in (False, True):
        for got, want in zip(sink._compiled_cells(values, view, both),
                             sink._compiled_cells(values, ones, both)):
            assert np.array_equal(np.asarray(got), np.asarray(want))
