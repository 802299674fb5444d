"""Independent CVTree references (Qi, Wang & Hao 2004). Nothing here imports pairflow.

``dict_vector`` is the brute force of the issue: plain Python dictionaries, a dense vector over
every one of the 20^k words (k ≤ 4), strings split at every letter outside the 20 amino acids.
``dense_vector`` is the same definition in whole-array numpy (bincount over all 20^k codes and a
broadcast background), fast enough for real proteomes at k = 5; it shares no code with the
kernel's sparse split of the dot product.
"""
from __future__ import annotations

import itertools
import math
import re

import numpy as np

AA = "ACDEFGHIKLMNPQRSTVWY"
_SPLIT = re.compile(f"[^{AA}]+")


def _counts(proteins, length):
    counts = {}
    for protein in proteins:
        for segment in _SPLIT.split(protein.upper()):
            for i in range(len(segment) - length + 1):
                word = segment[i:i + length]
                counts[word] = counts.get(word, 0) + 1
    return counts


def dict_vector(proteins, k):
    """{word: component} over all 20^k words."""
    ck, c1, c2 = _counts(proteins, k), _counts(proteins, k - 1), _counts(proteins, k - 2)
    nk, n1, n2 = sum(ck.values()), sum(c1.values()), sum(c2.values())
    vector = {}
    for letters in itertools.product(AA, repeat=k):
        w = "".join(letters)
        p_mid = c2.get(w[1:-1], 0) / n2
        p0 = (c1.get(w[:-1], 0) / n1) * (c1.get(w[1:], 0) / n1) / p_mid if p_mid else 0.0
        vector[w] = (ck.get(w, 0) / nk - p0) / p0 if p0 > 0 else 0.0
    return vector


def dict_distance(a, b):
    dot = sum(a[w] * b[w] for w in a)
    norm = math.sqrt(sum(x * x for x in a.values())) * math.sqrt(sum(x * x for x in b.values()))
    return (1 - dot / norm) / 2


def _dense_counts(proteins, length):
    table = np.full(256, 20, dtype=np.int64)
    table[np.frombuffer(AA.encode(), np.uint8)] = np.arange(20)
    joined = "#".join(p.upper() for p in proteins).encode()
    codes = table[np.frombuffer(joined, np.uint8)]
    windows = np.lib.stride_tricks.sliding_window_view(codes, length)
    windows = windows[(windows < 20).all(axis=1)]
    index = windows @ (20 ** np.arange(length - 1, -1, -1))
    return np.bincount(index, minlength=20 ** length).astype(np.float64)


def dense_vector(proteins, k):
    """The vector as one dense numpy array of 20^k components."""
    f = _dense_counts(proteins, k)
    f1 = _dense_counts(proteins, k - 1)
    f2 = _dense_counts(proteins, k - 2)
    f, f1, f2 = f / f.sum(), f1 / f1.sum(), f2 / f2.sum()
    mid = 20 ** (k - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p0 = (f1.reshape(20, mid)[:, :, None] * f1.reshape(mid, 20)[None, :, :]
              / f2[None, :, None]).reshape(-1)
        return np.where(p0 > 0, (f - p0) / np.where(p0 > 0, p0, 1), 0.0)


def dense_distances(vectors):
    """CVTree distances of dense vectors: (1 − cos) / 2, all pairs."""
    v = np.stack(vectors)
    unit = v / np.linalg.norm(v, axis=1, keepdims=True)
    d = (1 - unit @ unit.T) / 2
    np.fill_diagonal(d, 0.0)
    return d


def read_proteins(path):
    from Bio import SeqIO
    return [str(r.seq) for r in SeqIO.parse(path, "fasta")]
