"""Independent references the tests compare pairflow with. Nothing here imports pairflow.

The brute-force Jaccard oracle is plain Python: sequences read with Biopython, split at every
letter other than A/C/G/T, every window taken by slicing, canonical k-mer = the smaller of the
k-mer and its reverse complement (as strings), sets intersected with ``&``.
"""
from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess

from pairflow.apps.data import data_dir

# where pairflow data install put the data: $PAIRFLOW_DATA, else the user data directory
DATA = data_dir()
DATA_ROOT = os.path.join(DATA, "root")
PROTEOMES = os.path.join(DATA, "proteomes")  # apps/datasets.py's, from ragout
RAGOUT = os.path.join(DATA_ROOT, "usr/share/doc/ragout/examples")
KAPTIVE = os.path.join(DATA_ROOT, "usr/share/kaptive/reference_database")
KLEBSIELLA = os.path.join(KAPTIVE, "Klebsiella_k_locus_primary_reference.gbk")
LAMBDA = os.path.join(DATA_ROOT, "usr/share/doc/bowtie2/examples/reference/lambda_virus.fa.gz")
READS = os.path.join(DATA_ROOT, "usr/share/doc/bowtie2/examples/reads")  # reads_1.fq.gz ...

_RC = str.maketrans("ACGT", "TGCA")
_SPLIT = re.compile("[^ACGT]+")


def read_sequences(path: str, fmt: str | None = None) -> list[tuple[str, str]]:
    from Bio import SeqIO
    fmt = fmt or ("genbank" if path.endswith((".gbk", ".gb")) else "fasta")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return [(r.id if fmt == "fasta" else r.name, str(r.seq)) for r in SeqIO.parse(fh, fmt)]


def canonical_kmers(seqs, k: int) -> set:
    out = set()
    for seq in seqs:
        for segment in _SPLIT.split(seq.upper()):
            if len(segment) < k:
                continue
            rc = segment.translate(_RC)[::-1]
            n = len(segment) - k + 1
            # window i of the segment pairs with window n-1-i of its reverse complement
            out.update(min(segment[i:i + k], rc[n - 1 - i:n - 1 - i + k]) for i in range(n))
    return out


