"""The example data sets pairflow derives, deterministically, for its apps' default runs.

* ``proteomes/<Species>/<strain>.faa`` (``app=phylogeny``): the 16 ragout genomes' proteins,
  predicted with pyrodigal;
* ``cameras/`` (``app=forensics``): shots of simulated cameras made from scikit-image's
  photographs;
* ``particles/`` (``app=microscopy``): simulated localisation-microscopy particles.

They live in the package, not in scripts, so that ``pairflow data install`` (an installed
pairflow, anywhere) can make them. Each folder has a ``.stamp`` of what made it (parameters,
and the recipe: the source of the functions that make it, or pyrodigal's version and the
genomes): a second call with the same stamp does nothing, a changed recipe makes the set again.
Everything follows from fixed seeds: the same stamp gives the same bytes.
"""
from __future__ import annotations

import csv
import glob
import hashlib
import inspect
import io
import json
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np

GENOMES = "usr/share/doc/ragout/examples/*/references/*.fasta.gz"
# well-exposed photographs only: a dark or saturated scene carries no multiplicative pattern
SCENES = ("camera", "astronaut", "coffee", "chelsea", "rocket", "coins", "immunohistochemistry",
          "grass", "gravel", "brick", "cat", "page")
CAMERAS = dict(size=512, cameras=4, shots=6, prnu=0.02, gain=0.05, read_noise=2.0,
               quality=90, seed=17)
PARTICLES = dict(particles=40, labelling=0.9, blinks=2.0, precision=2.0, shift=30.0, seed=11)


def _read_stamp(path: str):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _write_stamp(path: str, value) -> None:
    with open(path + ".tmp", "w") as fh:
        json.dump(value, fh, indent=1)
    os.replace(path + ".tmp", path)


# --------------------------------------------------------------------------- proteomes

def _predict_one(genome: str, out_path: str) -> tuple[str, int]:
    import gzip

    import pyrodigal
    from Bio import SeqIO
    with gzip.open(genome, "rt") as fh:
        records = [(r.id, bytes(r.seq)) for r in SeqIO.parse(fh, "fasta")]
    finder = pyrodigal.GeneFinder(meta=False)
    finder.train(*[seq for _, seq in records])
    tmp = out_path + ".tmp"
    n_genes = 0
    with open(tmp, "w") as out:
        for name, seq in records:
            for i, gene in enumerate(finder.find_genes(seq), 1):
                protein = gene.translate(include_stop=False)
                out.write(f">{name}_{i}\n")
                for p in range(0, len(protein), 80):
                    out.write(protein[p:p + 80] + "\n")
                n_genes += 1
    os.replace(tmp, out_path)
    return out_path, n_genes


def predict_proteomes(data_dir: str, force: bool = False, workers: int | None = None,
                      log=None) -> tuple[str, bool]:
    """Write the proteomes under ``data_dir/proteomes`` unless its stamp is current; returns
    that folder and whether it was made now.

    Prodigal's single-genome mode trains on the genome itself and is deterministic: the same
    genomes and the same pyrodigal version give the same proteins byte for byte. A genome of
    several records (V. cholerae has two chromosomes) is trained on all of them at once and gives
    one proteome; ``>record_n`` headers, no stop ``*``; the species is the folder, so a test
    knows which clade a proteome belongs to. One process per core."""
    import pyrodigal
    genomes = sorted(glob.glob(os.path.join(data_dir, "root", GENOMES)))
    if len(genomes) != 16:
        raise FileNotFoundError(f"expected the 16 ragout genomes under {data_dir}/root (found "
                                f"{len(genomes)}): the Debian package ragout-examples first")
    out_dir = os.path.join(data_dir, "proteomes")
    stamp_path = os.path.join(out_dir, ".stamp")
    want = {"pyrodigal": pyrodigal.__version__,
            "genomes": {os.path.relpath(g, data_dir): os.path.getsize(g) for g in genomes}}
    if not force and _read_stamp(stamp_path) == want:
        return out_dir, False
    jobs = []
    for genome in genomes:
        species = os.path.basename(os.path.dirname(os.path.dirname(genome)))
        strain = os.path.basename(genome).removesuffix(".fasta.gz")
        os.makedirs(os.path.join(out_dir, species), exist_ok=True)
        jobs.append((genome, os.path.join(out_dir, species, f"{strain}.faa")))
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for path, n_genes in pool.map(_predict_one, *zip(*jobs)):
            if log:
                log(f"proteomes: {os.path.relpath(path, data_dir)}: {n_genes} proteins")
    _write_stamp(stamp_path, want)
    return out_dir, True


# --------------------------------------------------------------------------- cameras

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


