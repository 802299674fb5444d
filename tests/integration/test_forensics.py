"""app=forensics on simulated cameras: the engine's NCC equals numpy's on the residuals, and
clustering recovers the cameras (adjusted Rand index) at the documented noise and quality."""
import csv
import glob
import os
from math import comb

import numpy as np
import pytest

pytestmark = pytest.mark.ray


def adjusted_rand_index(truth, labels):
    """Hubert & Arabie's ARI from the contingency table (written out, no library)."""
    t_vals, l_vals = sorted(set(truth)), sorted(set(labels))
    table = [[sum(1 for a, b in zip(truth, labels) if a == t and b == l) for l in l_vals]
             for t in t_vals]
    index = sum(comb(n, 2) for row in table for n in row)
    rows = sum(comb(sum(row), 2) for row in table)
    cols = sum(comb(sum(col), 2) for col in zip(*table))
    expected = rows * cols / comb(len(truth), 2)
    top = (rows + cols) / 2
    return 1.0 if top == expected else (index - expected) / (top - expected)


def test_adjusted_rand_index_by_hand():
    assert adjusted_rand_index([0, 0, 1, 1], [5, 5, 7, 7]) == 1.0
    # table [[2, 1], [0, 1]]: index 1; rows C(3,2) + C(1,2) = 3; cols C(2,2) + C(2,2) = 2;
    # expected 3 * 2 / C(4,2) = 1; mean of rows and cols 2.5: ARI (1 - 1) / (2.5 - 1) = 0
    assert adjusted_rand_index([0, 0, 0, 1], [0, 0, 1, 1]) == 0.0


@pytest.mark.slow
def test_simulated_cameras_are_recovered(ray_local, tmp_path):
    from PIL import Image

    from pairflow.apps.forensics import forensics
    from pairflow.kernels.prnu import noise_residual
    from pairflow.apps.datasets import CAMERAS as DEFAULTS
    from pairflow.apps.datasets import simulate_cameras as simulate
    params = {**DEFAULTS, "cameras": 4, "shots": 5}  # the documented noise and JPEG quality
    truth = simulate(str(tmp_path / "shots"), **params)
    paths = [p for p, _ in truth]
    n = len(paths)
    res = forensics(paths, runs_root=str(tmp_path / "runs"), progress=False,
                    host_cache_items=n // 4)  # a host tier holding a quarter of the photos
    assert adjusted_rand_index([c for _, c in truth], list(res.labels)) >= 0.95
    with open(res.outputs["clusters"]) as fh:
        rows = list(csv.DictReader(fh))
    assert [r["image"] for r in rows] == [os.path.basename(p)[:-4] for p in paths]

    residuals = [noise_residual(np, np.asarray(Image.open(p).convert("L"), float)).ravel()
                 for p in paths]
    np.testing.assert_allclose(res.matrix("ncc"), np.corrcoef(residuals), atol=1e-6)
    pce = res.matrix("pce")
    assert np.allclose(pce, pce.T, equal_nan=True) and np.isnan(np.diag(pce)).all()
    assert res.summary["R"] >= 1.0


def test_bad_images_fail_before_compute(tmp_path):
    from PIL import Image

    from pairflow.apps.forensics import ForensicsApp
    from pairflow.engine.errors import InputError
    good = tmp_path / "a.png"
    Image.fromarray(np.zeros((128, 128), np.uint8)).save(good)
    other = tmp_path / "b.png"
    Image.fromarray(np.zeros((128, 96), np.uint8)).save(other)
    with pytest.raises(InputError, match=r"b\.png: image is 128x96 but .*a\.png is 128x128"):
        ForensicsApp([str(good), str(other)])
    text = tmp_path / "c.jpg"
    text.write_text("not a photo")
    with pytest.raises(InputError, match=r"c\.jpg: cannot be read as an image"):
        ForensicsApp([str(good), str(text)])