def jaccard_matrix(sets: list[set]):
    import numpy as np
    n = len(sets)
    sim = np.eye(n)
    inter = np.zeros((n, n), np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            x = len(sets[i] & sets[j])
            inter[i, j] = inter[j, i] = x
            sim[i, j] = sim[j, i] = x / (len(sets[i]) + len(sets[j]) - x)
    return sim, inter


def canonical_kmer_codes(seqs, k: int):
    """The same set as ``canonical_kmers``, as sorted unique 2-bit codes (k <= 31) built with
    numpy: whole bacterial genomes in seconds where the string sets take minutes. Checked
    against ``canonical_kmers`` in tests/unit/test_oracles.py."""
    import numpy as np
    assert 1 <= k <= 31
    lut = np.full(256, 4, np.uint8)
    for i, c in enumerate(b"ACGT"):
        lut[c] = i
    parts = []
    for seq in seqs:
        b = lut[np.frombuffer(seq.upper().encode(), np.uint8)]
        n = len(b) - k + 1
        if n <= 0:
            continue
        # a window is a k-mer when none of its k letters is outside A/C/G/T
        bad = np.concatenate([[0], np.cumsum(b == 4)])
        ok = (bad[k:] - bad[:-k]) == 0
        base = np.where(b == 4, 0, b).astype(np.uint64)
        # forward: first letter most significant; reverse complement: complement (3 - x), last
        # letter most significant
        fwd = _window_codes(base, k, first_high=True)
        rev = _window_codes(np.uint64(3) - base, k, first_high=False)
        parts.append(np.minimum(fwd, rev)[ok])
    if not parts:
        return np.zeros(0, np.uint64)
    codes = np.sort(np.concatenate(parts))  # (np.unique hashes first: ten times slower here)
    return codes[np.concatenate([[True], codes[1:] != codes[:-1]])]


def _window_codes(x, k: int, first_high: bool):
    """Every length-k window of the 2-bit letters ``x`` as one integer: the first letter most
    significant (``first_high``) or the last. Built from windows of 1, 2, 4, ... letters, each
    twice as long as the last (two array operations a doubling instead of two a letter)."""
    import numpy as np
    n = len(x) - k + 1
    runs = {1: x}
    p = 1
    while 2 * p <= k:
        a = runs[p]
        m = len(a) - p
        if first_high:
            runs[2 * p] = np.left_shift(a[:m], np.uint64(2 * p)) | a[p:p + m]
        else:
            runs[2 * p] = a[:m] | np.left_shift(a[p:p + m], np.uint64(2 * p))
        p *= 2
    out, offset = None, 0
    while p:  # k as a sum of the powers of two, longest first
        if k - offset >= p:
            part = runs[p][offset:offset + n]
            if out is None:
                out = part.copy() if first_high else np.left_shift(part, np.uint64(2 * offset))
            elif first_high:
                out = np.left_shift(out, np.uint64(2 * p)) | part
            else:
                out |= np.left_shift(part, np.uint64(2 * offset))
            offset += p
        p //= 2
    return out


def jaccard_matrix_of_codes(code_sets: list, method: str = "auto"):
    """``jaccard_matrix`` for sorted unique code arrays. ``masks`` (n <= 63): each distinct code
    gets the bit mask of the sets holding it, and a pair's intersection is the number of codes
    whose mask has both bits (counted per distinct mask, of which there are few). ``sparse`` (any
    n): the sets as rows of a 0/1 scipy sparse matrix, every intersection at once as its product
    with its transpose. ``auto``: masks up to 63 sets, else sparse."""
    import numpy as np
    n = len(code_sets)
    if method == "auto":
        method = "masks" if n <= 63 else "sparse"
    if method == "sparse":
        return _jaccard_matrix_sparse(code_sets)
    assert method == "masks" and n <= 63, (method, n)
    codes = np.concatenate(code_sets)
    owner = np.concatenate([np.full(len(c), i, np.uint64) for i, c in enumerate(code_sets)])
    order = np.argsort(codes, kind="stable")
    codes, bits = codes[order], np.left_shift(np.uint64(1), owner[order])
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    masks = np.bitwise_or.reduceat(bits, starts)
    masks.sort()
    first = np.flatnonzero(np.concatenate([[True], masks[1:] != masks[:-1]]))
    kinds, counts = masks[first], np.diff(np.append(first, len(masks)))
    sizes = np.array([len(c) for c in code_sets])
    sim, inter = np.eye(n), np.zeros((n, n), np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            both = (kinds >> np.uint64(i)) & (kinds >> np.uint64(j)) & np.uint64(1)
            x = int(counts[both == 1].sum())
            inter[i, j] = inter[j, i] = x
            sim[i, j] = sim[j, i] = x / (sizes[i] + sizes[j] - x)
    return sim, inter


def _jaccard_matrix_sparse(code_sets: list):
    import numpy as np
    from scipy import sparse
    n = len(code_sets)
    sizes = np.array([len(c) for c in code_sets], np.int64)
    _, column = np.unique(np.concatenate(code_sets), return_inverse=True)
    row = np.repeat(np.arange(n), sizes)
    a = sparse.csr_matrix((np.ones(len(row), np.int64), (row, column.ravel())),
                          shape=(n, int(column.max()) + 1 if len(column) else 0))
    inter = np.asarray((a @ a.T).todense(), np.int64)
    np.fill_diagonal(inter, 0)  # as jaccard_matrix: pairs only
    sim = np.eye(n)
    i, j = np.triu_indices(n, 1)
    x = inter[i, j]
    sim[i, j] = sim[j, i] = x / (sizes[i] + sizes[j] - x)
    return sim, inter


def mash_jaccard(inputs: list[str], k: int, workdir: str, individual: bool = False,
                 sketch_size: int | None = None) -> dict:
    """Exact Jaccard from Debian's mash: {(name_a, name_b): x / y} from the shared-hashes column.

    With a sketch at least as large as every union (``sketch_size``; default: total bases, an
    upper bound) mash keeps every hash, so x / y is the exact Jaccard up to 64-bit hash
    collisions. ``individual=True`` sketches each record of one multi-FASTA (names = record ids).
    """
    mash = shutil.which("mash")
    assert mash, "Debian's mash must be installed (scripts/setup.sh does it)"
    if sketch_size is None:
        sketch_size = sum(len(s) for p in inputs for _, s in read_sequences(p)) + 1
    sketch = os.path.join(workdir, "all")
    cmd = [mash, "sketch", "-k", str(k), "-s", str(sketch_size), "-p", "2", "-o", sketch]
    if individual:
        cmd += ["-i"] + inputs
    else:
        lst = os.path.join(workdir, "inputs.txt")
        with open(lst, "w") as fh:
            fh.write("\n".join(inputs) + "\n")
        cmd += ["-l", lst]
    subprocess.run(cmd, check=True, capture_output=True)
    out = subprocess.run([mash, "dist", "-p", "2", sketch + ".msh", sketch + ".msh"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for line in out.splitlines():
        a, b, _dist, _p, shared = line.split("\t")
        x, y = shared.split("/")
        result[(a, b)] = int(x) / int(y)
    return result


def read_fastq(path: str) -> list[tuple[str, str]]:
    """(name, sequence) of every record of a plain 4-line FASTQ file (gzip by suffix), read line
    by line without any parser library."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        lines = fh.read().splitlines()
    assert len(lines) % 4 == 0 and all(h.startswith("@") for h in lines[::4])
    return [(lines[i][1:].split()[0], lines[i + 1]) for i in range(0, len(lines), 4)]


def kmer_set(seq: str, k: int, canonical: bool = True) -> set:
    """The k-mers of one sequence as strings (canonical: the smaller of a k-mer and its reverse
    complement; otherwise as read), windows holding a letter other than ACGT left out."""
    if canonical:
        return canonical_kmers([seq], k)
    out = set()
    for segment in _SPLIT.split(seq.upper()):
        out.update(segment[i:i + k] for i in range(len(segment) - k + 1))
    return out


def jaccard(a: set, b: set) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0
