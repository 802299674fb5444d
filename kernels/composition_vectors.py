"""A proteome's composition vector (:mod:`kernels.composition` says the method and why it is
kept sparse), built from its residues: residues encoded base 20 (``encode_proteins``), the
counts of every word length a vector needs (``word_counts``, words never spanning two
proteins), membership of sorted word sets (``_member``: a table or a compiled merge walk),
the size of its support S (``_support_size``) and the vector itself (``composition_vector``:
its occurring k-words with their values plus its occurring (k−1)-words).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .backend import is_numpy_namespace
from .lazyjit import lazy_njit

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