def simulate_cameras(out_dir: str, size: int, cameras: int, shots: int, prnu: float,
                     gain: float, read_noise: float, quality: int,
                     seed: int) -> list[tuple[str, int]]:
    """Write the shots as ``cam<c>_shot<s>.jpg`` and ``truth.csv``; returns (path, camera).

    Each camera has a fixed sensor pattern K (Gaussian, standard deviation ``prnu``) that
    multiplies the light of every shot it takes; a shot is a ``size``×``size`` grey crop of one
    of the bundled photographs (no two alike: scene and orientation differ), times (1 + K), plus
    shot noise (Gaussian, variance ``gain``·I, i.e. Poisson-like) and read noise (σ =
    ``read_noise`` grey levels), rounded to 8 bits and saved as JPEG of quality ``quality``:
    the documented noise and quality at which the tests ask clustering to recover the cameras.
    ``truth.csv`` maps each file to its camera."""
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


# --------------------------------------------------------------------------- particles

def template_sites() -> np.ndarray:
    """Binding sites of the letter F, nm: a 160 nm stem, a 100 nm top bar, a 70 nm middle bar
    (no rotational symmetry, so every relative rotation is defined)."""
    stem = [(0.0, y) for y in np.arange(0, 161, 10)]
    top = [(x, 160.0) for x in np.arange(10, 101, 10)]
    middle = [(x, 80.0) for x in np.arange(10, 71, 10)]
    sites = np.array(stem + top + middle)
    return sites - sites.mean(axis=0)


def simulate_particles(out_dir: str, particles: int, labelling: float, blinks: float,
                       precision: float, shift: float, seed: int) -> list[tuple[str, float]]:
    """Write ``particle_NNN.csv`` files and ``truth.csv``; returns (path, angle in degrees).

    Each particle labels each site of ``template_sites`` with probability ``labelling``, a
    labelled site gives Poisson(``blinks``) + 1 localisations, each displaced by Gaussian
    localisation noise of ``precision`` nm; the particle is then turned by a uniform random
    angle and shifted by up to ``shift`` nm. A particle is one CSV file (``x,y`` in nm);
    ``truth.csv`` holds each particle's angle (degrees) and shift."""
    rng = np.random.default_rng(seed)
    sites = template_sites()
    os.makedirs(out_dir, exist_ok=True)
    truth = []
    for p in range(particles):
        kept = sites[rng.random(len(sites)) < labelling]
        counts = rng.poisson(blinks, len(kept)) + 1
        points = np.repeat(kept, counts, axis=0)
        points = points + rng.normal(0, precision, points.shape)
        angle = rng.uniform(0, 360)
        t = np.radians(angle)
        rot = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]])
        offset = rng.uniform(-shift, shift, 2)
        points = points @ rot.T + offset
        path = os.path.join(out_dir, f"particle_{p:03d}.csv")
        with open(path + ".tmp", "w") as fh:
            fh.write("x,y\n")
            fh.writelines(f"{x:.3f},{y:.3f}\n" for x, y in points)
        os.replace(path + ".tmp", path)
        truth.append((path, angle, offset[0], offset[1]))
    with open(os.path.join(out_dir, "truth.csv"), "w") as fh:
        fh.write("particle,angle_deg,shift_x,shift_y\n")
        fh.writelines(f"{os.path.basename(p)[:-4]},{a:.6f},{x:.3f},{y:.3f}\n"
                      for p, a, x, y in truth)
    return [(p, a) for p, a, _, _ in truth]


# --------------------------------------------------------------------------- the sets

# name -> (the simulation, its defaults, what its recipe is made of); the extra each set needs
# is pairflow.apps.extras.DATASET_EXTRAS'
SIMULATED = {
    "cameras": (simulate_cameras, CAMERAS, (SCENES, _grey, _crop, simulate_cameras)),
    "particles": (simulate_particles, PARTICLES, (template_sites, simulate_particles)),
}


def recipe_sha256(parts) -> str:
    """The recipe's fingerprint: the source of its functions and the value of its constants."""
    text = "\n".join(inspect.getsource(p) if callable(p) else repr(p) for p in parts)
    return hashlib.sha256(text.encode()).hexdigest()


def simulate(name: str, out_dir: str, force: bool = False, **params) -> tuple[str, bool]:
    """Make the simulated set ``name`` in ``out_dir`` unless its stamp matches the parameters
    (the defaults, updated by ``params``) and the recipe; returns the folder and whether it was
    made now."""
    make, defaults, recipe = SIMULATED[name]
    unknown = set(params) - set(defaults)
    if unknown:
        raise TypeError(f"{name}: unknown parameters {sorted(unknown)}; known: {sorted(defaults)}")
    values = {**defaults, **params}
    want = {**values, "recipe_sha256": recipe_sha256(recipe)}
    stamp = os.path.join(out_dir, ".stamp")
    if not force and _read_stamp(stamp) == want:
        return out_dir, False
    make(out_dir, **values)
    _write_stamp(stamp, want)
    return out_dir, True


def make(name: str, data_dir: str, force: bool = False, log=None) -> tuple[str, bool]:
    """The derived set ``name`` in ``data_dir`` (default parameters): its folder, and whether
    it was made now."""
    if name == "proteomes":
        return predict_proteomes(data_dir, force=force, log=log)
    return simulate(name, os.path.join(data_dir, name), force=force)
