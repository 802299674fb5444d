"""app=microscopy on simulated particles of a known template: relative rotations within 2° of
the simulated ones, and the fused particle correlates with the template."""
import csv
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.ray


def _render(points, origin, size=260, blur=4.0):
    """A 1 nm-pixel image of a point cloud, Gaussian-blurred (scipy), around ``origin``."""
    from scipy.ndimage import gaussian_filter
    idx = np.round(points - origin + size / 2).astype(int)
    ok = ((idx >= 0) & (idx < size)).all(axis=1)
    image = np.zeros((size, size))
    np.add.at(image, (idx[ok, 1], idx[ok, 0]), 1.0)
    return gaussian_filter(image, blur)


def _best_correlation(a, b, reach=12):
    """Pearson correlation of two images at the best integer shift within ``reach`` pixels."""
    best = -1.0
    for dy in range(-reach, reach + 1):
        for dx in range(-reach, reach + 1):
            best = max(best, np.corrcoef(a.ravel(), np.roll(b, (dy, dx), (0, 1)).ravel())[0, 1])
    return best


@pytest.mark.slow
def test_particles_are_registered_and_fused(ray_local, tmp_path):
    from pairflow.apps.microscopy import microscopy
    from pairflow.apps.datasets import PARTICLES as DEFAULTS
    from pairflow.apps.datasets import simulate_particles as simulate, template_sites
    truth = simulate(str(tmp_path / "particles"), **{**DEFAULTS, "particles": 24})
    paths = [p for p, _ in truth]
    angle = np.array([a for _, a in truth])
    res = microscopy(paths, runs_root=str(tmp_path / "runs"), progress=False)
    rotation = res.matrix("rotation")
    i, j = np.triu_indices(len(paths), 1)
    err = (rotation[i, j] - (angle[j] - angle[i]) + 180) % 360 - 180
    assert np.mean(np.abs(err) <= 2.0) >= 0.95, np.sort(np.abs(err))[-10:]

    with open(res.outputs["fused"]) as fh:
        fused = np.array([(float(r["x"]), float(r["y"])) for r in csv.DictReader(fh)])
    # the fused frame is the first particle's: undo its simulated rotation
    t = math.radians(angle[0])
    fused = fused @ np.array([[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    template = template_sites()
    got = _render(fused, fused.mean(axis=0))
    want = _render(template, template.mean(axis=0))
    assert _best_correlation(want, got) >= 0.9
    with open(res.outputs["poses"]) as fh:
        assert len(list(csv.DictReader(fh))) == len(paths)
    assert os.path.getsize(res.outputs["fused"]) > 0
