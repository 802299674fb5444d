"""Composition vectors of proteomes (Qi, Wang & Hao 2004, the CVTree method), kept sparse.

The vector of a proteome has one component per k-string w = a·m·b of the 20 standard amino
acids: (p(w) − p0(w)) / p0(w) with the Markov background p0(w) = p(a·m) · p(m·b) / p(m), where
p of a string is its count within proteins divided by the total count of strings of its length,
and 0 where p0(w) = 0. Words never span two proteins and a non-standard residue breaks them.

Why sparse, and why the pair kernel looks the way it does
---------------------------------------------------------
There are 20^k words (64 M at k = 6), so a dense vector per proteome does not fit in memory for
a few dozen proteomes. Non-zero components fall on S, the words whose (k−1)-prefix and
(k−1)-suffix both occur; S splits into P, the words that occur (stored: code and value), and
S \\ P, whose components are all exactly −1 (p = 0, p0 > 0). S \\ P is far larger than P, and it is
never materialised: |S| = Σ_m L(m)·R(m) over (k−2)-strings m, with L(m) and R(m) the numbers of
occurring (k−1)-strings ending and starting with m, and a pair's dot product splits into

    Σ_{P_A ∩ P_B} a·b − Σ_{P_A ∩ (S_B \\ P_B)} a − Σ_{(S_A \\ P_A) ∩ P_B} b
        + |(S_A \\ P_A) ∩ (S_B \\ P_B)|

where membership of w in S_B needs only B's occurring (k−1)-strings, and the last count follows
by inclusion–exclusion from |S_A ∩ S_B| (the same L·R sum over the (k−1)-strings both share).
So a proteome is stored as its occurring k-words with their values plus its occurring
(k−1)-words: memory grows with the proteome's length, not with 20^k, and a pair costs a few
sorted searches of one proteome's words in the other's.

A tile of many pairs at small k (20^k words at most 20^6) can do better on numpy: every
vector of the tile made dense a block of words at a time and the dot products as one matrix
product per block (``cv_distance_matrix``'s ``dense``; ``prefer_dense`` weighs the two by a cost
model). Memory stays a block per vector; the cost grows with 20^k per item, not per pair.

Everything is written against the array API (``xp``): numpy on the CPU, torch on CPU or GPU.
Codes are base-20 integers below 20^7: computed as int64, a numpy vector keeps them as int32
(20^7 < 2^31), other backends as int64.

This module holds the pair kernels (``cv_cosine``, ``cv_distance``, ``cv_distance_matrix``,
sparse and dense); the vectors are built in ``kernels/composition_vectors.py``, whose public
names it gives as well.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .backend import is_numpy_namespace
from .composition_vectors import (ALPHABET, AMINO_ACIDS, K_RANGE, CompositionVector,
                                  _member, _support_size, composition_vector, encode_proteins,
                                  word_counts)
from .lazyjit import lazy_njit

__all__ = ["AMINO_ACIDS", "CompositionVector", "encode_proteins", "word_counts",
           "composition_vector", "cv_cosine", "cv_distance", "cv_distance_matrix", "K_RANGE",
           "prefer_dense"]


def _suffixes_member(xp, a: CompositionVector, b_k1, k: int):
    """Which of a's k-words have their (k−1)-suffix among ``b_k1``. The suffixes of sorted words
    are sorted only within each first letter: through ``a.suffix_order`` one merge walk of the
    sorted suffixes (2.3 ms on 1.3 M words at k = 7) instead of one per first letter over all
    of ``b_k1`` (26 ms)."""
    if a.suffix_order is None or not is_numpy_namespace(xp):
        return _member(xp, b_k1, a.words % ALPHABET ** (k - 1), ALPHABET ** (k - 1))
    found = np.empty(a.suffixes.shape[0], dtype=np.bool_)
    found[a.suffix_order] = _member(xp, b_k1, a.suffixes, ALPHABET ** (k - 1))
    return found


def _check_vectors(vectors: Sequence[CompositionVector]) -> None:
    """Vectors whose cosines are defined: one k, none zero."""
    k = vectors[0].k
    for v in vectors:
        if v.k != k:
            raise ValueError(f"composition vectors of different k ({k} and {v.k})")
    if any(v.norm2 <= 0 for v in vectors):
        raise ValueError("a composition vector is zero: the cosine is undefined")


def cv_cosine(xp, a: CompositionVector, b: CompositionVector) -> float:
    """cos θ of two composition vectors (the split of the dot product in the module doc)."""
    _check_vectors((a, b))
    k = a.k
    if a.suffix_order is not None and b.suffix_order is not None and is_numpy_namespace(xp):
        return _numpy_dot(a, b, k) / (a.norm2 * b.norm2) ** 0.5
    words_range, k1_range = ALPHABET ** k, ALPHABET ** (k - 1)
    a_in_pb = _member(xp, b.words, a.words, words_range)
    b_in_pa = _member(xp, a.words, b.words, words_range)
    a_in_sb = _member(xp, b.k1, a.words // ALPHABET, k1_range) & _suffixes_member(xp, a, b.k1, k)
    b_in_sa = _member(xp, a.k1, b.words // ALPHABET, k1_range) & _suffixes_member(xp, b, a.k1, k)
    # both word lists are sorted, so the shared words appear in the same order in each
    shared = float(xp.sum(a.values[a_in_pb] * b.values[b_in_pa]))
    a_on_zb = float(xp.sum(a.values[a_in_sb & ~a_in_pb]))
    b_on_za = float(xp.sum(b.values[b_in_sa & ~b_in_pa]))
    n_pp = int(xp.sum(xp.astype(a_in_pb, xp.int64)))
    both_k1 = a.k1[_member(xp, b.k1, a.k1, k1_range)]
    n_ss = _support_size(xp, both_k1, k)
    n_ps = int(xp.sum(xp.astype(a_in_sb, xp.int64)))
    n_sp = int(xp.sum(xp.astype(b_in_sa, xp.int64)))
    n_zz = n_ss - n_ps - n_sp + n_pp
    dot = shared - a_on_zb - b_on_za + n_zz
    return dot / (a.norm2 * b.norm2) ** 0.5


def _numpy_dot(a: CompositionVector, b: CompositionVector, k: int) -> float:
    """The dot product of the module doc in compiled walks, no temporary array of words:
    the shared words in one walk of both word lists, each side's words on the other's
    support in one walk of its sorted suffixes and one of its prefixes against the other's
    (k−1)-words, and |S_A ∩ S_B| from the (k−1)-words both have (``_shared_support``).
    Against the array form (a walk per membership, an array for each, and a table of
    20^(k−2) counts) it streams each proteome's arrays fewer times."""
    in_pa = np.zeros(a.words.shape[0], dtype=np.bool_)
    in_pb = np.zeros(b.words.shape[0], dtype=np.bool_)
    shared, n_pp = _shared_words(a.words, a.values, b.words, b.values, in_pa, in_pb)
    a_on_zb, n_ps = _on_support(a.words, a.values, a.suffixes, a.suffix_order, in_pa, b.k1)
    b_on_za, n_sp = _on_support(b.words, b.values, b.suffixes, b.suffix_order, in_pb, a.k1)
    n_ss = _shared_support(a.k1, b.k1, ALPHABET ** (k - 2))
    return shared - a_on_zb - b_on_za + (n_ss - n_ps - n_sp + n_pp)


