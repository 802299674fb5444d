"""Rigid registration of 2-D localisation point clouds by Gaussian-mixture overlap, and the
consensus of many pairwise registrations (template-free particle fusion, after Heydarian et al.
2018).

A particle is a cloud of localisations; as a Gaussian mixture of scale σ, the L2 inner product
of two clouds a and b under the rigid motion (θ, t) is, up to a constant,

    overlap(θ, t) = Σ_i Σ_j exp(−|R(θ)·a_i + t − b_j|² / (4σ²)),

and overlap / sqrt(overlap(a, a) · overlap(b, b)) is the cosine of the two mixtures, a score in
(0, 1]. The best motion is searched in two steps: a coarse grid of rotations with the clouds'
centroids superposed, at a wide scale (a smoother landscape), then, from the best few grid
angles at once, the fixed-point iteration of weighted Procrustes (the EM step of rigid
Gaussian-mixture registration), annealing the scale down to the working one. No per-point
Python: the whole search is array operations on ``xp`` (torch on CPU or GPU), and on numpy the
same steps as compiled loops (``_register_compiled``): the array form builds (angles x n x m)
temporaries at every step, which makes a pair several times slower and memory-bound (two
processes of it slow each other down).

Fusion (``synchronize``, numpy on the host: once per run, on n×n numbers): absolute rotations
from the pairwise ones are the leading eigenvector of the Hermitian matrix of weighted e^{iθ_ij}
(rotation averaging on SO(2), Singer 2011); with them fixed, absolute translations solve the
linear least squares τ_j − R_ij·τ_i = t_ij.
"""
from __future__ import annotations

import math

import numpy as np

from .backend import is_numpy_namespace
from .lazyjit import lazy_njit

__all__ = ["center", "self_overlap", "overlap", "register", "synchronize", "fuse"]

COARSE_ANGLES = 72      # 5° steps, at the widest scale; the refinement works within one
CANDIDATES = 3          # coarse angles refined (a near-symmetric particle has rivals)
# the refinement anneals the scale: a wide mixture first (the centroids of two particles with
# different missing sites differ by more than σ), then the working scale
ANNEAL = (3.0, 2.0, 1.5, 1.0)
STEPS_PER_SCALE = 8


def center(xp, points):
    """Points moved so that their centroid is the origin."""
    return points - xp.mean(points, axis=0, keepdims=True)


def overlap(xp, a, b, theta, tx, ty, scale: float):
    """Overlap of a moved by each (θ, tx, ty) (1-D arrays of one length K) with b: shape (K,)."""
    c, s = xp.cos(theta)[:, None], xp.sin(theta)[:, None]
    ax = c * a[None, :, 0] - s * a[None, :, 1] + tx[:, None]
    ay = s * a[None, :, 0] + c * a[None, :, 1] + ty[:, None]
    dx = ax[:, :, None] - b[None, None, :, 0]
    dy = ay[:, :, None] - b[None, None, :, 1]
    return xp.sum(xp.exp(-(dx * dx + dy * dy) / (4 * scale * scale)), axis=(1, 2))


def self_overlap(xp, a, scale: float) -> float:
    zero = xp.zeros(1, dtype=a.dtype, device=a.device)
    return float(overlap(xp, a, a, zero, zero, zero, scale)[0])


def _procrustes_step(xp, a, b, theta, shift, scale: float):
    """One fixed-point step of the overlap's maximisation for C candidate motions at once:
    with the pair weights w_ij = exp(−|R·a_i + t − b_j|²/4σ²) of the current motion held,
    the weighted Procrustes motion (closed form in 2-D) is the next one. Its fixed points are
    exactly the stationary points of the overlap (its gradient in t and θ vanishes there)."""
    c, s = xp.cos(theta)[:, None], xp.sin(theta)[:, None]
    ax = c * a[None, :, 0] - s * a[None, :, 1] + shift[:, 0:1]
    ay = s * a[None, :, 0] + c * a[None, :, 1] + shift[:, 1:2]
    dx = ax[:, :, None] - b[None, None, :, 0]
    dy = ay[:, :, None] - b[None, None, :, 1]
    w = xp.exp(-(dx * dx + dy * dy) / (4 * scale * scale))             # (C, n, m)
    total = xp.sum(w, axis=(1, 2))[:, None]
    wa, wb = xp.sum(w, axis=2), xp.sum(w, axis=1)                     # (C, n), (C, m)
    mean_a = (wa @ a) / total                                          # (C, 2)
    mean_b = (wb @ b) / total
    # Σ_ij w_ij (a_i − μa)(b_j − μb)ᵀ = Σ_ij w_ij a_i b_jᵀ − total·μa μbᵀ
    cross = xp.matmul(xp.matmul(xp.permute_dims(xp.broadcast_to(a, (w.shape[0],) + a.shape),
                                                (0, 2, 1)), w), b)       # (C, 2, 2)
    cross = cross - total[:, :, None] * mean_a[:, :, None] * mean_b[:, None, :]
    new_theta = xp.atan2(cross[:, 0, 1] - cross[:, 1, 0], cross[:, 0, 0] + cross[:, 1, 1])
    c, s = xp.cos(new_theta), xp.sin(new_theta)
    turned = xp.stack([c * mean_a[:, 0] - s * mean_a[:, 1], s * mean_a[:, 0] + c * mean_a[:, 1]],
                      axis=1)
    return new_theta, mean_b - turned


