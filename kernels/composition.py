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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .backend import is_numpy_namespace
from .lazyjit import lazy_njit

__all__ = ["AMINO_ACIDS", "CompositionVector", "encode_proteins", "word_counts",
           "composition_vector", "cv_cosine", "cv_distance", "cv_distance_matrix", "K_RANGE",
           "prefer_dense"]

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
ALPHABET = len(AMINO_ACIDS)
K_RANGE = (3, 7)  # k − 2 ≥ 1 for the background; 20^7 words still fit int64 codes with room

_CODE = np.full(256, -1, dtype=np.int8)
for _i, _aa in enumerate(AMINO_ACIDS):
    _CODE[ord(_aa)] = _i
    _CODE[ord(_aa.lower())] = _i


@dataclass
class CompositionVector:
    """One proteome's composition vector: ``words`` the occurring k-words (sorted codes),
    ``values`` their components, ``k1`` the occurring (k−1)-words (sorted codes), ``norm2`` the
    squared norm of the whole vector (the −1 components included), ``support`` |S|."""

    k: int
    words: Any
    values: Any
    k1: Any
    norm2: float
    support: int
    # numpy only: the words' (k−1)-suffixes sorted, and the order that sorts them (int32), so
    # that a pair looks them up in one merge walk; None elsewhere (searchsorted takes them in
    # any order)
    suffix_order: Any = None
    suffixes: Any = None

    @property
    def nbytes(self) -> int:
        arrays = (self.words, self.values, self.k1, self.suffix_order, self.suffixes)
        return sum(int(a.nbytes) for a in arrays if a is not None)


def encode_proteins(proteins: Sequence[bytes]) -> np.ndarray:
    """Residue codes 0..19 of the proteins, joined by a −1 so that no word spans two proteins;
    any letter outside the 20 standard amino acids (X, B, Z, U, O, '*', '-') is a −1 too."""
    parts = []
    for seq in proteins:
        parts.append(_CODE[np.frombuffer(bytes(seq), dtype=np.uint8)])
        parts.append(np.full(1, -1, dtype=np.int8))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int8)


def _sorted_unique_counts(xp, codes):
    """(unique sorted codes, their counts) by sort + neighbour comparison: the counts come out
    in code order, which every lookup after it relies on."""
    n = codes.shape[0]
    if n == 0:
        return codes, xp.zeros(0, dtype=xp.int64, device=codes.device)
    s = xp.sort(codes)
    starts = xp.concat([xp.ones(1, dtype=xp.bool, device=s.device), s[1:] != s[:-1]])
    first = xp.nonzero(starts)[0]
    ends = xp.concat([first[1:], xp.asarray([n], dtype=first.dtype, device=first.device)])
    return xp.take(s, first), xp.astype(ends - first, xp.int64)


def _breaks(xp, residues):
    """(the residues as int64, the number of −1 before each position): what finding every
    clean word of any length needs, computed once per proteome."""
    r = xp.astype(residues, xp.int64)
    bad = xp.astype(r < 0, xp.int64)
    return r, xp.concat([xp.zeros(1, dtype=xp.int64, device=r.device),
                         xp.cumulative_sum(bad)])


def word_counts(xp, residues, length: int, breaks=None):
    """(sorted codes, counts) of every word of ``length`` residues that holds no −1.
    ``breaks``: ``_breaks`` of these residues, when the caller has it."""
    n = residues.shape[0] - length + 1
    if n <= 0:
        none = xp.zeros(0, dtype=xp.int64, device=residues.device)
        return none, none
    r, bad_before = breaks if breaks is not None else _breaks(xp, residues)
    clean = (bad_before[length:] - bad_before[:n]) == 0
    codes = xp.zeros(n, dtype=xp.int64, device=r.device)
    for t in range(length):  # Horner over the word's letters: k ≤ 7 array passes
        codes = codes * ALPHABET + r[t:t + n]
    return _sorted_unique_counts(xp, codes[clean])


