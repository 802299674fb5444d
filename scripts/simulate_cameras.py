"""Simulated camera shots for ``app=forensics``, made from the photographs scikit-image bundles.

    python scripts/simulate_cameras.py                 # into .data/cameras (default sizes)
    python scripts/simulate_cameras.py --out DIR --size 256 --cameras 3 --shots 5

Each of ``cameras`` simulated cameras has a fixed sensor pattern K (Gaussian, standard deviation
``prnu``) that multiplies the light of every shot it takes; a shot is a ``size``×``size`` grey
crop of one of the bundled photographs (no two shots alike: scene and orientation differ), times
(1 + K), plus shot noise (Gaussian, variance ``gain``·I, i.e. Poisson-like) and read noise (σ =
``read_noise`` grey levels), rounded to 8 bits and saved as JPEG of quality ``quality``. These
are the documented noise and quality at which the tests ask clustering to recover the cameras.
Everything follows from ``seed``: the same arguments give the same files. ``truth.csv`` maps
each file to its camera.
"""
from __future__ import annotations

import csv
import io
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script: make scripts.simulation_cli importable
# well-exposed photographs only: a dark or saturated scene carries no multiplicative pattern
SCENES = ("camera", "astronaut", "coffee", "chelsea", "rocket", "coins", "immunohistochemistry",
          "grass", "gravel", "brick", "cat", "page")
DEFAULTS = dict(size=512, cameras=4, shots=6, prnu=0.02, gain=0.05, read_noise=2.0,
                quality=90, seed=17)


def _grey(name: str) -> np.ndarray:
    import skimage.data
    from skimage.color import rgb2gray, rgba2rgb
    image = getattr(skimage.data, name)()
    if image.ndim == 3:
        image = rgb2gray(rgba2rgb(image) if image.shape[2] == 4 else image)
        return image * 255.0
    return image.astype(np.float64)


def _crop(image: np.ndarray, size: int, rng) -> np.ndarray:
    """A random size×size window; a smaller photograph is scaled up to fit first."""
    from skimage.transform import resize
    h, w = image.shape
    if min(h, w) < size:
        f = size / min(h, w)
        image = resize(image, (int(np.ceil(h * f)), int(np.ceil(w * f))), preserve_range=True)
        h, w = image.shape
    y, x = rng.integers(0, h - size + 1), rng.integers(0, w - size + 1)
    return image[y:y + size, x:x + size]


def simulate(out_dir: str, size: int, cameras: int, shots: int, prnu: float, gain: float,
             read_noise: float, quality: int, seed: int) -> list[tuple[str, int]]:
    """Write the shots as ``cam<c>_shot<s>.jpg`` and ``truth.csv``; returns (path, camera)."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    os.makedirs(out_dir, exist_ok=True)
    patterns = [rng.normal(0.0, prnu, (size, size)) for _ in range(cameras)]
    scenes = {name: _grey(name) for name in SCENES}
    truth = []
    for c in range(cameras):
        for s in range(shots):
            # no two shots show the same pixels: the k-th shot takes scene k mod n in the
            # (k div n)-th of the 8 orientations (a scene's residual leaks into the noise
            # residual, so identical content would correlate across cameras)
            k = c * shots + s
            scene = scenes[SCENES[k % len(SCENES)]]
            turned = np.rot90(scene, (k // len(SCENES)) % 4)
            if (k // len(SCENES)) % 8 >= 4:
                turned = turned[:, ::-1]
            light = _crop(turned, size, rng)
            signal = light * (1.0 + patterns[c])
            noisy = signal + rng.normal(0.0, 1.0, signal.shape) * np.sqrt(
                gain * np.clip(signal, 0, None) + read_noise ** 2)
            pixels = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
            path = os.path.join(out_dir, f"cam{c}_shot{s}.jpg")
            buf = io.BytesIO()
            Image.fromarray(pixels, mode="L").save(buf, format="JPEG", quality=quality)
            with open(path + ".tmp", "wb") as fh:
                fh.write(buf.getvalue())
            os.replace(path + ".tmp", path)
            truth.append((path, c))
    with open(os.path.join(out_dir, "truth.csv"), "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["file", "camera"])
        writer.writerows((os.path.basename(p), c) for p, c in truth)
    return truth


def main(argv=None) -> int:
    from scripts.simulation_cli import run
    return run(simulate, DEFAULTS, "cameras", __doc__, os.path.abspath(__file__), argv)


if __name__ == "__main__":
    sys.exit(main())
