"""Brute-force references for benchmarks/scale.py and its test; nothing here imports pairflow.

Reads: a read's set is its canonical k-mers (the smaller 2-bit code of the k-mer and its reverse
complement; a window with a letter other than A/C/G/T is no k-mer), built with numpy from the
letters, a read's codes made unique by one sort of (read, code). Jaccard of a query against
every read from a lookup table of the query's codes; the whole matrix (small n) from a dense 0/1
matrix product. Top k: by value, then the lower index. Synthetic: the app's documented value,
(i * 7919 + j) % 1000 for i < j.
"""
from __future__ import annotations

import gzip

import numpy as np

_LUT = np.full(256, 4, np.int64)
for _i, _c in enumerate(b"ACGT"):
    _LUT[_c] = _i
    _LUT[ord(chr(_c).lower())] = _i


def read_fastx(path: str) -> tuple[list[str], list[bytes]]:
    """(names, sequences) of a FASTQ or FASTA file, plainly parsed."""
    opener = gzip.open if path.endswith(".gz") else open
    names, seqs = [], []
    with opener(path, "rb") as fh:
        first = fh.read(1)
        fh.seek(0)
        if first == b"@":
            while True:
                head = fh.readline()
                if not head:
                    break
                seq = fh.readline().strip()
                fh.readline()
                fh.readline()
                names.append(head[1:].split()[0].decode())
                seqs.append(seq)
        else:
            cur = None
            for line in fh:
                if line.startswith(b">"):
                    cur = []
                    names.append(line[1:].split()[0].decode())
                    seqs.append(cur)
                else:
                    cur.append(line.strip())
            seqs = [b"".join(s) for s in seqs]
    return names, seqs


class ReadSets:
    """Every read's canonical k-mer codes, sorted and unique, as one array with offsets."""

    def __init__(self, seqs: list[bytes], k: int, block: int = 50_000):
        self.k, self.n = k, len(seqs)
        codes, sizes = [], []
        for b0 in range(0, len(seqs), block):
            c, s = self._block(seqs[b0:b0 + block], k)
            codes.append(c)
            sizes.append(s)
        self.codes = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        self.sizes = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    @staticmethod
    def _block(seqs: list[bytes], k: int):
        lens = np.array([len(s) for s in seqs], np.int64)
        letters = _LUT[np.frombuffer(b"".join(seqs), np.uint8)]
        start = np.concatenate([[0], np.cumsum(lens)])[:-1]
        owner = np.repeat(np.arange(len(seqs)), lens)
        m = len(letters) - k + 1
        if m <= 0:
            return np.zeros(0, np.int64), np.zeros(len(seqs), np.int64)
        fwd = np.zeros(m, np.int64)
        rev = np.zeros(m, np.int64)
        bad = np.zeros(m, bool)
        for p in range(k):  # window w = letters[w .. w+k-1]
            x = letters[p:p + m]
            bad |= x == 4
            fwd = fwd * 4 + np.minimum(x, 3)
            rev += (3 - np.minimum(x, 3)) << (2 * p)
        # a window is the read's when it starts and ends inside it
        ok = ~bad & (owner[:m] == owner[k - 1:k - 1 + m])
        code = np.minimum(fwd, rev)[ok]
        who = owner[:m][ok]
        key = np.unique(who * (4 ** k) + code)
        who, code = key // (4 ** k), key % (4 ** k)
        return code, np.bincount(who, minlength=len(seqs)).astype(np.int64)

    def row(self, i: int) -> np.ndarray:
        return self.codes[self.offsets[i]:self.offsets[i + 1]]

    def jaccard_against_all(self, i: int) -> np.ndarray:
        """J of read i with every read (itself included: 1, or NaN for an empty set)."""
        lut = np.zeros(4 ** self.k, np.int64)
        lut[self.row(i)] = 1
        hits = lut[self.codes]
        inter = np.add.reduceat(hits, self.offsets[:-1]) if len(hits) else np.zeros(self.n)
        inter = np.where(self.sizes > 0, inter, 0)
        union = self.sizes[i] + self.sizes - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return inter / union

    def jaccard_of(self, queries: list[int], batch: int = 32) -> dict[int, np.ndarray]:
        """J of each query read with every read: the intersection counts of all reads
        against a batch of queries as one sparse 0/1 product (reads x codes) @ (codes x
        queries), exact integers; seconds for 10^6 reads where a lookup per query took
        one each."""
        from scipy import sparse
        reads = sparse.csr_matrix((np.ones(len(self.codes), np.int32), self.codes,
                                   self.offsets), shape=(self.n, 4 ** self.k))
        out = {}
        for b0 in range(0, len(queries), batch):
            qs = queries[b0:b0 + batch]
            cols = np.repeat(np.arange(len(qs)), [self.sizes[q] for q in qs])
            rows = np.concatenate([self.row(q) for q in qs])
            qm = sparse.csc_matrix((np.ones(len(rows), np.int32), (rows, cols)),
                                   shape=(4 ** self.k, len(qs)))
            inter = (reads @ qm).toarray().astype(np.int64)
            for c, q in enumerate(qs):
                union = self.sizes[q] + self.sizes - inter[:, c]
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[q] = inter[:, c] / union
        return out

    def matrix(self) -> np.ndarray:
        """The whole J matrix (small n): a 0/1 matrix product."""
        dense = np.zeros((self.n, 4 ** self.k), np.float32)
        rows = np.repeat(np.arange(self.n), self.sizes)
        dense[rows, self.codes] = 1.0
        inter = (dense @ dense.T).astype(np.int64)
        union = self.sizes[:, None] + self.sizes[None, :] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return inter / union


def top_k(values: np.ndarray, q: int, k: int) -> tuple[list[int], list[float]]:
    """The k largest of ``values`` but the query's own, ties to the lower index."""
    idx = np.arange(len(values))
    keep = (idx != q) & ~np.isnan(values)
    idx, v = idx[keep], values[keep]
    order = np.lexsort((idx, -v))[:k]
    return idx[order].tolist(), v[order].tolist()


def synthetic_values(q: int, n: int) -> np.ndarray:
    """The synthetic app's value of item q with every item (q's own: NaN)."""
    j = np.arange(n, dtype=np.int64)
    lo, hi = np.minimum(q, j), np.maximum(q, j)
    out = ((lo * 7919 + hi) % 1000).astype(np.float64)
    out[q] = np.nan
    return out


def compare_topk(got: dict, want: dict, atol: float = 1e-12) -> list[str]:
    """Mismatches between {query: (targets, scores)} of a run and of the oracle."""
    bad = []
    for q, (wt, wv) in want.items():
        gt, gv = got.get(q, ([], []))
        if list(gt) != list(wt) or len(gv) != len(wv) or \
                not np.allclose(gv, wv, rtol=0, atol=atol):
            bad.append(f"query {q}: got {list(gt)} {np.round(gv, 6).tolist()}, "
                       f"want {list(wt)} {np.round(wv, 6).tolist()}")
    return bad
