"""Common-source camera identification by sensor noise (PRNU), all pairs, then clusters.

    pairflow app=forensics                                   # the example shots (data install)
    pairflow app=forensics data.inputs='photos/*.jpg' forensics.threshold=60

An item is one photograph (any format Pillow reads; colour is converted to grey), named by its
file stem. ``parse`` computes its noise residual (``kernels.prnu``: Haar-wavelet Wiener
denoising, zero-mean rows and columns, Wiener filtering in the Fourier domain), a float image as
large as the photo, which the host tier shares; ``preprocess`` centres it, scales it to unit norm
and keeps half its spectrum on the device; ``compare`` gives a tile's NCC and PCE by matrix
products over those spectra (``kernels.prnu.ncc_pce``). Both matrices go to the dense sink
(fields ``ncc`` and ``pce``).
After the run, average-linkage clustering on PCE (clusters merge while the mean PCE between
them is at least ``threshold``) labels each photo with a camera: ``result/clusters.csv``.

Photos must share one size (a sensor pattern is compared pixel for pixel); sides are cropped to
the centre's largest multiple of 16 (the wavelet's 4 levels). A file that is not an image, or
one of another size, stops the run before compute with the file named.
"""
from __future__ import annotations

import io
import os

import numpy as np

from pairflow.engine import InputError
from pairflow.apps.file_items import FileItemsApp
from pairflow.kernels.prnu import ncc_pce, noise_residual, prepare

LEVELS = 4  # wavelet levels: sides are cropped to a multiple of 2**LEVELS


def _image_size(url: str) -> tuple[int, int]:
    import fsspec
    from PIL import Image
    try:
        with fsspec.open(url, "rb") as fh, Image.open(fh) as im:
            return im.size[1], im.size[0]
    except (OSError, ValueError) as exc:
        raise InputError(url, f"cannot be read as an image ({exc})") from None


def _grey(url: str, raw: bytes) -> np.ndarray:
    from PIL import Image
    try:
        with Image.open(io.BytesIO(raw)) as im:
            return np.asarray(im.convert("L"), dtype=np.float64)
    except (OSError, ValueError) as exc:
        raise InputError(url, f"cannot be decoded as an image ({exc})") from None


