"""canonical_kmers against a brute-force Python reference built from the definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.kernels.kmers import MAX_K, KmerSet, canonical_kmers
from tests.conftest import need_module

_COMP = str.maketrans("ACGT", "TGCA")
_DIGITS = str.maketrans("ACGT", "0123")


def reference(seqs: list[bytes], k: int) -> tuple[set[int], int, int]:
    """(canonical codes, skipped windows, windows) by slicing every window of every record."""
    codes: set[int] = set()
    skipped = windows = 0
    for s in seqs:
        t = s.upper().decode("latin-1")  # bytes.upper() changes only ASCII a-z
        for i in range(len(t) - k + 1):
            w = t[i : i + k]
            windows += 1
            if set(w) <= set("ACGT"):
                rc = w.translate(_COMP)[::-1]
                codes.add(min(int(w.translate(_DIGITS), 4), int(rc.translate(_DIGITS), 4)))
            else:
                skipped += 1
    return codes, skipped, windows


def check(seqs, k, **kw):
    got = canonical_kmers(seqs, k, **kw)
    codes, skipped, windows = reference(seqs, k)
    assert isinstance(got, KmerSet)
    assert got.hashes.dtype == np.uint64
    assert got.hashes.tolist() == sorted(codes)
    assert got.skipped_windows == skipped
    assert got.n_windows == windows
    return got


# sequences made of ACGT runs (either case) broken by N runs, IUPAC codes, gaps and stops
_chunk = st.one_of(
    st.text(alphabet="ACGTacgt", max_size=50),
    st.text(alphabet="Nn", min_size=1, max_size=6),
    st.text(alphabet="RYKMSWBDHVN-*. ", min_size=1, max_size=3),
)
_seq = st.lists(_chunk, max_size=8).map(lambda cs: "".join(cs).encode())
_records = st.lists(_seq, max_size=5)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(records=_records, k=st.integers(1, MAX_K))
def test_matches_reference(records, k):
    check(records, k)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(records=_records, k=st.sampled_from([1, 2, 31]))
def test_matches_reference_extreme_k(records, k):
    check(records, k)


@settings(derandomize=True, max_examples=100, deadline=None)
@given(records=st.lists(st.binary(max_size=80), max_size=4), k=st.integers(1, 8))
def test_arbitrary_bytes(records, k):
    # any byte that is not ACGT/acgt, including NUL and high bytes, only breaks windows
    check(records, k)


def test_reverse_complement_gives_same_set():
    rng = np.random.default_rng(1)
    s = bytes(rng.choice(list(b"ACGT"), 5000))
    rc = s[::-1].translate(bytes.maketrans(b"ACGT", b"TGCA"))
    for k in (1, 4, 21, 31):
        assert np.array_equal(canonical_kmers([s], k).hashes, canonical_kmers([rc], k).hashes)


def test_records_do_not_join():
    # "AC" + "GT": the 3-mers ACG/CGT exist only if records were glued together
    got = check([b"AC", b"GT"], 3)
    assert got.hashes.size == 0 and got.n_windows == 0
    check([b"ACG", b"TAC"], 3)


@pytest.mark.parametrize(
    "seqs, k, n_windows, skipped",
    [
        ([], 5, 0, 0),
        ([b""], 1, 0, 0),
        ([b"", b"ACG"], 4, 0, 0),  # shorter than k: nothing
        ([b"NNNNN"], 2, 4, 4),
        ([b"ACGTNACGT"], 4, 6, 4),
        ([b"acgtNACGT", b"AC"], 4, 6, 4),
        ([b"A" * 31], 31, 1, 0),
    ],
)
def test_edge_cases(seqs, k, n_windows, skipped):
    got = check(seqs, k)
    assert (got.n_windows, got.skipped_windows) == (n_windows, skipped)
    if not seqs or n_windows == 0:
        assert got.hashes.dtype == np.uint64 and got.hashes.size == 0


def test_single_bytes_object_is_one_record():
    assert np.array_equal(canonical_kmers(b"ACGTTGCA", 3).hashes, canonical_kmers([b"ACGTTGCA"], 3).hashes)


def test_k31_codes_fit_int64():
    s = b"T" * 40 + b"G" * 40  # canonical of T...T is A...A = 0; G/C runs give the largest codes
    h = check([s], 31).hashes
    assert int(h.max()) < 2**62


@pytest.mark.parametrize("k", [0, 32, -1, 2.5, "21", True, None])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k="):
        canonical_kmers([b"ACGT"], k)


@pytest.mark.parametrize("k", [1, 2, 3, 7, 13, 21, 31])
def test_radix_sort_matches_numpy_sort_on_large_input(k):
    # large enough for the MSD bucket pass (and for k<=2, buckets whose low part is empty)
    rng = np.random.default_rng(k)
    s = bytes(rng.choice(list(b"ACGTN"), 120_000, p=[0.245, 0.245, 0.245, 0.245, 0.02]))
    a = canonical_kmers([s, s[:5000]], k)
    b = canonical_kmers([s, s[:5000]], k, sort="numpy")
    assert np.array_equal(a.hashes, b.hashes)
    assert a.skipped_windows == b.skipped_windows
    assert np.all(a.hashes[1:] > a.hashes[:-1])


def test_lambda_phage_k21(lambda_path):
    import pysam

    seqs = [r.sequence.encode() for r in pysam.FastxFile(str(lambda_path))]
    got = check(seqs, 21)
    assert got.hashes.size > 45_000  # 48,502 bp, nearly all 21-mers distinct


def test_lambda_phage_matches_sourmash(lambda_path):
    """Independent oracle: sourmash with scaled=1 keeps every canonical k-mer hash."""
    sourmash = need_module("sourmash")
    import pysam

    seqs = [r.sequence for r in pysam.FastxFile(str(lambda_path))]
    mh = sourmash.MinHash(n=0, ksize=21, scaled=1)
    for s in seqs:
        mh.add_sequence(s, force=True)
    assert len(mh) == canonical_kmers([s.encode() for s in seqs], 21).hashes.size
