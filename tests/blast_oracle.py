"""blastp (Debian ncbi-blast+) as an oracle for app=align's statistics. Nothing here imports
pairflow.

blastp runs with plain matrix scores (``-comp_based_stats 0 -seg no``) and one HSP per pair, so
its raw score is comparable with Smith-Waterman's; its tabular output prints numbers rounded,
and :func:`evalue_matches` / :func:`bitscore_matches` allow exactly that rounding.
"""
from __future__ import annotations

import math
import subprocess

from tests.conftest import need_program


def run_blastp(query_fa: str, target_fa: str, workdir, max_targets: int = 500,
               evalue: float = 1000.0) -> dict:
    """``{(qseqid, sseqid): (evalue, bitscore, score)}`` of blastp's best HSP per pair."""
    blastp, makeblastdb = need_program("blastp"), need_program("makeblastdb")
    db = f"{workdir}/blastdb"
    subprocess.run([makeblastdb, "-in", target_fa, "-dbtype", "prot", "-out", db], check=True,
                   capture_output=True)
    out = subprocess.run([blastp, "-query", query_fa, "-db", db, "-comp_based_stats", "0",
                          "-seg", "no", "-evalue", str(evalue), "-max_hsps", "1",
                          "-max_target_seqs", str(max_targets), "-outfmt",
                          "6 qseqid sseqid evalue bitscore score"],
                         check=True, capture_output=True, text=True).stdout
    return {(a, b): (float(e), float(bits), int(s)) for a, b, e, bits, s in
            (line.split("\t") for line in out.splitlines())}


def _half_unit(printed: float) -> float:
    """Half a unit of the last digit blastp prints an E-value with: ``%2.0le`` below 1e-99,
    ``%3.2le`` below 1e-3 (0.0009), then 3, 2, 1 and 0 decimals up to 0.1, 1, 10 and beyond."""
    if printed < 1e-99:
        return 0.5 * 10.0 ** math.floor(math.log10(printed))
    if printed < 0.0009:
        return 0.5 * 10.0 ** (math.floor(math.log10(printed)) - 2)
    for bound, decimals in ((0.1, 3), (1.0, 2), (10.0, 1)):
        if printed < bound:
            return 0.5 * 10.0 ** -decimals
    return 0.5


def evalue_matches(mine: float, printed: float) -> bool:
    """Our E-value rounds to what blastp printed (0.0 stands for anything below 1e-180)."""
    if printed < 1e-180:
        return mine < 1e-179
    return abs(mine - printed) <= _half_unit(printed) * 1.02


def bitscore_matches(mine: float, printed: float) -> bool:
    """blastp prints bit scores with one decimal, and above 99.9 the integer part alone."""
    if printed >= 100:
        return math.floor(mine) == printed
    return abs(mine - printed) <= 0.0501