@lazy_njit(cache=True, nogil=True)
def _shared_words(a_words, a_values, b_words, b_values, a_in, b_in):
    """(Σ a·b over the words both have, how many): one walk of both sorted lists, marking
    the shared words in ``a_in`` and ``b_in``. Both lists advance by comparisons, not
    branches, which mispredict about half the time on merged lists (``_on_support``'s walks
    keep their branches: there a branch-free step repeats a scattered store, and measured
    slower)."""
    i = j = n = 0
    total = 0.0
    while i < a_words.shape[0] and j < b_words.shape[0]:
        x, y = a_words[i], b_words[j]
        same = x == y
        total += a_values[i] * b_values[j] * same
        a_in[i] |= same
        b_in[j] |= same
        n += same
        i += x <= y
        j += y <= x
    return total, n


@lazy_njit(cache=True, nogil=True)
def _on_support(words, values, suffixes, order, shared, other_k1):
    """(Σ of the values of the words on the other's support but not among its words, how
    many words are on its support): a word a·m·b is on it when both a·m and m·b are among
    the other's (k−1)-words. The suffixes walk in their sorted order; the prefixes of sorted
    words are sorted."""
    n, m = words.shape[0], other_k1.shape[0]
    suffix_in = np.zeros(n, dtype=np.bool_)
    p = 0
    for t in range(n):
        v = suffixes[t]
        while p < m and other_k1[p] < v:
            p += 1
        if p < m and other_k1[p] == v:
            suffix_in[order[t]] = True
    p = count = 0
    total = 0.0
    for i in range(n):
        v = words[i] // ALPHABET
        while p < m and other_k1[p] < v:
            p += 1
        if p < m and other_k1[p] == v and suffix_in[i]:
            count += 1
            if not shared[i]:
                total += values[i]
    return total, count


