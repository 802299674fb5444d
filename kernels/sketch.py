"""Bottom-k MinHash sketches of 64-bit k-mer sets, and a safe test "is J(A, B) possibly >= t?".

Pure numpy, no I/O. A sketch is the ``s`` smallest values of ``mix64(kmers)`` (a bijection on
uint64, so distinct k-mers never collide). For a pair, the ``s`` smallest values of the union of
the two sketches are a uniform random sample (without replacement) of the union of the sets; the
shared values among them (those in both sketches) estimate J = |A ∩ B| / |A ∪ B| as
``shared / s_eff``.

The shared count is hypergeometric with mean ``J * s_eff``; its lower tail obeys the Chernoff
bound P(X <= q s) <= exp(-s KL(q || J)) (Hoeffding: sampling without replacement is at least as
concentrated as with replacement). ``may_reach`` rejects a pair only when, were J >= t, a count as
low as the observed one would have probability below ``alpha``: a pair with J >= t is dropped
with probability < alpha. When both sets fit their sketches the count is exact and the decision
is exact. The length ratio min(|A|, |B|) / max(|A|, |B|) bounds J from above exactly.
"""
from __future__ import annotations

import math

import numba
import numpy as np

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # pads sketches of sets smaller than s (never a hash)


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a bijection of uint64 that scatters structured k-mer codes."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def bottom_k(kmers: np.ndarray, s: int) -> np.ndarray:
    """The ``s`` smallest distinct hashes of a k-mer set, sorted, padded with EMPTY to length s.
    (EMPTY = 2**64 - 1 is the image of one k-mer under mix64; that hash is dropped, so a set
    holding that one k-mer is sketched as if without it — probability 2**-64 per k-mer.)"""
    h = mix64(np.asarray(kmers, dtype=np.uint64))
    h = h[h != EMPTY]
    if len(h) > s:
        low = np.unique(np.partition(h, s - 1)[:s])
        # a k-mer given twice fills two of the s places: then the distinct ones, all sorted
        h = low if len(low) == s else np.unique(h)
    else:
        h = np.unique(h)
    out = np.full(s, EMPTY, dtype=np.uint64)
    out[:len(h)] = h[:s]
    return out


@numba.njit(cache=True, nogil=True)
def _pair_shared(sk, I, J, shared, s_eff, n_union):  # pragma: no cover - compiled
    s = sk.shape[1]
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)
    for k in range(I.shape[0]):
        a = sk[I[k]]
        b = sk[J[k]]
        ia = 0
        ib = 0
        taken = 0
        sh = 0
        nu = 0
        while True:
            va = a[ia] if ia < s else empty
            vb = b[ib] if ib < s else empty
            if va == empty and vb == empty:
                break
            both = va == vb
            if both:
                ia += 1
                ib += 1
            elif va < vb:
                ia += 1
            else:
                ib += 1
            nu += 1
            if taken < s:
                taken += 1
                if both:
                    sh += 1
        shared[k] = sh
        n_union[k] = nu
        s_eff[k] = min(nu, s)


def pair_shared(sketches: np.ndarray, i: np.ndarray, j: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For pairs (i[k], j[k]) of rows of an (n, s) sketch matrix: (shared, s_eff, n_union): the
    number of values among the s smallest of the union of the two sketches that are in both, how
    many values that sample holds (s, or fewer when the union is smaller), and how many distinct
    values the two sketches hold together. A compiled merge of the two sorted sketches."""
    i = np.ascontiguousarray(i, dtype=np.int64)
    j = np.ascontiguousarray(j, dtype=np.int64)
    shared = np.zeros(len(i), np.int64)
    s_eff = np.zeros(len(i), np.int64)
    n_union = np.zeros(len(i), np.int64)
    if len(i):
        _pair_shared(np.ascontiguousarray(sketches, dtype=np.uint64), i, j, shared, s_eff,
                     n_union)
    return shared, s_eff, n_union


def pair_shared_reference(sketches: np.ndarray, i: np.ndarray, j: np.ndarray):
    """The same as ``pair_shared`` with plain set operations (for tests)."""
    s = sketches.shape[1]
    out = []
    for a, b in zip(np.asarray(i), np.asarray(j)):
        sa = {int(v) for v in sketches[a] if v != EMPTY}
        sb = {int(v) for v in sketches[b] if v != EMPTY}
        union = sorted(sa | sb)
        sample = union[:s]
        out.append((sum(1 for v in sample if v in sa and v in sb), len(sample), len(union)))
    arr = np.array(out, np.int64).reshape(-1, 3)
    return arr[:, 0], arr[:, 1], arr[:, 2]


def _kl(q: np.ndarray, t: float) -> np.ndarray:
    """KL(Bernoulli(q) || Bernoulli(t)) elementwise, for q in [0, 1]."""
    q = np.clip(q, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(q > 0, q * np.log(q / t), 0.0)
        b = np.where(q < 1, (1 - q) * np.log((1 - q) / (1 - t)), 0.0)
    return a + b


def may_reach(shared: np.ndarray, s_eff: np.ndarray, t: float, alpha: float,
              exact: np.ndarray | None = None) -> np.ndarray:
    """False only where J >= t is implausible: q = shared/s_eff < t and
    exp(-s_eff KL(q || t)) < alpha. ``exact`` (both sets inside their sketches) decides q >= t."""
    if not 0.0 < t <= 1.0:
        raise ValueError(f"threshold t must be in (0, 1], got {t}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    shared = np.asarray(shared, dtype=float)
    s_eff = np.asarray(s_eff, dtype=float)
    q = np.divide(shared, s_eff, out=np.zeros_like(shared), where=s_eff > 0)
    if t >= 1.0:
        keep = q >= 1.0
    else:
        keep = (q >= t) | (s_eff * _kl(q, t) <= math.log(1.0 / alpha))
    if exact is not None:
        keep = np.where(exact, q >= t - 1e-12, keep)
    return keep


def length_ratio(size_a: np.ndarray, size_b: np.ndarray) -> np.ndarray:
    """min/max of the set sizes: an exact upper bound of J."""
    a, b = np.asarray(size_a, float), np.asarray(size_b, float)
    hi = np.maximum(a, b)
    return np.divide(np.minimum(a, b), hi, out=np.ones_like(hi), where=hi > 0)
