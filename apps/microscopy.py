"""Template-free particle fusion for localisation microscopy: all-pairs registration, then one
consensus particle.

    pairflow app=microscopy                                  # the simulated particles
    pairflow app=microscopy data.inputs='particles/*.csv' microscopy.scale=3

An item is one particle: a CSV file of localisations (``x,y`` in nm, a header line), named by
its file stem; ``parse`` centres it. Items are tiny and pairs are costly (the compute-bound case):
``compare`` registers each pair of a tile (``kernels.registration``: a coarse rotation grid, then
annealed Gaussian-mixture refinement) and gives the fields ``score`` (the mixtures' cosine, in
(0, 1]), ``rotation`` (degrees) and ``tx``, ``ty`` (nm) of the motion taking particle i onto
particle j. The dense sink's upper triangle (i < j) holds these; the lower triangle is its
mirror image (the same numbers, not the inverse motion).

After the run, the best half of the pairs by score (weighted by score) give each particle an
absolute pose by rotation averaging and least squares (``synchronize``), and every particle's
localisations, moved by its pose, make the fused particle: ``result/fused.csv`` (x, y,
particle) and ``result/poses.csv`` (particle, rotation in degrees, tx, ty).

Bad input stops the run before compute: a line that is not two finite numbers (named by line),
fewer than 3 localisations, a missing header.
"""
from __future__ import annotations

import math
import os

import numpy as np

from pairflow.engine import InputError
from pairflow.apps.file_items import FileItemsApp
from pairflow.kernels.registration import center, fuse, register, self_overlap, synchronize

MIN_POINTS = 3


def read_localisations(url: str, raw: bytes) -> np.ndarray:
    """(n, 2) float64 from ``x,y`` CSV text, or an InputError naming the line."""
    lines = raw.decode("utf-8", errors="replace").splitlines()
    if not lines or [c.strip().lower() for c in lines[0].split(",")][:2] != ["x", "y"]:
        raise InputError(url, "the first line must be the header 'x,y' (nm)")
    points = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = line.split(",")
        try:
            x, y = float(fields[0]), float(fields[1])
        except (ValueError, IndexError):
            raise InputError(url, f"{line.strip()[:40]!r} is not two numbers x,y",
                             record=f"line {number}") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(url, "a coordinate is not finite", record=f"line {number}")
        points.append((x, y))
    if len(points) < MIN_POINTS:
        raise InputError(url, f"{len(points)} localisations: a particle needs at least "
                         f"{MIN_POINTS}")
    return np.asarray(points, dtype=np.float64)


class MicroscopyApp(FileItemsApp):
    name = "microscopy"

    def __init__(self, urls: list[str], scale: float = 3.0):
        if not scale > 0:
            raise ValueError(f"scale (the mixtures' σ, nm) must be > 0, got {scale!r}")
        self.scale = float(scale)
        self._index_files(urls, "particles")

    def check(self, key, raw):
        read_localisations(self._url[key], raw)

    def parse(self, key, raw):
        return center(np, read_localisations(self._url[key], raw))

    def warmup(self, device):
        """One registration of two small rings, so that the process's first tile does not load
        the numba kernels (numba's import and cached code, a fixed cost of CPU per process)."""
        angles = np.linspace(0.0, 2 * np.pi, 12, endpoint=False)
        ring = np.stack([40.0 * np.cos(angles), 40.0 * np.sin(angles)], axis=1)
        left, right = (self.preprocess("warmup", center(np, points), device)
                       for points in (ring, ring[::-1] + 1.0))
        self.compare([left], [right], np.ones((1, 1), bool), device)

    def preprocess(self, key, points, device):
        from pairflow.kernels.backend import namespace_for, to_device
        device = "cpu" if device == "host" else device
        xp = namespace_for(device)
        moved = to_device(xp, points, device)
        return moved, self_overlap(xp, moved, self.scale)

    def compare(self, left, right, mask, device):
        from pairflow.kernels.backend import namespace_for
        xp = namespace_for("cpu" if device == "host" else device)
        out = {name: np.full(mask.shape, np.nan) for name in self.fields()}
        for i, j in zip(*np.nonzero(mask)):
            (a, self_a), (b, self_b) = left[i], right[j]
            score, theta, tx, ty = register(xp, a, b, self.scale, self_a, self_b)
            out["score"][i, j], out["rotation"][i, j] = score, math.degrees(theta)
            out["tx"][i, j], out["ty"][i, j] = tx, ty
        return out

    def fields(self):
        return {"score": "float64", "rotation": "float64", "tx": "float64", "ty": "float64"}

    def describe(self):
        return {"app": self.name, "scale": self.scale, "n_inputs": len(self.urls)}

    def fingerprint(self):
        from pairflow.engine import url_digest
        return {"app": self.name, "scale": self.scale,
                "inputs": {u: url_digest(u) for u in self.urls}}