def register(xp, a, b, scale: float, self_a: float | None = None,
             self_b: float | None = None) -> tuple[float, float, float, float]:
    """(score, θ, tx, ty) moving centred cloud ``a`` onto centred cloud ``b``: R(θ)·a + t ≈ b."""
    self_a = self_overlap(xp, a, scale) if self_a is None else self_a
    self_b = self_overlap(xp, b, scale) if self_b is None else self_b
    if is_numpy_namespace(xp) and isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return _register_compiled(np.ascontiguousarray(a, np.float64),
                                  np.ascontiguousarray(b, np.float64), float(scale),
                                  float(self_a), float(self_b))
    # (on the clouds' device: a GPU's arrays and the host's do not mix)
    grid = xp.asarray(np.arange(COARSE_ANGLES) * (2 * math.pi / COARSE_ANGLES),
                      device=a.device)
    zeros = xp.zeros(COARSE_ANGLES, dtype=grid.dtype, device=a.device)
    coarse = overlap(xp, a, b, grid, zeros, zeros, ANNEAL[0] * scale)
    # the best grid angles that are local maxima on the circle, best first
    left, right = xp.roll(coarse, 1), xp.roll(coarse, -1)
    peaks = xp.where((coarse >= left) & (coarse >= right), coarse, xp.full_like(coarse, -1.0))
    order = xp.argsort(-peaks)[:CANDIDATES]
    state = xp.stack([xp.take(grid, order),
                      xp.zeros(CANDIDATES, dtype=grid.dtype, device=a.device),
                      xp.zeros(CANDIDATES, dtype=grid.dtype, device=a.device)], axis=1)
    theta, shift = state[:, 0], state[:, 1:]
    for factor in ANNEAL:
        for _ in range(STEPS_PER_SCALE):
            theta, shift = _procrustes_step(xp, a, b, theta, shift, factor * scale)
    state = xp.concat([theta[:, None], shift], axis=1)
    final = overlap(xp, a, b, state[:, 0], state[:, 1], state[:, 2], scale)
    k = int(xp.argmax(final))
    theta = float(state[k, 0]) % (2 * math.pi)
    score = float(final[k]) / math.sqrt(self_a * self_b)
    return score, theta, float(state[k, 1]), float(state[k, 2])


@lazy_njit(cache=True, nogil=True)
def _overlap_one(a, b, theta, tx, ty, scale):
    """``overlap`` of one motion, as loops."""
    c, s = math.cos(theta), math.sin(theta)
    f = 1.0 / (4.0 * scale * scale)
    total = 0.0
    for i in range(a.shape[0]):
        ax = c * a[i, 0] - s * a[i, 1] + tx
        ay = s * a[i, 0] + c * a[i, 1] + ty
        for j in range(b.shape[0]):
            dx = ax - b[j, 0]
            dy = ay - b[j, 1]
            total += math.exp(-(dx * dx + dy * dy) * f)
    return total


@lazy_njit(cache=True, nogil=True)
def _procrustes_one(a, b, theta, tx, ty, scale, wa, wb):
    """``_procrustes_step`` of one motion, as loops (``wa``, ``wb``: scratch of n and m)."""
    c, s = math.cos(theta), math.sin(theta)
    f = 1.0 / (4.0 * scale * scale)
    for j in range(b.shape[0]):
        wb[j] = 0.0
    total = 0.0
    c00 = c01 = c10 = c11 = 0.0  # Σ_ij w_ij a_i b_jᵀ
    for i in range(a.shape[0]):
        ax = c * a[i, 0] - s * a[i, 1] + tx
        ay = s * a[i, 0] + c * a[i, 1] + ty
        row = rx = ry = 0.0
        for j in range(b.shape[0]):
            dx = ax - b[j, 0]
            dy = ay - b[j, 1]
            w = math.exp(-(dx * dx + dy * dy) * f)
            row += w
            rx += w * b[j, 0]
            ry += w * b[j, 1]
            wb[j] += w
        wa[i] = row
        total += row
        c00 += a[i, 0] * rx
        c01 += a[i, 0] * ry
        c10 += a[i, 1] * rx
        c11 += a[i, 1] * ry
    ma0 = ma1 = mb0 = mb1 = 0.0
    for i in range(a.shape[0]):
        ma0 += wa[i] * a[i, 0]
        ma1 += wa[i] * a[i, 1]
    for j in range(b.shape[0]):
        mb0 += wb[j] * b[j, 0]
        mb1 += wb[j] * b[j, 1]
    ma0, ma1, mb0, mb1 = ma0 / total, ma1 / total, mb0 / total, mb1 / total
    c00 -= total * ma0 * mb0
    c01 -= total * ma0 * mb1
    c10 -= total * ma1 * mb0
    c11 -= total * ma1 * mb1
    turn = math.atan2(c01 - c10, c00 + c11)
    c, s = math.cos(turn), math.sin(turn)
    return turn, mb0 - (c * ma0 - s * ma1), mb1 - (s * ma0 + c * ma1)