@lazy_njit(cache=True, nogil=True)
def _shared_support(a_k1, b_k1, tail):
    """|S_A ∩ S_B| = Σ_m L(m)·R(m) over the (k−1)-words both proteomes have (``tail`` =
    20^(k−2)): R(m) the length of m's run among their sorted prefixes, L(m) found by walking
    their suffixes, sorted within each first letter, against those runs. No table of 20^(k−2)
    counts (25 MB at k = 7) per pair."""
    both = np.empty(min(a_k1.shape[0], b_k1.shape[0]) + 1, dtype=np.int64)
    i = j = n = 0
    while i < a_k1.shape[0] and j < b_k1.shape[0]:
        x, y = a_k1[i], b_k1[j]
        both[n] = x
        n += x == y
        i += x <= y
        j += y <= x
    runs = np.empty(n, dtype=np.int64)  # the distinct prefixes, and how many words each starts
    lengths = np.empty(n, dtype=np.int64)
    r = 0
    for t in range(n):
        prefix = both[t] // ALPHABET
        if r and runs[r - 1] == prefix:
            lengths[r - 1] += 1
        else:
            runs[r] = prefix
            lengths[r] = 1
            r += 1
    total = 0
    t = 0
    while t < n:  # one first letter at a time: its words' suffixes are sorted
        base = (both[t] // tail) * tail
        p = 0
        while t < n and both[t] < base + tail:
            v = both[t] - base
            while p < r and runs[p] < v:
                p += 1
            if p < r and runs[p] == v:
                total += lengths[p]
            t += 1
    return total


def cv_distance(xp, a: CompositionVector, b: CompositionVector) -> float:
    """CVTree's distance (1 − cos θ) / 2, in [0, 1]."""
    return (1.0 - cv_cosine(xp, a, b)) / 2.0


def cv_distance_matrix(xp, left: Sequence[CompositionVector], right: Sequence[CompositionVector],
                       mask, dense: bool | None = None) -> np.ndarray:
    """Distances of one tile (left × right), NaN where ``mask`` is False. ``dense``: the dot
    products as matrix products over blocks of all 20^k words (``_dense_dots``), or by the
    sparse walks of each pair; None: as ``prefer_dense`` says (numpy only)."""
    mask = np.asarray(mask, dtype=bool)
    out = np.full(mask.shape, np.nan)
    left, right = list(left), list(right)
    if dense is None:
        dense = bool(left) and bool(right) and is_numpy_namespace(xp) and prefer_dense(
            left[0].k, len(left) + len(right), int(mask.sum()),
            np.mean([v.words.shape[0] for v in left + right]))
    if dense and mask.any():
        _check_vectors(left + right)
        dots = _dense_dots(left, right)
        norms = np.sqrt(np.outer([v.norm2 for v in left], [v.norm2 for v in right]))
        out[mask] = ((1.0 - dots / norms) / 2.0)[mask]
        return out
    for i, j in zip(*np.nonzero(mask)):
        out[i, j] = cv_distance(xp, left[i], right[j])
    return out


# Per element, measured on tiles of the predicted ragout proteomes at k = 5 and 6 (one core):
# a word of a dense block costs about DENSE_WRITE_S to make per item and DENSE_MAC_S per pair
# in the block's matrix product; a pair's sparse walks about SPARSE_STEP_S per word of the two
# (34 ms a pair of ~0.5 M words each at k = 5, 73 ms at k = 6 with ~0.7 M)
DENSE_WRITE_S, DENSE_MAC_S, SPARSE_STEP_S = 5e-9, 1e-10, 3e-8
DENSE_MAX_WORDS = ALPHABET ** 6  # past this a tile's blocks stream more than they save
DENSE_BLOCK_WORDS = 1 << 15


def prefer_dense(k: int, items: int, pairs: int, mean_words: float) -> bool:
    """Should a tile of ``items`` vectors (left and right) and ``pairs`` wanted pairs take
    dense blocks? When its modelled cost is below the sparse walks': every item's block of
    each of the 20^k words made once, every pair's products over them, against every pair's
    walks over the words both vectors hold."""
    words = ALPHABET ** k
    if words > DENSE_MAX_WORDS or pairs == 0:
        return False
    dense = items * words * DENSE_WRITE_S + pairs * words * DENSE_MAC_S
    return dense < pairs * 2 * mean_words * SPARSE_STEP_S


def _dense_dots(left: Sequence[CompositionVector], right: Sequence[CompositionVector]):
    """Every left·right dot product of whole vectors, a block of ``DENSE_BLOCK_WORDS`` words
    at a time: each vector's block made dense (its values at its words, −1 where a word is on
    its support S but not among them, 0 elsewhere) and one matrix product per block."""
    k = left[0].k
    words, tail = ALPHABET ** k, ALPHABET ** (k - 1)

    def k1_mask(v):
        m = np.zeros(tail, dtype=bool)
        m[v.k1] = True
        return m
    # a tile on the diagonal has one side: its blocks are made once
    same = len(left) == len(right) and all(a is b for a, b in zip(left, right))
    sides = [(vs, [k1_mask(v) for v in vs]) for vs in ((left,) if same else (left, right))]
    dots = np.zeros((len(left), len(right)))
    for lo in range(0, words, DENSE_BLOCK_WORDS):
        hi = min(words, lo + DENSE_BLOCK_WORDS)
        blocks = []
        for vs, masks in sides:
            block = np.empty((len(vs), hi - lo))
            for row, (v, m) in enumerate(zip(vs, masks)):
                _dense_block(v.words, v.values, m, lo, block[row])
            blocks.append(block)
        dots += blocks[0] @ blocks[-1].T
    return dots


@lazy_njit(cache=True, nogil=True)
def _dense_block(words, values, k1_mask, lo, out):
    """Words lo .. lo + len(out) − 1 of one vector, dense: −1 on the support (the word's
    (k−1)-prefix and suffix in ``k1_mask``), then the values of the words it holds."""
    tail = k1_mask.shape[0]
    prefix, letter, suffix = lo // ALPHABET, lo % ALPHABET, lo % tail
    for t in range(out.shape[0]):
        out[t] = -1.0 if k1_mask[prefix] and k1_mask[suffix] else 0.0
        letter += 1
        if letter == ALPHABET:
            letter = 0
            prefix += 1
        suffix += 1
        if suffix == tail:
            suffix = 0
    i = np.searchsorted(words, lo)
    hi = lo + out.shape[0]
    while i < words.shape[0] and words[i] < hi:
        out[words[i] - lo] = values[i]
        i += 1
