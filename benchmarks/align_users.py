"""What a user runs instead of ``pairflow app=align``: pyopal or parasail with their own threads,
as a plain script, end to end (read the FASTA, score every pair, write the top hits).

    .venv/bin/python benchmarks/align_users.py pyopal   q.fa t.fa hits.tsv --threads 2
    .venv/bin/python benchmarks/align_users.py parasail q.fa t.fa hits.tsv --threads 2

Why a script of its own: benchmarks/align.py times each side in a fresh process, as a user's
run starts (imports included), so the alternative must be a command too.

* pyopal: one ``pyopal.Database`` of the targets, then ``pyopal.align(query, db, matrix,
  gap_open, gap_extend, threads=p, pool=pool)`` per query: pyopal's own threading (it cuts the
  database into ``p`` chunks, one per thread of a ``ThreadPool``; the pool is reused, as its
  documentation advises).
* parasail: its Python binding has no thread option; it calls the C library through ctypes,
  which releases the GIL during each call, so the user's way is a ``ThreadPoolExecutor`` of
  ``p`` threads over the queries, each building the query's profile once
  (``profile_create_sat``) and calling ``sw_striped_profile_sat`` on every target (8 bits,
  redone at 16 when it saturates: parasail's own choice). The ``parasail_aligner`` command line
  (with ``-t``) is not installed here.

Output: ``qseqid sseqid score`` (TSV, no header), the ``top_k`` best targets of each query by
score, ties broken by the target that comes first in the file. Gaps: a gap of length L costs
``gap_open + (L - 1) * gap_extend`` (parasail's and Opal's convention, pairflow's standard).
"""
from __future__ import annotations

import argparse
import time


def read_fasta(path: str) -> tuple[list[str], list[str]]:
    names, seqs, cur = [], [], []
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if names:
                    seqs.append("".join(cur).upper())
                names.append(line[1:].split(None, 1)[0] if line[1:].strip() else "")
                cur = []
            else:
                cur.append(line.strip())
    if names:
        seqs.append("".join(cur).upper())
    return names, seqs


def top(scores, k: int) -> list[int]:
    """Indices of the k best scores, best first; ties: the lower index first."""
    import numpy as np
    s = np.asarray(scores)
    return list(np.lexsort((np.arange(len(s)), -s))[:k])


def pyopal_scores(qs, ts, go, ge, threads):
    import multiprocessing.pool

    import pyopal
    db = pyopal.Database(ts)
    out = []
    with multiprocessing.pool.ThreadPool(threads) as pool:
        for q in qs:
            row = [0] * len(ts)
            for r in pyopal.align(q, db, "BLOSUM62", gap_open=go, gap_extend=ge,
                                  threads=threads, pool=pool):
                row[r.target_index] = r.score
            out.append(row)
    return out


def parasail_scores(qs, ts, go, ge, threads):
    from concurrent.futures import ThreadPoolExecutor

    import parasail

    def one(q):
        profile = parasail.profile_create_sat(q, parasail.blosum62)
        return [parasail.sw_striped_profile_sat(profile, t, go, ge).score for t in ts]

    with ThreadPoolExecutor(threads) as ex:
        return list(ex.map(one, qs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tool", choices=("pyopal", "parasail"))
    ap.add_argument("queries")
    ap.add_argument("targets")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--gap-open", type=int, default=11)
    ap.add_argument("--gap-extend", type=int, default=1)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    qn, qs = read_fasta(args.queries)
    tn, ts = read_fasta(args.targets)
    fn = pyopal_scores if args.tool == "pyopal" else parasail_scores
    rows = fn(qs, ts, args.gap_open, args.gap_extend, args.threads)
    with open(args.out, "w") as fh:
        for name, row in zip(qn, rows):
            for j in top(row, args.top_k):
                fh.write(f"{name}\t{tn[j]}\t{row[j]}\n")
    print(f"{args.tool}: {len(qs)} x {len(ts)} in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