def _shorter_word_counts(breaks, words, counts, length: int):
    """(sorted codes, counts) of the words of ``length`` residues, from those of ``length + 1``
    (``words`` sorted and unique, with ``counts``), on numpy (``breaks``: ``_breaks`` of the
    residues). Each occurrence of a clean word
    either starts a clean longer word, and is counted there under its prefix, or is followed
    by a −1 (or the end), and those few (about one per protein) are counted here. The longer
    words' prefixes are already sorted: no second sort, which with the word codes was half of a
    proteome's vector."""
    r, bad_before = breaks
    n = r.shape[0] - length + 1
    if n <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if words.shape[0]:
        prefixes = words // ALPHABET
        first = np.flatnonzero(np.concatenate([[True], prefixes[1:] != prefixes[:-1]]))
        short, short_counts = prefixes[first], np.add.reduceat(counts, first)
    else:
        short, short_counts = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    last = np.ones(n, dtype=bool)  # the residue after the word is a −1, or there is none
    last[:-1] = r[length:] < 0
    at = np.flatnonzero(last & ((bad_before[length:] - bad_before[:n]) == 0))
    codes = np.zeros(at.shape[0], dtype=np.int64)
    for t in range(length):
        codes = codes * ALPHABET + r[at + t]
    ends, end_counts = np.unique(codes, return_counts=True)
    pos = np.searchsorted(short, ends)
    hit = pos < short.shape[0]
    hit[hit] = short[pos[hit]] == ends[hit]
    short_counts = short_counts.copy()
    short_counts[pos[hit]] += end_counts[hit]
    new = ~hit
    return (np.insert(short, pos[new], ends[new]),
            np.insert(short_counts, pos[new], end_counts[new].astype(np.int64)))


# numpy's isin with a direct-address table answers each code in one step where a binary search
# takes log2(n); the table costs one byte per possible code, so only up to this range.
_TABLE_RANGE = 1 << 23


def _member(xp, sorted_set, x, universe: int):
    """Boolean: which entries of ``x`` are in the sorted unique array ``sorted_set`` (codes below
    ``universe``): on numpy a table lookup for small universes, else a merge (``_merge_member``);
    elsewhere ``searchsorted``, which the array API standard has."""
    if sorted_set.shape[0] == 0:
        return xp.zeros(x.shape, dtype=xp.bool, device=x.device)
    if is_numpy_namespace(xp):
        if universe <= _TABLE_RANGE:
            return np.isin(x, sorted_set, kind="table")
        out = np.empty(x.shape[0], dtype=np.bool_)
        _merge_member(np.ascontiguousarray(sorted_set), np.ascontiguousarray(x), out)
        return out
    idx = xp.clip(xp.searchsorted(sorted_set, x), 0, sorted_set.shape[0] - 1)
    return xp.take(sorted_set, idx) == x


@lazy_njit(cache=True, nogil=True)
def _merge_member(sorted_set, x, out):
    """out[i] = x[i] in sorted_set, walking both in order: every ``x`` here is sorted or a few
    sorted runs (a proteome's words, their prefixes, or their suffixes: sorted within each
    first letter), so one pass streams both arrays where a binary search per entry jumps
    about arrays of megabytes (searchsorted was 85 % of a k = 7 pair, and two processes
    doing it measured half as fast each). A step back in ``x`` starts a new run, found by
    binary search."""
    n = sorted_set.shape[0]
    p = 0
    prev = x[0] if x.shape[0] else 0
    for i in range(x.shape[0]):
        v = x[i]
        if v < prev:  # a new run: position by binary search
            p = np.searchsorted(sorted_set[:p], v)
        while p < n and sorted_set[p] < v:
            p += 1
        out[i] = p < n and sorted_set[p] == v
        prev = v


@lazy_njit(cache=True, nogil=True)
def _merge_index(sorted_set, x, out):
    """out[i] = the position of x[i] in sorted_set, for x[i] known to be there: the walk of
    ``_merge_member`` (x sorted or in a few sorted runs)."""
    p = 0
    prev = x[0] if x.shape[0] else 0
    for i in range(x.shape[0]):
        v = x[i]
        if v < prev:
            p = np.searchsorted(sorted_set[:p], v)
        while sorted_set[p] < v:
            p += 1
        out[i] = p
        prev = v


