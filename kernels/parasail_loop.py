"""The pair loop of :func:`kernels.smith_waterman.sw_scores` in compiled code, without the GIL.

Why: parasail is called once per pair, and each call is short (microseconds for a protein pair).
Called through ctypes, every pair released and retook the GIL and ran Python around it; in a Ray
actor, whose event loop and Ray's own threads want the GIL too, the compare thread then got only
part of a core while the machine had idle CPU. Rule: a whole tile runs in one ``nogil`` call, the
GIL taken once per tile (the engine against the kernel in plain processes, measured:
benchmarks/RESULTS.md, "Smith-Waterman").

The same parasail C functions are called, in the same order, with the same width and method
choices as the Python loop (``sw_scores(..., _direct=False)`` keeps that loop, and the tests
compare the two): the kernel is unchanged, only the loop around it moved.

The parasail functions are reached through their addresses, passed in as integers and called by
an LLVM intrinsic, so the compiled loop holds no process-specific pointer and numba can cache it
on disk. Pointer arguments travel as 64-bit integers: on x86-64 and aarch64 both go in the same
integer registers.
"""
from __future__ import annotations

import ctypes

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["available", "score_pairs"]

_I64, _I32 = ir.IntType(64), ir.IntType(32)


@intrinsic
def _call_score(typingctx, fn, profile, seq, seq_len, go, ge):
    """``parasail_result_t* fn(const parasail_profile_t*, const char*, int, int, int)``."""
    sig = types.uint64(types.uint64, types.uint64, types.uint64, types.int32, types.int32,
                       types.int32)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [_I64, _I64, _I32, _I32, _I32])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), args[1:])

    return sig, codegen


@intrinsic
def _call_profile(typingctx, fn, seq, seq_len, matrix):
    """``parasail_profile_t* fn(const char*, int, const parasail_matrix_t*)``."""
    sig = types.uint64(types.uint64, types.uint64, types.int32, types.uint64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I64, [_I64, _I32, _I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), args[1:])

    return sig, codegen


@intrinsic
def _call_int(typingctx, fn, ptr):
    """``int fn(const T*)`` (``parasail_result_get_score``, ``..._is_saturated``)."""
    sig = types.int32(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_I32, [_I64])
        return builder.call(builder.inttoptr(args[0], fnty.as_pointer()), args[1:])

    return sig, codegen


@intrinsic
def _call_free(typingctx, fn, ptr):
    """``void fn(T*)`` (``parasail_result_free``, ``parasail_profile_free``)."""
    sig = types.none(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [_I64])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), args[1:])
        return context.get_dummy_value()

    return sig, codegen


# rows of the function table ``fns`` (uint64 addresses)
_SCORE = 0          # fns[_SCORE + 4 * method + width_index], method 0 = first, 1 = retry
_PROFILE = 8        # fns[_PROFILE + width_index]
_GET_SCORE, _IS_SAT, _RESULT_FREE, _PROFILE_FREE = 12, 13, 14, 15
_N_FNS = 16

# status codes of _loop
OK, NO_PROFILE, NO_RESULT, OVERFLOW = 0, 1, 2, 3


@numba.njit(nogil=True, cache=True)
def _profile(fns, cache, w, i, base, offs, lens, matrix):
    p = cache[w, i]
    if p == 0:
        p = _call_profile(fns[_PROFILE + w], base + np.uint64(offs[i]), np.int32(lens[i]),
                          matrix)
        cache[w, i] = p
    return p


@numba.njit(nogil=True, cache=True)
def _loop(fns, qbase, qoff, qlen, tbase, toff, tlen, mask, use_mask, matrix, go, ge,
          width0, auto8_min, auto8_probe, auto8_rate, out, qprof, tprof, err):
    """Every wanted pair's score into ``out``; ``width0`` is the first width index (0..3) or
    -1 for "auto". Returns a status; ``err`` gets the pair (i, j) of a failure."""
    nq, nt = qlen.shape[0], tlen.shape[0]
    for i in range(nq):
        tried8 = 0
        sat8 = 0
        for j in range(nt):
            if use_mask and not mask[i, j]:
                continue
            lq, lt = qlen[i], tlen[j]
            kern = 0
            if width0 < 0:
                w = 1
                if max(lq, lt) >= auto8_min:
                    if tried8 < auto8_probe or sat8 <= auto8_rate * tried8:
                        w = 0
                    else:
                        kern = 1
            else:
                w = width0
            score = 0
            while True:
                if lq >= lt:
                    prof = _profile(fns, qprof, w, i, qbase, qoff, qlen, matrix)
                    seq, slen = tbase + np.uint64(toff[j]), lt
                else:
                    prof = _profile(fns, tprof, w, j, tbase, toff, tlen, matrix)
                    seq, slen = qbase + np.uint64(qoff[i]), lq
                if prof == 0:
                    err[0], err[1] = i, j
                    return NO_PROFILE
                res = _call_score(fns[_SCORE + 4 * kern + w], prof, seq, np.int32(slen),
                                  np.int32(go), np.int32(ge))
                if res == 0:
                    err[0], err[1] = i, j
                    return NO_RESULT
                score = _call_int(fns[_GET_SCORE], res)
                saturated = _call_int(fns[_IS_SAT], res) != 0
                _call_free(fns[_RESULT_FREE], res)
                if w == 0:
                    tried8 += 1
                if not saturated:
                    break
                if w == 0:
                    sat8 += 1
                if w == 3:
                    err[0], err[1] = i, j
                    return OVERFLOW
                w += 1
                kern = 1
            out[i, j] = score
    return OK


