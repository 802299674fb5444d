"""The harness's items: made from a seed, so the engine's app and the oracle build the same ones
without sharing any code of the engine. Nothing here imports pairflow.

Two kinds of value, each with a compare whose result is exact in float64:
- ``sets``: sorted unique int64 arrays of uneven sizes (1 to ~120 members of a universe of 400);
  a pair's value is their Jaccard index |a & b| / |a | b| (one correctly rounded division).
- ``vectors``: int64 vectors of one width with entries 0..6; a pair's value is their dot product
  (a small integer).

Ties are common in both (small universes, small integers): the top-k's tie rule (the lower
index first) is exercised on every run.
"""
from __future__ import annotations

import os

import numpy as np

WIDTH = 5  # a vector's entries
UNIVERSE = 400  # a set's members are drawn from 0 .. UNIVERSE - 1


def make_items(n: int, kind: str, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "vectors":
        return [rng.integers(0, 7, WIDTH).astype(np.int64) for _ in range(n)]
    out = []
    for _ in range(n):
        size = int(rng.choice([1, 2, 3, 8, 30, 120]))  # uneven: a few large, many small
        out.append(np.unique(rng.integers(0, UNIVERSE, size)).astype(np.int64))
    return out


def write_item_files(items: list[np.ndarray], where: str) -> list[str]:
    """One file per item (its int64 bytes): the ``files`` storage."""
    os.makedirs(where, exist_ok=True)
    paths = []
    for i, item in enumerate(items):
        path = os.path.join(where, f"item{i:04d}.bin")
        with open(path, "wb") as fh:
            fh.write(item.tobytes())
        paths.append(path)
    return paths


def write_record_files(items: list[np.ndarray], where: str, files: int) -> list[str]:
    """Items as records (``name<TAB>comma-separated ints`` lines) in ``files`` text files, in
    item order: the ``records`` storage."""
    os.makedirs(where, exist_ok=True)
    bounds = np.linspace(0, len(items), files + 1).astype(int)
    paths = []
    for f in range(files):
        path = os.path.join(where, f"records{f}.txt")
        with open(path, "w") as fh:
            for i in range(bounds[f], bounds[f + 1]):
                fh.write(f"r{i}\t{','.join(map(str, items[i].tolist()))}\n")
        paths.append(path)
    return paths


def read_record_file(path: str) -> dict[str, np.ndarray]:
    """Every record of one records file, by name."""
    out = {}
    with open(path) as fh:
        for line in fh:
            name, _, values = line.rstrip("\n").partition("\t")
            out[name] = np.array([int(v) for v in values.split(",")], dtype=np.int64)
    return out
