"""Canonical k-mer sets, the items of exact Jaccard all-pairs.

Why this shape
--------------
* An item is a *sorted unique uint64 array*: it is compact (8 bytes per k-mer), shares zero-copy
  through the Ray object store, and makes |A ∩ B| a linear merge (see :mod:`kernels.jaccard`).
* 2-bit codes (A=0, C=1, G=2, T=3) make the reverse complement of a base ``3 - code``, so one pass
  rolls the forward and the reverse-complement code together; canonical = min of the two, so a
  genome and its reverse complement give the same set (what mash and sourmash do).
* k <= 31 keeps every code below 2**62: it fits int64, which is what torch and other array-API
  namespaces without uint64 need, and a code never collides with another k (no hashing, so the
  Jaccard index is exact, unlike sketch tools).
* Anything but ACGT/acgt (N, IUPAC codes, gaps, '*', whitespace) breaks windows instead of being
  guessed, and such windows are counted so an app can warn about low-quality items.
* Records are scanned separately: a k-mer spanning the junction of two contigs or chromosomes is not
  in the genome.

Speed
-----
The scan is one compiled pass (numba, ``nogil`` so engine threads can parse items in parallel).
Deduplication is a sort followed by a neighbour comparison, not ``np.unique``: a compiled radix
sort on only the 2k significant bits plus an in-place compaction (``sort="numpy"``: ``np.sort``
instead). Both are timed per genome side by side in benchmarks/RESULTS.md, "Kernel
micro-benchmarks: k-mers and Jaccard".
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

import numpy as np

from .lazyjit import compiled, lazy_njit

__all__ = ["KmerSet", "canonical_kmers", "record_kmer_sets", "MAX_K", "encode_table"]

MAX_K = 31
# the bitset kernel's largest k (kernels/bitset.py): 4^8 bits = 8 KiB per set; past that a set is
# mostly zero words. Here, so an app can rule the bitset out without importing it (and numba)
MAX_BITSET_K = 8
# Items of at most this many bases are scanned with numpy while the compiled kernels are not loaded
# yet (a small run never pays numba's import and load); once loaded, always them. Same codes.
SMALL_BASES = 1 << 17

# byte -> 2-bit code; 4 means "not a base": the window containing it is skipped.
_TABLE = np.full(256, 4, dtype=np.uint8)
for _i, _c in enumerate(b"ACGT"):
    _TABLE[_c] = _i
    _TABLE[bytes([_c]).lower()[0]] = _i


def encode_table() -> np.ndarray:
    """A copy of the byte -> 2-bit lookup table (4 = not ACGT), for kernels that need the same encoding."""
    return _TABLE.copy()


class KmerSet(NamedTuple):
    """The canonical k-mers of one item, plus the counts an app needs to judge the input.

    ``hashes``: sorted unique uint64 canonical codes.  ``n_windows``: windows of length k over all
    records (records shorter than k have none).  ``skipped_windows``: those containing a non-ACGT
    letter, hence not in ``hashes``.
    """

    hashes: np.ndarray
    skipped_windows: int
    n_windows: int


@lazy_njit(cache=True, nogil=True)
def _scan(buf, starts, ends, k, table, out, canonical=True):
    """Roll forward and reverse-complement codes over each record; write canonical codes to
    ``out`` (``canonical=False``: the forward strand's codes, for strand-specific k-mers).

    Returns the number written.  Everything is kept in uint64: mixing signed and unsigned integers
    makes numba fall back to float64, which would silently lose bits.
    """
    mask = np.uint64((1 << (2 * k)) - 1)
    shift = np.uint64(2 * (k - 1))
    two = np.uint64(2)
    three = np.uint64(3)
    n = 0
    for r in range(starts.shape[0]):
        fw = np.uint64(0)
        rc = np.uint64(0)
        run = 0
        for p in range(starts[r], ends[r]):
            c = table[buf[p]]
            if c > 3:
                run = 0
                continue
            cu = np.uint64(c)
            fw = ((fw << two) | cu) & mask
            rc = (rc >> two) | ((three - cu) << shift)
            run += 1
            if run >= k:
                out[n] = fw if (fw < rc or not canonical) else rc
                n += 1
    return n


@lazy_njit(cache=True, nogil=True)
def _lsd_bucket(src, dst, lo, hi, nbits, digit_bits, counts):
    """LSD radix sort of ``src[lo:hi]`` on its low ``nbits`` bits, ping-ponging with ``dst``.

    Returns True when the sorted run ended up in ``dst``.  ``counts`` is scratch of shape
    (passes, 2**digit_bits), reused across buckets to avoid an allocation per bucket.
    """
    npass = (nbits + digit_bits - 1) // digit_bits
    nb = 1 << digit_bits
    dmask = np.uint64(nb - 1)
    for p in range(npass):
        for b in range(nb):
            counts[p, b] = 0
    for i in range(lo, hi):
        v = src[i]
        for p in range(npass):
            counts[p, (v >> np.uint64(p * digit_bits)) & dmask] += 1
    in_dst = False
    for p in range(npass):
        total = lo
        for b in range(nb):
            t = counts[p, b]
            counts[p, b] = total
            total += t
        sh = np.uint64(p * digit_bits)
        s = dst if in_dst else src
        d = src if in_dst else dst
        for i in range(lo, hi):
            v = s[i]
            j = (v >> sh) & dmask
            d[counts[p, j]] = v
            counts[p, j] += 1
        in_dst = not in_dst
    return in_dst


@lazy_njit(cache=True, nogil=True)
def _radix_sort(a, tmp, nbits, top_bits, digit_bits):
    """Sort ``a`` (uint64, values < 2**nbits) in place, with ``tmp`` as scratch of the same size.

    One most-significant-digit pass on the top ``top_bits`` bits scatters the codes into buckets
    small enough for the L2 cache; each bucket is then LSD-sorted on the remaining bits in cache.
    Rule: sort only the 2k significant bits (not 64) and keep the passes in cache (against
    ``np.sort``: benchmarks/RESULTS.md, "Kernel micro-benchmarks: k-mers and Jaccard").
    """
    n = a.shape[0]
    if n < 2:
        return
    low = nbits - top_bits
    npass = max(1, (low + digit_bits - 1) // digit_bits)
    counts = np.zeros((npass, 1 << digit_bits), dtype=np.int64)
    if top_bits == 0:
        if _lsd_bucket(a, tmp, 0, n, nbits, digit_bits, counts):
            a[:] = tmp
        return
    nb = 1 << top_bits
    sh = np.uint64(low)
    starts = np.zeros(nb + 1, dtype=np.int64)
    for i in range(n):
        starts[(a[i] >> sh) + np.uint64(1)] += 1
    for b in range(nb):
        starts[b + 1] += starts[b]
    pos = starts[:-1].copy()
    for i in range(n):
        v = a[i]
        j = v >> sh
        tmp[pos[j]] = v
        pos[j] += 1
    for b in range(nb):
        lo = starts[b]
        hi = starts[b + 1]
        if hi - lo < 2 or low == 0:
            a[lo:hi] = tmp[lo:hi]
        elif not _lsd_bucket(tmp, a, lo, hi, low, digit_bits, counts):
            a[lo:hi] = tmp[lo:hi]


def _radix_plan(n: int, nbits: int) -> tuple[int, int]:
    """(top_bits, digit_bits): an MSD split into buckets of ~8 k codes (64 KB, L2-resident), then
    the fewest LSD passes with digits of at most 11 bits (2048 counters stay in L1): the fastest
    of the layouts tried on E. coli, k = 21."""
    top = 0
    while top < nbits and (n >> (top + 1)) >= 8192:
        top += 1
    low = nbits - top
    npass = max(1, -(-low // 11))
    digit = max(1, -(-low // npass))
    return top, digit


@lazy_njit(cache=True, nogil=True)
def _compact_sorted(a):
    """Drop neighbours equal to their predecessor, in place; returns the unique count."""
    n = a.shape[0]
    if n == 0:
        return 0
    w = 1
    prev = a[0]
    for i in range(1, n):
        v = a[i]
        if v != prev:
            a[w] = v
            w += 1
            prev = v
    return w


def _as_bytes(seq) -> bytes | memoryview:
    if isinstance(seq, str):
        return seq.encode("ascii")
    if isinstance(seq, np.ndarray):
        return np.ascontiguousarray(seq, dtype=np.uint8).tobytes()
    return seq


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= MAX_K:
        raise ValueError(f"k must be an integer between 1 and {MAX_K}, got k={k!r}")
    return int(k)


def _canonical_numpy(buf, starts, ends, k: int,
                     canonical: bool = True) -> tuple[np.ndarray, int]:
    """(sorted unique canonical codes, valid windows) as ``_scan`` + sort would give them, in
    numpy: every window of every record at once (small items only: k codes per window);
    ``canonical=False``: the forward strand's codes."""
    fw_shift = np.arange(2 * (k - 1), -1, -2, dtype=np.uint64)   # first base is most significant
    rc_shift = np.arange(0, 2 * k, 2, dtype=np.uint64)
    found, valid_total = [], 0
    for s, e in zip(starts, ends):
        if e - s < k:
            continue
        w = np.lib.stride_tricks.sliding_window_view(_TABLE[buf[s:e]], k)
        valid = (w < 4).all(axis=1)
        w = w[valid].astype(np.uint64)
        valid_total += int(valid.sum())
        fw = (w << fw_shift).sum(axis=1, dtype=np.uint64)
        rc = ((np.uint64(3) - w) << rc_shift).sum(axis=1, dtype=np.uint64)
        found.append(np.minimum(fw, rc) if canonical else fw)
    codes = np.concatenate(found) if found else np.empty(0, np.uint64)
    return np.unique(codes), valid_total


def canonical_kmers(seqs: Iterable[bytes] | bytes, k: int, *, sort: str = "radix",
                    canonical: bool = True) -> KmerSet:
    """Sorted unique canonical k-mer codes of the records of one item.

    ``seqs`` is the item's records (bytes; str and uint8 arrays are accepted too); a single bytes
    object is taken as one record.  ``sort="numpy"`` uses ``np.sort`` instead of the radix sort —
    kept for benchmarking and as a cross-check; both give identical results.
    ``canonical=False`` keeps each k-mer as read (strand-specific: a sequence and its reverse
    complement then differ).
    """
    k = _check_k(k)
    if sort not in ("radix", "numpy"):
        raise ValueError(f"sort must be 'radix' or 'numpy', got {sort!r}")
    if isinstance(seqs, (bytes, bytearray, memoryview, str)) or (isinstance(seqs, np.ndarray) and seqs.ndim == 1):
        seqs = [seqs]
    parts = [_as_bytes(s) for s in seqs]
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    n_windows = int(np.maximum(lengths - (k - 1), 0).sum()) if len(parts) else 0
    if n_windows == 0:
        return KmerSet(np.empty(0, dtype=np.uint64), 0, 0)
    buf = np.frombuffer(b"".join(parts), dtype=np.uint8)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    if len(buf) <= SMALL_BASES and not compiled(__name__):
        hashes, valid = _canonical_numpy(buf, starts, ends, k, bool(canonical))
        return KmerSet(hashes, n_windows - valid, n_windows)
    out = np.empty(n_windows, dtype=np.uint64)
    n = _scan(buf, starts, ends, k, _TABLE, out, bool(canonical))
    skipped = n_windows - n
    codes = out[:n]
    if sort == "radix":
        top, digit = _radix_plan(n, 2 * k)
        _radix_sort(codes, np.empty_like(codes), 2 * k, top, digit)
    else:
        codes.sort()
    m = _compact_sorted(codes)
    # Return an array that owns a tight buffer unless little would be saved: items sit in the
    # object store for the whole run, and a view would keep the scratch buffer alive.
    if m < 0.9 * out.shape[0]:
        hashes = codes[:m].copy()
    else:
        hashes = codes[:m]
    return KmerSet(hashes, int(skipped), int(n_windows))



def _joined(seqs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes as uint8, record starts, record ends) of many records in one buffer (a view of
    records kept as columns, ``operators.sequences.columns.Sequences``, is one already)."""
    if hasattr(seqs, "joined"):
        return seqs.joined()
    parts = [_as_bytes(s) for s in seqs]
    lengths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    return np.frombuffer(b"".join(parts), dtype=np.uint8), ends - lengths, ends


@lazy_njit(cache=True, nogil=True)
def _record_sets(buf, starts, ends, k, table, canonical, values, offsets):
    """Each record's sorted unique codes, one after the other in ``values``; record r's are
    ``values[offsets[r]:offsets[r + 1]]``. Returns the number of values written."""
    w = 0
    for r in range(starts.shape[0]):
        got = _scan(buf, starts[r:r + 1], ends[r:r + 1], k, table, values[w:], canonical)
        run = values[w:w + got]
        run.sort()
        m = _compact_sorted(run)
        offsets[r] = w
        w += m
    offsets[starts.shape[0]] = w
    return w


def record_kmer_sets(seqs, k: int, canonical: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The k-mer set of every record of a file in one compiled pass: (values, offsets), record
    r's sorted unique codes being ``values[offsets[r]:offsets[r + 1]]`` (an empty slice when it
    has no valid k-mer). Short reads are items by the thousand: a call per record would cost
    more in Python than the scan itself."""
    k = _check_k(k)
    buf, starts, ends = _joined(seqs)
    if len(buf) <= SMALL_BASES and not compiled(__name__):
        # numpy, record by record, while the compiled kernels are not loaded (SMALL_BASES)
        sets = [_canonical_numpy(buf, starts[r:r + 1], ends[r:r + 1], k, bool(canonical))[0]
                for r in range(len(starts))]
        offsets = np.zeros(len(starts) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in sets], out=offsets[1:])
        values = np.concatenate(sets) if sets else np.empty(0, np.uint64)
        return values.astype(np.uint64, copy=False), offsets
    n_windows = int(np.maximum(ends - starts - (k - 1), 0).sum())
    values = np.empty(max(n_windows, 1), dtype=np.uint64)
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    if len(starts):
        w = _record_sets(buf, starts, ends, k, _TABLE, bool(canonical), values, offsets)
    else:
        w = 0
    return values[:w].copy(), offsets