@lazy_njit(cache=True, nogil=True)
def _register_compiled(a, b, scale, self_a, self_b):
    """``register`` on numpy as compiled loops: the same grid, candidates (the best local
    maxima, ties to the lower angle), annealing and final choice (the first best)."""
    grid = np.arange(COARSE_ANGLES) * (2 * math.pi / COARSE_ANGLES)
    coarse = np.empty(COARSE_ANGLES)
    for k in range(COARSE_ANGLES):
        coarse[k] = _overlap_one(a, b, grid[k], 0.0, 0.0, ANNEAL[0] * scale)
    peaks = np.empty(COARSE_ANGLES)
    for k in range(COARSE_ANGLES):
        left, right = coarse[(k - 1) % COARSE_ANGLES], coarse[(k + 1) % COARSE_ANGLES]
        peaks[k] = coarse[k] if coarse[k] >= left and coarse[k] >= right else -1.0
    order = np.argsort(-peaks, kind="mergesort")[:CANDIDATES]
    wa, wb = np.empty(a.shape[0]), np.empty(b.shape[0])
    best, best_theta, best_tx, best_ty = -1.0, 0.0, 0.0, 0.0
    for q in range(order.shape[0]):
        theta, tx, ty = grid[order[q]], 0.0, 0.0
        for factor in ANNEAL:
            for _ in range(STEPS_PER_SCALE):
                theta, tx, ty = _procrustes_one(a, b, theta, tx, ty, factor * scale, wa, wb)
        value = _overlap_one(a, b, theta, tx, ty, scale)
        if value > best:
            best, best_theta, best_tx, best_ty = value, theta, tx, ty
    return (best / math.sqrt(self_a * self_b), best_theta % (2 * math.pi), best_tx, best_ty)


def _rotation(theta):
    c, s = np.cos(theta), np.sin(theta)
    return np.stack([np.stack([c, -s], axis=-1), np.stack([s, c], axis=-1)], axis=-2)


def synchronize(theta, tx, ty, weight):
    """Absolute poses (φ_i, τ_i) from pairwise registrations of i onto j (upper triangle of the
    n×n arrays ``theta``, ``tx``, ``ty``, ``weight``; weight 0 leaves a pair out), such that
    particle i's points x satisfy x ≈ R(φ_i)·s + τ_i for one common frame s. The frame is fixed
    up to a rigid motion: the first particle's rotation is 0, the translations' mean is 0.
    numpy only: it runs once per run on the host, on n×n numbers."""
    n = theta.shape[0]
    i, j = np.triu_indices(n, 1)
    w = np.asarray(weight, dtype=np.float64)[i, j]
    th = np.asarray(theta, dtype=np.float64)[i, j]
    h = np.zeros((n, n), dtype=np.complex128)
    h[j, i] = w * np.exp(1j * th)    # z_j ≈ e^{iθ_ij}·z_i
    h[i, j] = w * np.exp(-1j * th)
    lead = np.linalg.eigh(h)[1][:, -1]
    phi = (np.angle(lead) - np.angle(lead[0])) % (2 * math.pi)
    # translations: √w·(τ_j − R(φ_j − φ_i)·τ_i) = √w·t_ij, x rows then y rows, plus Σ τ = 0;
    # columns 0..n−1 are τx, n..2n−1 τy
    rot = _rotation(phi[j] - phi[i])
    e, sw, pair = len(w), np.sqrt(w), np.arange(len(w))
    design = np.zeros((2 * e + 2, 2 * n))
    design[pair, j] += sw
    design[pair, i] -= sw * rot[:, 0, 0]
    design[pair, n + i] -= sw * rot[:, 0, 1]
    design[e + pair, n + j] += sw
    design[e + pair, i] -= sw * rot[:, 1, 0]
    design[e + pair, n + i] -= sw * rot[:, 1, 1]
    design[2 * e, :n] = 1.0
    design[2 * e + 1, n:] = 1.0
    rhs = np.concatenate([sw * np.asarray(tx, np.float64)[i, j],
                          sw * np.asarray(ty, np.float64)[i, j], np.zeros(2)])
    tau = np.linalg.lstsq(design, rhs, rcond=None)[0]
    return phi, np.stack([tau[:n], tau[n:]], axis=1)


def fuse(particles, phi, tau) -> np.ndarray:
    """All particles' points in the common frame: s = R(φ_i)ᵀ·(x − τ_i)."""
    # row vectors: (x − τ)·R is (Rᵀ·(x − τ))ᵀ
    return np.concatenate([(np.asarray(p) - tau[k][None, :]) @ _rotation(phi[k])
                           for k, p in enumerate(particles)])
