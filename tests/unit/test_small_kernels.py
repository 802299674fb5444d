"""The numpy paths small runs take before numba is loaded (kernels/lazyjit.py) give exactly the
compiled kernels' results, and checked against an independent oracle (Python sets of canonical
k-mers, brute-force intersections); a small parse and compare import no numba."""
import subprocess
import sys

import numpy as np
import pytest

from tests.oracles import canonical_kmers as oracle_kmers

REPO = str(__import__("pathlib").Path(__file__).resolve().parents[2])


def _records(rng, n, length):
    out = []
    for _ in range(n):
        seq = bytearray(rng.choice(list(b"ACGTacgt"), size=int(rng.integers(0, length))))
        for pos in rng.integers(0, max(1, len(seq)), size=len(seq) // 50):
            if len(seq):
                seq[pos] = ord(rng.choice(list("NRY-*")))
        out.append(bytes(seq))
    return out


def _code(kmer: str) -> int:
    return int(kmer.upper().translate(str.maketrans("ACGT", "0123")), 4)


@pytest.mark.parametrize("k", [1, 5, 21, 31])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_scan_equals_the_compiled_scan_and_the_oracle(k, seed):
    from pairflow.kernels import kmers
    rng = np.random.default_rng(seed)
    recs = _records(rng, 4, 3000)
    buf = np.frombuffer(b"".join(recs), np.uint8)
    lengths = np.array([len(r) for r in recs], np.int64)
    ends = np.cumsum(lengths)
    small, valid = kmers._canonical_numpy(buf, ends - lengths, ends, k)
    out = np.empty(max(1, len(buf)), np.uint64)
    n = kmers._scan(buf, ends - lengths, ends, k, kmers.encode_table(), out)
    assert np.array_equal(small, np.unique(out[:n])) and valid == n
    want = sorted(_code(x) for x in oracle_kmers([r.decode() for r in recs], k))
    assert small.tolist() == want


def test_canonical_kmers_gives_the_same_set_before_and_after_numba_loads():
    """In a fresh interpreter: small items parse and compare without numba, then again with it
    (a large item loads it), with identical results."""
    script = """
import sys
import numpy as np
from pairflow.kernels.kmers import canonical_kmers
from pairflow.kernels.jaccard import intersection_counts
rng = np.random.default_rng(7)
recs = [bytes(rng.choice(list(b"ACGTN"), size=5000)) for _ in range(3)]
before = [canonical_kmers(r, 11) for r in recs]
counts_before = intersection_counts([b.hashes for b in before], [b.hashes for b in before])
assert "numba" not in sys.modules, "a small parse imported numba"
canonical_kmers(bytes(rng.choice(list(b"ACGT"), size=300_000)), 11)   # large: compiles
assert "numba" in sys.modules
after = [canonical_kmers(r, 11) for r in recs]
counts_after = intersection_counts([b.hashes for b in after], [b.hashes for b in after])
for a, b in zip(before, after):
    assert np.array_equal(a.hashes, b.hashes) and a[1:] == b[1:]
assert np.array_equal(counts_before, counts_after)
sets = [set(b.hashes.tolist()) for b in before]
assert counts_before.tolist() == [[len(x & y) for y in sets] for x in sets]
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_record_kmer_sets_gives_the_same_sets_before_and_after_numba_loads():
    """Record items (``item=record``) of a small file are built without numba, then again with
    it, identically, and each record's set is the oracle's (records without a k-mer: empty)."""
    script = f"""
import sys; sys.path.insert(0, {REPO!r})
import numpy as np
from pairflow.kernels.kmers import canonical_kmers, record_kmer_sets
from tests.oracles import canonical_kmers as oracle
rng = np.random.default_rng(3)
recs = [bytes(rng.choice(list(b"ACGTNacgt"), size=int(n))) for n in (0, 5, 400, 2000, 20)]
before = {{c: record_kmer_sets(recs, 9, c) for c in (True, False)}}
assert "numba" not in sys.modules, "a small file's records imported numba"
values, offsets = before[True]
def code(x): return int(x.upper().translate(str.maketrans("ACGT", "0123")), 4)
assert [values[offsets[r]:offsets[r + 1]].tolist() for r in range(len(recs))] == \\
    [sorted(code(x) for x in oracle([r.decode()], 9)) for r in recs]
canonical_kmers(bytes(rng.choice(list(b"ACGT"), size=300_000)), 9)   # large: compiles
assert "numba" in sys.modules
for c in (True, False):
    values, offsets = record_kmer_sets(recs, 9, c)
    assert np.array_equal(before[c][0], values) and np.array_equal(before[c][1], offsets)
    assert values.dtype == before[c][0].dtype == np.uint64
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
