"""Seeded short reads from the ragout genomes, for runs of 10^3 to 10^6 reads (issue 58).

Why: the only real read sets here are bowtie2's 10,000 lambda reads; scaling to a million needs
reads of the same shape from real sequence, the same every time for one seed. A read is a
window of ``length`` bases of one of the 16 ragout genomes (a genome's records taken in
proportion to their lengths), reverse-complemented with probability 1/2, each base then
substituted with probability ``error`` by one of the three others. Written as FASTQ (quality
``I``) or FASTA, in blocks, so 10^6 reads never sit in memory as Python strings.

    python -m pairflow.apps.reads_sim 100000 reads.fq --seed 1
"""
from __future__ import annotations

import argparse
import glob
import gzip
import os

import numpy as np

GENOMES = "usr/share/doc/ragout/examples/*/references/*.fasta.gz"
_COMP = np.frombuffer(b"TGCA", np.uint8)  # complement of A, C, G, T by code
_LETTERS = np.frombuffer(b"ACGT", np.uint8)
BLOCK = 65_536  # reads made and written at a time


def genome_paths(data_dir: str | None = None) -> list[str]:
    if data_dir is None:
        from pairflow.apps.data import data_dir as default
        data_dir = default()
    paths = sorted(glob.glob(os.path.join(data_dir, "root", GENOMES)))
    if not paths:
        raise FileNotFoundError(f"no ragout genome under {data_dir}/root ({GENOMES}): "
                                "install the Debian package ragout-examples (pairflow data)")
    return paths


def _records(path: str) -> list[bytes]:
    """A FASTA file's sequences, upper case, as bytes."""
    with gzip.open(path, "rb") as fh:
        text = fh.read()
    out = []
    for chunk in text.split(b">")[1:]:
        seq = b"".join(chunk.split(b"\n")[1:]).replace(b"\r", b"").upper()
        if seq:
            out.append(seq)
    return out


def _sequence_pool(paths: list[str], length: int):
    """All records as one uint8 array, with each record's start and the count of read starts
    it offers (records shorter than a read offer none)."""
    seqs = [s for p in paths for s in _records(p)]
    starts = np.cumsum([0] + [len(s) for s in seqs])[:-1]
    offers = np.array([max(0, len(s) - length + 1) for s in seqs], np.int64)
    if not offers.sum():
        raise ValueError(f"no record is {length} bases long")
    return np.frombuffer(b"".join(seqs), np.uint8), starts, offers


def simulate_reads(n: int, path: str, seed: int = 0, length: int = 150, error: float = 0.01,
                   fmt: str | None = None, data_dir: str | None = None) -> str:
    """Write ``n`` reads to ``path`` (FASTQ, or FASTA when ``fmt`` or the name says so);
    the same file for the same arguments."""
    fmt = fmt or ("fasta" if path.endswith((".fa", ".fasta", ".fna")) else "fastq")
    pool, starts, offers = _sequence_pool(genome_paths(data_dir), length)
    cum = np.cumsum(offers)
    rng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    qual = b"I" * length
    with open(tmp, "wb") as fh:
        for b0 in range(0, n, BLOCK):
            m = min(BLOCK, n - b0)
            # a uniform start among every record's offers, then its record
            at = rng.integers(0, cum[-1], m)
            rec = np.searchsorted(cum, at, side="right")
            first = starts[rec] + at - (cum[rec] - offers[rec])
            reads = pool[first[:, None] + np.arange(length)[None, :]]
            flip = rng.random(m) < 0.5
            code = np.full(reads.shape, 4, np.int8)
            for c, letter in enumerate(_LETTERS):
                code[reads == letter] = c
            rc = np.where(code[flip, ::-1] < 4, _COMP[np.minimum(code[flip, ::-1], 3)],
                          reads[flip, ::-1])
            reads[flip] = rc
            hit = (rng.random(reads.shape) < error) & np.isin(reads, _LETTERS)
            shift = rng.integers(1, 4, int(hit.sum()))
            now = np.searchsorted(_LETTERS, reads[hit])
            reads[hit] = _LETTERS[(now + shift) % 4]
            lines = []
            for i in range(m):
                seq = reads[i].tobytes()
                if fmt == "fasta":
                    lines.append(b">r%d\n%s\n" % (b0 + i, seq))
                else:
                    lines.append(b"@r%d\n%s\n+\n%s\n" % (b0 + i, seq, qual))
            fh.write(b"".join(lines))
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("n", type=int)
    ap.add_argument("path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--length", type=int, default=150)
    ap.add_argument("--error", type=float, default=0.01)
    a = ap.parse_args(argv)
    simulate_reads(a.n, a.path, a.seed, a.length, a.error)


if __name__ == "__main__":
    main()
