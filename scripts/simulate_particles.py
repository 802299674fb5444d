"""Simulated localisation-microscopy particles for ``app=microscopy``.

    python scripts/simulate_particles.py                     # into .data/particles
    python scripts/simulate_particles.py --out DIR --particles 30

The template is the letter F drawn by binding sites 10 nm apart (no rotational symmetry, so
every relative rotation is defined). Each particle labels each site with probability
``labelling`` (the rest are missing), a labelled site gives Poisson(``blinks``) + 1
localisations, each displaced by Gaussian localisation noise of ``precision`` nm; the particle is
then turned by a uniform random angle and shifted by up to ``shift`` nm. A particle is one CSV
file (``x,y`` in nm); ``truth.csv`` holds each particle's angle (degrees) and shift, the ground
truth of the relative rotations. Everything follows from ``seed``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a script: make scripts.simulation_cli importable
DEFAULTS = dict(particles=40, labelling=0.9, blinks=2.0, precision=2.0, shift=30.0, seed=11)


def template_sites() -> np.ndarray:
    """Binding sites of the letter F, nm: a 160 nm stem, a 100 nm top bar, a 70 nm middle bar."""
    stem = [(0.0, y) for y in np.arange(0, 161, 10)]
    top = [(x, 160.0) for x in np.arange(10, 101, 10)]
    middle = [(x, 80.0) for x in np.arange(10, 71, 10)]
    sites = np.array(stem + top + middle)
    return sites - sites.mean(axis=0)


def simulate(out_dir: str, particles: int, labelling: float, blinks: float, precision: float,
             shift: float, seed: int) -> list[tuple[str, float]]:
    """Write ``particle_NNN.csv`` files and ``truth.csv``; returns (path, angle in degrees)."""
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


def main(argv=None) -> int:
    from scripts.simulation_cli import run
    return run(simulate, DEFAULTS, "particles", __doc__, os.path.abspath(__file__), argv)


if __name__ == "__main__":
    sys.exit(main())