def fuse_run(app: MicroscopyApp, result) -> dict:
    """Poses from the best half of the pairs, and the fused particle, into ``result/``."""
    import fsspec
    import zarr
    group = zarr.open_group(result.outputs["dense"], mode="r")
    keys = list(group.attrs["row_keys"])
    score = group["score"][...]
    n = len(keys)
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    best = upper & (score >= np.median(score[upper])) if n > 2 else upper
    phi, tau = synchronize(np.radians(group["rotation"][...]), group["tx"][...],
                           group["ty"][...], np.where(best, score, 0.0))
    particles = []
    for key in keys:
        with fsspec.open(app.url(key), "rb") as fh:
            particles.append(center(np, read_localisations(app.url(key), fh.read())))
    fused = fuse(particles, phi, tau)
    owner = np.repeat(np.arange(n), [len(p) for p in particles])
    out_dir = os.path.dirname(result.outputs["dense"])
    paths = {"fused": os.path.join(out_dir, "fused.csv"),
             "poses": os.path.join(out_dir, "poses.csv")}
    _write_csv(paths["fused"], "x,y,particle",
               (f"{x:.4f},{y:.4f},{keys[k]}" for (x, y), k in zip(fused, owner)))
    _write_csv(paths["poses"], "particle,rotation_deg,tx,ty",
               (f"{k},{math.degrees(p):.6f},{t[0]:.4f},{t[1]:.4f}"
                for k, p, t in zip(keys, phi, tau)))
    result.outputs.update(paths)
    result.fused = fused
    return paths


def _write_csv(path: str, header: str, rows) -> None:
    with open(path + ".tmp", "w") as fh:
        fh.write(header + "\n")
        fh.writelines(row + "\n" for row in rows)
    os.replace(path + ".tmp", path)


def _sink():
    from pairflow.engine import DenseMatrix
    return DenseMatrix(fields=["score", "rotation", "tx", "ty"],
                       diagonal={"score": 1.0, "rotation": 0.0, "tx": 0.0, "ty": 0.0})


def microscopy(urls, scale: float = 3.0, **options):
    """The Python form of ``pairflow app=microscopy``; ``result.fused`` is the fused cloud."""
    from pairflow.engine import allpairs
    app = MicroscopyApp(list(urls), scale=scale)
    result = allpairs(app=app, sinks=[_sink()], wait=True, **options)
    fuse_run(app, result)
    return result


def build(cfg):
    """The app and its sink from the Hydra config (``app=microscopy``)."""
    from pairflow.apps.data import expand_inputs
    if cfg.sink.get("type", "dense") != "dense":
        raise ValueError(f"app=microscopy needs the dense sink, not sink={cfg.sink.type}: "
                         "fusion reads every pair")
    return (MicroscopyApp(expand_inputs(cfg.data.inputs), scale=float(cfg.microscopy.scale)),
            [_sink()])


def after(app, result, cfg) -> None:
    fuse_run(app, result)


def report(result) -> str:
    s = result.summary
    fused = getattr(result, "fused", None)
    return "\n".join([
        f"app=microscopy n={s['n_items']} particles pairs={s['pairs_total']} "
        f"tiles={s['tiles_total']} leaf={s['leaf_items']}",
        f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s), "
        f"R = {s['R']:.3f} loads/item",
        f"fused particle: {0 if fused is None else len(fused)} localisations",
        *(f"{name}: {path}" for name, path in result.outputs.items())])
