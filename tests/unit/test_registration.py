"""Point-cloud registration and fusion kernels against hand-made motions and a brute force."""
import math

import numpy as np
import pytest

from pairflow.kernels.registration import center, fuse, overlap, register, self_overlap, synchronize
from tests.conftest import need_module


def _rot(deg):
    t = math.radians(deg)
    return np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])


@pytest.fixture(scope="module")
def cloud():
    """An asymmetric cloud: points along an L and a dot, with a little noise."""
    rng = np.random.default_rng(5)
    stem = np.c_[np.zeros(12), np.arange(12) * 10.0]
    foot = np.c_[np.arange(1, 7) * 10.0, np.zeros(6)]
    dot = np.array([[40.0, 70.0]])
    return center(np, np.vstack([stem, foot, dot]) + rng.normal(0, 0.5, (19, 2)))


def test_overlap_equals_a_double_loop(cloud):
    moved = cloud[:7] @ _rot(30).T + [2.0, -1.0]
    want = sum(math.exp(-((p @ _rot(10).T + [0.5, 0.5] - q) ** 2).sum() / (4 * 3.0 ** 2))
               for p in cloud[:7] for q in moved)
    got = overlap(np, cloud[:7], moved, np.radians([10.0]), np.array([0.5]), np.array([0.5]),
                  3.0)
    assert got[0] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("device", ["cpu", "torch-cpu"])
@pytest.mark.parametrize("angle", [0.0, 133.0, 251.5])
def test_a_known_motion_is_recovered(cloud, angle, device):
    from pairflow.kernels.backend import namespace_for, to_device
    if device == "torch-cpu":
        need_module("torch")
    xp = namespace_for(device)
    rng = np.random.default_rng(int(angle))
    target = cloud @ _rot(angle).T + rng.normal(0, 0.3, cloud.shape)
    keep = rng.random(len(target)) > 0.15  # missing points move the centroid
    target = center(np, target[keep])
    a, b = to_device(xp, cloud, device), to_device(xp, target, device)
    score, theta, tx, ty = register(xp, a, b, 2.0)
    err = (math.degrees(theta) - angle + 180) % 360 - 180
    assert abs(err) < 1.0 and 0.5 < score <= 1.0
    moved = cloud @ _rot(math.degrees(theta)).T + [tx, ty]
    nearest = np.sqrt(((moved[keep][:, None] - target[None]) ** 2).sum(-1)).min(1)
    assert np.median(nearest) < 1.0


def test_compiled_and_array_searches_agree(cloud):
    """The compiled loops numpy runs and the array form torch runs are two writings of one
    search: on pairs of noisy, partial copies both give the same motion and score."""
    torch = need_module("torch")
    from pairflow.kernels.backend import namespace_for
    xp = namespace_for("torch-cpu")
    rng = np.random.default_rng(11)
    for angle in (17.0, 95.0, 200.0, 333.0):
        target = cloud @ _rot(angle).T + rng.normal(0, 0.8, cloud.shape)
        target = center(np, target[rng.random(len(target)) > 0.2])
        got = register(np, cloud, target, 2.0)
        want = register(xp, torch.from_numpy(cloud), torch.from_numpy(target), 2.0)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def test_self_registration_scores_one(cloud):
    score, theta, tx, ty = register(np, cloud, cloud, 2.0)
    assert score == pytest.approx(1.0, abs=1e-6)
    assert min(theta, 2 * math.pi - theta) < 1e-3 and abs(tx) < 1e-2 and abs(ty) < 1e-2
    assert self_overlap(np, cloud, 2.0) >= len(cloud)


def test_synchronize_recovers_consistent_poses_and_fuses(cloud):
    """Exact pairwise motions from known poses x = R(φ)·s + τ: the poses come back up to one
    rigid motion, and the fused points land on the template."""
    rng = np.random.default_rng(2)
    n = 6
    phi = rng.uniform(0, 2 * math.pi, n)
    tau = rng.normal(0, 5, (n, 2))
    parts = [cloud @ _rot(math.degrees(p)).T + t for p, t in zip(phi, tau)]
    theta, tx, ty = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            r = _rot(math.degrees(phi[j] - phi[i]))
            theta[i, j] = phi[j] - phi[i]
            tx[i, j], ty[i, j] = tau[j] - r @ tau[i]
    weight = np.triu(np.ones((n, n)), 1)
    got_phi, got_tau = synchronize(theta, tx, ty, weight)
    diff = (got_phi - phi + math.pi) % (2 * math.pi) - math.pi
    assert np.ptp(diff) < 1e-9  # one common rotation
    fused = fuse(parts, got_phi, got_tau)
    first = fused[:len(cloud)]
    for k in range(1, n):  # every particle lands on the first one's points
        np.testing.assert_allclose(fused[k * len(cloud):(k + 1) * len(cloud)], first, atol=1e-8)
