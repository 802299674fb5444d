"""Opal's inter-sequence SIMD Smith-Waterman (``pyopal``), and the rule that picks it over
parasail for a tile.

Why two kernels: parasail (``kernels.smith_waterman``) vectorises along one query against one
target at a time, which pays off on long targets; Opal aligns one query against many targets at
once (one target per SIMD lane), which pays off on many short targets. Per CPU second on real
proteomes neither wins everywhere; :func:`prefer_opal` is the boundary those measurements drew
(both kernels measured: benchmarks/RESULTS.md, "Many small sequences: proteomes"). Both give
identical scores: Opal gets the very matrix parasail uses (built from parasail's
own table) and the same open/extend numbers (open = the cost of a gap of length 1).

Only protein matrices go to Opal: the boundary was measured on proteins.

Where the CPU has AVX-512 (BW and VBMI) and the extension is built, :func:`opal_scores` runs the
same inter-sequence layout in 64 lanes instead (``kernels.sw_simd``: identical scores, ~1.7x
Opal's cells per CPU second); the boundary, drawn for Opal, is kept (conservative for it).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from pairflow.kernels import sw_simd

__all__ = ["available", "prefer_opal", "opal_scores", "OPAL_MAX_TARGET_LEN"]

# Opal is chosen for a tile whose mean target length is below OPAL_SHORT_TARGET_LEN and below
# twice its mean query length, or, for queries shorter than OPAL_MAX_QUERY_LEN, below
# OPAL_MAX_TARGET_LEN and OPAL_MAX_TARGET_QUERY_RATIO times the queries (parasail elsewhere: its
# striped profile of the longer sequence wins on long targets and on long queries). The grid of
# both kernels' CPU seconds per cell by query and target length: benchmarks/RESULTS.md,
# "Smith-Waterman" (the kernel boundary).
OPAL_SHORT_TARGET_LEN = 400
OPAL_MAX_TARGET_LEN = 1000
OPAL_MAX_QUERY_LEN = 600
OPAL_MAX_TARGET_QUERY_RATIO = 2.5


def available(scoring) -> bool:
    """Opal can score with this scheme (a protein matrix) and pyopal is installed."""
    if scoring.alphabet != "protein":
        return False
    if sw_simd.available(scoring):
        return True
    try:
        import pyopal  # noqa: F401
    except ImportError:
        return False
    return True


def prefer_opal(query_lengths, target_lengths) -> bool:
    """Opal for a block of pairs of these lengths: short targets, not much longer than the
    queries, or targets up to OPAL_MAX_TARGET_LEN against queries that are not long."""
    q = float(np.mean(query_lengths)) if len(query_lengths) else 0.0
    t = float(np.mean(target_lengths)) if len(target_lengths) else 0.0
    if not (q > 0 and t > 0):
        return False
    if t < OPAL_SHORT_TARGET_LEN and t < 2 * q:
        return True
    return q < OPAL_MAX_QUERY_LEN and t < OPAL_MAX_TARGET_LEN and \
        t < OPAL_MAX_TARGET_QUERY_RATIO * q


@lru_cache(maxsize=None)
def _aligner(matrix: str, gap_open: int, gap_extend: int):
    """One Opal aligner per process and scheme, on parasail's own substitution table."""
    import pyopal
    from scoring_matrices import ScoringMatrix

    from pairflow.kernels.scoring import _tables
    scores, codes, letters = _tables(matrix)
    alphabet = "".join(sorted(letters))
    idx = [int(codes[ord(c)]) for c in alphabet]
    table = scores[np.ix_(idx, idx)]
    sm = ScoringMatrix([[int(x) for x in row] for row in table], alphabet=alphabet,
                       name=matrix)
    return pyopal.Aligner(sm, gap_open=gap_open, gap_extend=gap_extend)


def opal_scores(queries, targets, scoring, mask=None) -> np.ndarray:
    """Smith-Waterman scores (int32, queries x targets), every pair computed; cells outside
    ``mask`` are set to 0 (nothing reads them). Sequences must already be validated and upper
    case, as the app's items are."""
    if sw_simd.available(scoring):
        return sw_simd.sw_simd_scores(queries, targets, scoring, mask)
    return pyopal_scores(queries, targets, scoring, mask)


def pyopal_scores(queries, targets, scoring, mask=None) -> np.ndarray:
    """:func:`opal_scores` by Opal itself (``pyopal``), whatever the CPU."""
    import pyopal
    aligner = _aligner(scoring.matrix, scoring.open, scoring.extend)
    db = pyopal.Database(list(targets), alphabet=aligner.alphabet)
    out = np.empty((len(queries), len(targets)), dtype=np.int32)
    for i, q in enumerate(queries):
        out[i] = [r.score for r in aligner.align(q, db, mode="score", algorithm="sw")]
    if mask is not None:
        out[~np.asarray(mask, bool)] = 0
    return out