class ForensicsApp(FileItemsApp):
    name = "forensics"

    def __init__(self, urls: list[str], sigma: float = 3.0, threshold: float = 30.0):
        if not sigma > 0:
            raise ValueError(f"sigma (the denoiser's noise level) must be > 0, got {sigma!r}")
        self.sigma, self.threshold = float(sigma), float(threshold)
        self._index_files(urls, "images")
        first = self.urls[0]
        self.shape = _image_size(first)
        for url in self.urls[1:]:  # headers only: no pixel is decoded here
            if _image_size(url) != self.shape:
                h, w = _image_size(url)
                raise InputError(url, f"image is {h}x{w} but {first} is "
                                 f"{self.shape[0]}x{self.shape[1]}: a sensor pattern is "
                                 f"compared pixel for pixel, so all photos share one size")
        step = 1 << LEVELS
        if min(self.shape) < 4 * step:
            raise InputError(first, f"image is {self.shape[0]}x{self.shape[1]}, too small for "
                             f"a noise residual (at least {4 * step} pixels a side)")
        self.crop = (self.shape[0] // step * step, self.shape[1] // step * step)

    def check(self, key, raw):
        grey = _grey(self._url[key], raw)
        if grey.shape != self.shape:
            raise InputError(self._url[key], f"decodes to {grey.shape[0]}x{grey.shape[1]}, "
                             f"its header said {self.shape[0]}x{self.shape[1]}")

    def warmup(self, device):
        """In a process that parses (``host``), one residual of a small image, so that the first
        load does not load the compiled Wiener loop (``kernels.prnu.wave_noise``: numba's import
        and its cached code, a fixed cost of CPU in a fresh process)."""
        if device == "host":
            noise_residual(np, np.random.default_rng(0).normal(128.0, 20.0, (64, 64)),
                           sigma=self.sigma, levels=LEVELS)

    def parse(self, key, raw):
        grey = _grey(self._url[key], raw)
        top = (grey.shape[0] - self.crop[0]) // 2
        left = (grey.shape[1] - self.crop[1]) // 2
        grey = grey[top:top + self.crop[0], left:left + self.crop[1]]
        return noise_residual(np, grey, sigma=self.sigma, levels=LEVELS)

    def preprocess(self, key, residual, device):
        from pairflow.kernels.backend import namespace_for, to_device
        device = "cpu" if device == "host" else device
        xp = namespace_for(device)
        return prepare(xp, to_device(xp, residual, device))

    def compare(self, left, right, mask, device):
        from pairflow.kernels.backend import namespace_for, to_numpy
        xp = namespace_for("cpu" if device == "host" else device)
        ncc, pce = ncc_pce(xp, left, right, self.crop[1], mask=mask)
        return {"ncc": np.where(mask, to_numpy(ncc), np.nan),
                "pce": np.where(mask, to_numpy(pce), np.nan)}

    def fields(self):
        return {"ncc": "float64", "pce": "float64"}

    def describe(self):
        return {"app": self.name, "sigma": self.sigma, "threshold": self.threshold,
                "n_inputs": len(self.urls), "crop": list(self.crop)}

    def fingerprint(self):
        from pairflow.engine import url_digest
        return {"app": self.name, "sigma": self.sigma, "crop": list(self.crop),
                "inputs": {u: url_digest(u) for u in self.urls}}


def cluster_by_pce(pce: np.ndarray, threshold: float) -> np.ndarray:
    """Camera labels 0.. by average linkage: clusters merge while the mean PCE between them is
    at least ``threshold``."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform
    n = pce.shape[0]
    if n == 1:
        return np.zeros(1, dtype=int)
    off = ~np.eye(n, dtype=bool)
    top = max(float(np.max(pce[off])), threshold)
    distance = np.where(off, top - pce, 0.0)  # the diagonal holds no PCE (NaN)
    labels = fcluster(linkage(squareform(distance, checks=False), "average"),
                      t=top - threshold, criterion="distance")
    _, first = np.unique(labels, return_index=True)  # number clusters by first appearance
    order = {lab: i for i, lab in enumerate(labels[np.sort(first)])}
    return np.array([order[lab] for lab in labels])


def write_clusters(result, threshold: float) -> str:
    """``result/clusters.csv`` (file stem, camera label) from a finished run's PCE matrix."""
    import zarr
    group = zarr.open_group(result.outputs["dense"], mode="r")
    labels = cluster_by_pce(group["pce"][...], threshold)
    path = os.path.join(os.path.dirname(result.outputs["dense"]), "clusters.csv")
    with open(path + ".tmp", "w") as fh:
        fh.write("image,camera\n")
        fh.writelines(f"{key},{lab}\n" for key, lab in zip(group.attrs["row_keys"], labels))
    os.replace(path + ".tmp", path)
    result.outputs["clusters"] = path
    result.labels = labels
    return path


def _sink():
    from pairflow.engine import DenseMatrix
    return DenseMatrix(fields=["ncc", "pce"], diagonal={"ncc": 1.0})


def forensics(urls, sigma: float = 3.0, threshold: float = 30.0, **options):
    """The Python form of ``pairflow app=forensics``; ``result.labels`` are the cameras."""
    from pairflow.engine import allpairs
    app = ForensicsApp(list(urls), sigma=sigma, threshold=threshold)
    result = allpairs(app=app, sinks=[_sink()], wait=True, **options)
    write_clusters(result, app.threshold)
    return result


def build(cfg):
    """The app and its sink from the Hydra config (``app=forensics``)."""
    from pairflow.apps.data import expand_inputs
    if cfg.sink.get("type", "dense") != "dense":
        raise ValueError(f"app=forensics needs the dense sink, not sink={cfg.sink.type}: "
                         "clustering reads every PCE")
    urls = expand_inputs(cfg.data.inputs)
    f = cfg.forensics
    return ForensicsApp(urls, sigma=float(f.sigma), threshold=float(f.threshold)), [_sink()]


def after(app, result, cfg) -> None:
    write_clusters(result, app.threshold)


def report(result) -> str:
    s = result.summary
    labels = getattr(result, "labels", None)
    sizes = np.bincount(labels).tolist() if labels is not None else []
    return "\n".join([
        f"app=forensics n={s['n_items']} images pairs={s['pairs_total']} "
        f"tiles={s['tiles_total']} leaf={s['leaf_items']}",
        f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s), "
        f"R = {s['R']:.3f} loads/item",
        f"cameras found: {len(sizes)} (photos per camera {sizes})",
        *(f"{name}: {path}" for name, path in result.outputs.items())])