def _lookup(xp, sorted_set, values, x):
    """values[position of x in sorted_set], for x known to be present. On numpy a merge walk
    (``x`` here is a proteome's sorted words cut to a prefix, a suffix or a middle: sorted, or
    sorted within each first letter): searchsorted's binary search per word was a third of a
    k = 7 parse."""
    if is_numpy_namespace(xp) and x.shape[0]:
        at = np.empty(x.shape[0], dtype=np.int64)
        _merge_index(np.ascontiguousarray(sorted_set), np.ascontiguousarray(x), at)
        return values[at]
    return xp.take(values, xp.searchsorted(sorted_set, x))


def _support_size(xp, kmin1_words, k: int) -> int:
    """|{a·m·b : a·m and m·b among ``kmin1_words``}| = Σ_m L(m)·R(m)."""
    if kmin1_words.shape[0] == 0:
        return 0
    tail = ALPHABET ** (k - 2)
    if is_numpy_namespace(xp) and tail <= _TABLE_RANGE:
        # L(m) and R(m) by direct counting over the (k−2)-strings (20^5 at k = 7): no sort of
        # the (k−1)-words, which took 36 ms of a 75 ms pair at k = 7
        left = np.bincount(kmin1_words % tail, minlength=tail)
        prefixes = kmin1_words // ALPHABET  # sorted: R(m) is the length of m's run
        first = np.flatnonzero(np.concatenate([[True], prefixes[1:] != prefixes[:-1]]))
        right = np.diff(np.concatenate([first, [prefixes.shape[0]]]))
        return int(np.dot(left[prefixes[first]], right))
    ends, left = _sorted_unique_counts(xp, kmin1_words % tail)     # a·m grouped by m
    starts, right = _sorted_unique_counts(xp, kmin1_words // ALPHABET)  # m·b grouped by m
    # both sorted: the m found on each side appear in the same order
    universe = ALPHABET ** (k - 2)
    return int(xp.sum(left[_member(xp, starts, ends, universe)]
                      * right[_member(xp, ends, starts, universe)]))


def composition_vector(xp, residues, k: int) -> CompositionVector:
    """The sparse composition vector of one proteome from its residue codes
    (:func:`encode_proteins`, moved to ``xp``)."""
    if not K_RANGE[0] <= k <= K_RANGE[1]:
        raise ValueError(f"k must be from {K_RANGE[0]} to {K_RANGE[1]}, got {k!r}")
    breaks = _breaks(xp, residues)
    words, counts = word_counts(xp, residues, k, breaks)
    if is_numpy_namespace(xp):
        k1, counts1 = _shorter_word_counts(breaks, words, counts, k - 1)
        k2, counts2 = _shorter_word_counts(breaks, k1, counts1, k - 2)
    else:
        k1, counts1 = word_counts(xp, residues, k - 1, breaks)
        k2, counts2 = word_counts(xp, residues, k - 2, breaks)
    if words.shape[0] == 0:
        return CompositionVector(k, words, xp.zeros(0, dtype=xp.float64, device=words.device),
                                 k1, 0.0, 0)
    freq = xp.astype(counts, xp.float64) / float(xp.sum(counts))
    freq1 = xp.astype(counts1, xp.float64) / float(xp.sum(counts1))
    freq2 = xp.astype(counts2, xp.float64) / float(xp.sum(counts2))
    tail1 = ALPHABET ** (k - 1)
    p_prefix = _lookup(xp, k1, freq1, words // ALPHABET)
    p_suffix = _lookup(xp, k1, freq1, words % tail1)
    p_middle = _lookup(xp, k2, freq2, (words // ALPHABET) % (ALPHABET ** (k - 2)))
    background = p_prefix * p_suffix / p_middle
    values = (freq - background) / background
    support = _support_size(xp, k1, k)
    norm2 = float(xp.sum(values * values)) + (support - words.shape[0])
    order = suffixes = None
    if is_numpy_namespace(xp):
        suffixes = words % ALPHABET ** (k - 1)
        order = np.argsort(suffixes, kind="stable").astype(np.int32)
        # kept as int32 (codes below 20^7 < 2^31): a vector is a third smaller to hand over
        # through the object store and to walk in a pair
        suffixes = suffixes[order].astype(np.int32)
        words, k1 = words.astype(np.int32), k1.astype(np.int32)
    return CompositionVector(k, words, values, k1, norm2, support, order, suffixes)


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
