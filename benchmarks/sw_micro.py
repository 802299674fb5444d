"""Micro-benchmark of the Smith-Waterman kernel: cells/s of sw_scores on one core, no Ray.

Why: the defaults inside ``kernels.smith_waterman`` (start at 8 bits only for long pairs, striped
first and scan on retry, the longer sequence as profile, calling parasail's C functions directly)
are justified only by these numbers, and the engine sizes SW tiles from cells/s.  Each workload is
also checked against a 32-bit striped run so a fast wrong answer cannot win.  Best of ``--repeat``.

    .venv/bin/python benchmarks/sw_micro.py [--data DIR] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from _record import out_path, write  # noqa: E402

from pairflow.kernels.scoring import Scoring  # noqa: E402
from pairflow.kernels.smith_waterman import cells, sw_reference_batch, sw_scores, sw_traceback  # noqa: E402

VARIANTS = {
    "auto": {},
    "auto, parasail wrapper": {"_direct": False},
    "striped w16": {"method": "striped", "width": 16},
    "striped w8": {"method": "striped", "width": 8},
    "scan w16": {"method": "scan", "width": 16},
}


def best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def workloads(data: Path) -> dict:
    from Bio import SeqIO

    tut = data / "root/usr/share/doc/hmmer/examples/tutorial"
    glob = [str(r.seq) for r in SeqIO.parse(str(tut / "globins45.fa"), "fasta")]
    less = str(SeqIO.read(str(tut / "7LESS_DROME"), "swiss").seq)
    hbb = str(SeqIO.read(str(tut / "HBB_HUMAN"), "fasta").seq)
    dna = [str(r.seq) for r in SeqIO.parse(
        str(data / "root/usr/share/kaptive/reference_database/wzi_wzc_db.fasta"), "fasta")]
    rng = np.random.default_rng(1)
    aa = list("ARNDCQEGHILKMFPSTWYV")
    freq = np.array([7.4, 5.2, 4.5, 5.3, 2.5, 3.4, 5.4, 7.4, 2.6, 6.8, 9.9, 5.8, 2.5, 4.7, 3.9, 5.7,
                     5.1, 1.3, 3.2, 7.3])
    rand = ["".join(rng.choice(aa, size=int(rng.integers(300, 600)), p=freq / freq.sum()))
            for _ in range(24)]
    skew = [less, hbb] + [less[o:o + n] for o, n in [(0, 30), (100, 60), (300, 120), (700, 500),
                                                      (1200, 1000), (400, 2000)]] + glob[:20]
    blosum = Scoring.create("blosum62", 11, 1)
    return {
        "globins45 all-vs-all (45x45, 142-154 aa)": (glob, glob, blosum),
        "length-skewed all-vs-all (7LESS 2554 aa, its fragments 30-2000, HBB, 20 globins)":
            (skew, skew, blosum),
        "globins45 x 7LESS_DROME (short queries, one long target)": (glob, [less], blosum),
        "unrelated random proteins (24x24, 300-600 aa)": (rand, rand, blosum),
        "wzi/wzc DNA alleles (every 5th, 121x121, 115-448 bp), nuc44 10/1":
            (dna[::5], dna[::5], Scoring.create("nuc44", 10, 1)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from pairflow.apps.data import data_dir
    ap.add_argument("--data", default=data_dir())  # PAIRFLOW_DATA, else the user data dir
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", "--out", dest="json",
                    help="write the results here (default: benchmarks/out/sw_micro.json)")
    ap.add_argument("--quick", action="store_true", help="--repeat 1")
    a = ap.parse_args()
    started = time.time()
    if a.quick:
        a.repeat = 1
    res: dict = {"workloads": {}}
    for name, (qs, ts, scoring) in workloads(Path(a.data)).items():
        n_cells = cells([len(q) for q in qs], [len(t) for t in ts])
        truth = sw_scores(qs, ts, scoring, method="striped", width=32)
        row = {"cells": n_cells, "pairs": len(qs) * len(ts), "gcells_per_s": {}}
        # variants take turns within each repeat, so a burst of load elsewhere on the machine
        # hits all of them rather than whichever happened to be running
        fastest = {label: float("inf") for label in VARIANTS}
        for _ in range(a.repeat):
            for label, kw in VARIANTS.items():
                dt, got = best(lambda: sw_scores(qs, ts, scoring, validate=False, **kw), 1)
                assert np.array_equal(got, truth), (name, label)
                fastest[label] = min(fastest[label], dt)
        for label, dt in fastest.items():
            row["gcells_per_s"][label] = n_cells / dt / 1e9
        rates = ", ".join(f"{k} {v:.2f}" for k, v in row["gcells_per_s"].items())
        print(f"{name}: {n_cells / 1e6:.1f} Mcells, {row['pairs']} pairs; Gcells/s: {rates}")
        res["workloads"][name] = row

    glob, _, blosum = next(iter(workloads(Path(a.data)).values()))
    dt, _ = best(lambda: [sw_reference_batch(q, glob, blosum, validate=False) for q in glob[:10]], 1)
    ref_rate = cells([len(q) for q in glob[:10]], [len(t) for t in glob]) / dt / 1e6
    dt_tb, _ = best(lambda: [sw_traceback(glob[0], t, blosum, validate=False) for t in glob], a.repeat)
    res["reference_mcells_per_s"] = ref_rate
    res["traceback_ms_per_globin_pair"] = dt_tb / len(glob) * 1e3
    print(f"numpy reference (one globin vs 45, batched): {ref_rate:.0f} Mcells/s; "
          f"traceback: {res['traceback_ms_per_globin_pair']:.3f} ms per globin pair")
    write(out_path("sw_micro.json", a.json), res, "sw_micro", quick=a.quick, started=started)


if __name__ == "__main__":
    main()