@numba.njit(nogil=True, cache=True)
def _free_profiles(fns, cache):
    for w in range(cache.shape[0]):
        for i in range(cache.shape[1]):
            if cache[w, i] != 0:
                _call_free(fns[_PROFILE_FREE], cache[w, i])
                cache[w, i] = 0


_TABLES: dict = {}


def _address(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


def _table(first: str, retry: str):
    """The function table for (first method, retry method), built once per process."""
    key = (first, retry)
    fns = _TABLES.get(key)
    if fns is None:
        from parasail import bindings_v2 as pb

        lib = pb._lib
        fns = np.zeros(_N_FNS, dtype=np.uint64)
        for k, method in enumerate((first, retry)):
            for w, bits in enumerate((8, 16, 32, 64)):
                fns[_SCORE + 4 * k + w] = _address(getattr(lib, f"parasail_sw_{method}_profile_{bits}"))
        for w, bits in enumerate((8, 16, 32, 64)):
            fns[_PROFILE + w] = _address(getattr(lib, f"parasail_profile_create_{bits}"))
        fns[_GET_SCORE] = _address(lib.parasail_result_get_score)
        fns[_IS_SAT] = _address(lib.parasail_result_is_saturated)
        fns[_RESULT_FREE] = _address(lib.parasail_result_free)
        fns[_PROFILE_FREE] = _address(lib.parasail_profile_free)
        _TABLES[key] = fns
    return fns


def available() -> bool:
    """Does the installed parasail expose the C functions this loop calls?"""
    try:
        _table("striped", "scan")
        return True
    except Exception:  # pragma: no cover - other parasail layouts: the Python loop is used
        return False


def _pack(seqs: list[bytes]):
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    offs = np.zeros(len(seqs), dtype=np.int64)
    if len(seqs) > 1:
        np.cumsum(lens[:-1] + 1, out=offs[1:])  # +1: a NUL after each, as C strings have
    buf = np.frombuffer(b"\0".join(seqs) + b"\0", dtype=np.uint8)
    return buf, offs, lens


def score_pairs(qb: list[bytes], tb: list[bytes], matrix, go: int, ge: int, mask,
                first: str, retry: str, width_index: int, auto8: tuple[int, int, float],
                fill: int = -1):
    """Scores (int64) of the wanted pairs, ``fill`` elsewhere; ``width_index`` -1 means
    "auto" (see sw_scores)."""
    fns = _table(first, retry)
    qbuf, qoff, qlen = _pack(qb)
    tbuf, toff, tlen = _pack(tb)
    out = np.full((len(qb), len(tb)), fill, dtype=np.int64)
    use_mask = mask is not None
    m = mask if use_mask else np.zeros((1, 1), dtype=np.bool_)
    qprof = np.zeros((4, len(qb)), dtype=np.uint64)
    tprof = np.zeros((4, len(tb)), dtype=np.uint64)
    err = np.zeros(2, dtype=np.int64)
    matrix_ptr = _address(matrix.pointer)
    try:
        status = _loop(fns, np.uint64(qbuf.ctypes.data), qoff, qlen,
                       np.uint64(tbuf.ctypes.data), toff, tlen, np.ascontiguousarray(m, bool),
                       use_mask, np.uint64(matrix_ptr), go, ge, width_index, auto8[0],
                       auto8[1], float(auto8[2]), out, qprof, tprof, err)
    finally:
        _free_profiles(fns, qprof)
        _free_profiles(fns, tprof)
    if status == OVERFLOW:  # pragma: no cover - needs a score beyond 2**63
        raise OverflowError(f"score of query {err[0]} x target {err[1]} overflows 64 bits")
    if status != OK:
        what = "profile" if status == NO_PROFILE else "alignment"
        raise MemoryError(f"parasail could not allocate a {what} for query {err[0]} x "
                          f"target {err[1]}")
    return out
