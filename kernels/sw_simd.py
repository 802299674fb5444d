"""Smith-Waterman scores of many short targets at once in AVX-512 lanes (``kernels/_sw_simd.c``).

Why a kernel of our own: Opal (``pyopal``), the inter-sequence kernel the app used for many short
targets, stops at AVX2 (32 lanes of 8 bits); parasail's wheel has no AVX-512 code either. The same
layout in AVX-512 (64 lanes of 8 bits, a column's substitution scores by one byte permute) scores
the align benchmark's proteins at ~1.7x Opal's cells per CPU second on one core, with identical
scores (benchmarks/RESULTS.md, "Smith-Waterman"). Where the CPU lacks AVX-512 BW and VBMI, or the
extension was not built (no C compiler at install: it is optional), :func:`available` is False
and the caller keeps Opal.

Scores are exact: 8-bit lanes that saturate are redone in 16 bits, and pairs that saturate 16 bits
(a score of 32,767 or more) are scored by parasail here.
"""
from __future__ import annotations

import ctypes
import importlib.util
from functools import lru_cache

import numpy as np

__all__ = ["available", "sw_simd_scores"]

# the C kernel's pad letter is code 31: a matrix must have fewer letters
_MAX_LETTERS = 31


@lru_cache(maxsize=None)
def _lib():
    """The compiled kernel, or None (not built, or this CPU lacks AVX-512 BW/VBMI)."""
    spec = importlib.util.find_spec("pairflow.kernels._sw_simd")
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:
        return None
    if not lib.sw_simd_supported():
        return None
    p = ctypes.c_void_p
    lib.sw_simd_scores.argtypes = [p, ctypes.c_int, p, p, ctypes.c_int, p, p, p, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_int, p]
    lib.sw_simd_scores.restype = ctypes.c_int
    return lib


@lru_cache(maxsize=None)
def available(scoring) -> bool:
    """This kernel can score with ``scoring`` here: built, the CPU has AVX-512 BW and VBMI, the
    matrix has fewer than 31 letters and its scores and gap costs fit in 8 bits."""
    if _lib() is None:
        return False
    from pairflow.kernels.scoring import _tables
    scores = _tables(scoring.matrix)[0]
    return scores.shape[0] < _MAX_LETTERS and int(np.abs(scores).max()) <= 127 and \
        0 <= scoring.open <= 127 and 0 <= scoring.extend <= 127


def _encode(seqs, codes) -> tuple[np.ndarray, np.ndarray]:
    """Letter codes of every sequence, concatenated, and their offsets (n + 1)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    raw = np.frombuffer("".join(seqs).encode("ascii"), dtype=np.uint8)
    return np.ascontiguousarray(codes[raw], dtype=np.uint8), offsets


def sw_simd_scores(queries, targets, scoring, mask=None) -> np.ndarray:
    """Smith-Waterman scores (int32, queries x targets) with the standard gap convention, every
    pair computed; cells outside ``mask`` are set to 0. Sequences must already be validated and
    upper case. Call only where :func:`available` holds."""
    from pairflow.kernels.scoring import _tables
    lib = _lib()
    scores, codes, _ = _tables(scoring.matrix)
    matrix = np.ascontiguousarray(scores, dtype=np.int32)
    qc, qoff = _encode(queries, codes)
    tc, toff = _encode(targets, codes)
    # lanes of a batch end together when the targets come in length order
    order = np.argsort(np.diff(toff), kind="stable").astype(np.int32)
    out = np.empty((len(queries), len(targets)), dtype=np.int32)
    rc = lib.sw_simd_scores(matrix.ctypes.data, matrix.shape[0], qc.ctypes.data,
                            qoff.ctypes.data, len(queries), tc.ctypes.data, toff.ctypes.data,
                            order.ctypes.data, len(targets), int(scoring.open),
                            int(scoring.extend), out.ctypes.data)
    if rc != 0:
        raise MemoryError("sw_simd: out of memory laying out the targets")
    over = np.argwhere(out < 0)
    if len(over):
        from pairflow.kernels.smith_waterman import sw_scores
        for i in np.unique(over[:, 0]):
            ks = over[over[:, 0] == i, 1]
            out[i, ks] = sw_scores([queries[i]], [targets[k] for k in ks], scoring,
                                   validate=False)[0]
    if mask is not None:
        out[~np.asarray(mask, bool)] = 0
    return out
