"""Rocket's three applications on pairflow: system efficiency and R per app, next to Rocket's.

    .venv/bin/python benchmarks/apps.py              # the real sizes (minutes, a quiet machine)
    .venv/bin/python benchmarks/apps.py --quick      # tiny sizes: checks that it runs
    .venv/bin/python benchmarks/apps.py --apps phylogeny,microscopy

For each app, as ``benchmarks/allpairs.py`` part (a) defines it: system efficiency
T_min / (p · T), with T_min = Σ_items (t_parse + t_pre) + pairs · t_cmp from stage times
measured in this process (every item parsed and preprocessed once; t_cmp the mean per pair of a
4 × 4 tile of different items, the best of two), p the run's device actors and T the engine's
compute phase (Ray start-up and actor spawn excluded). R = item loads / n with a host tier
holding 25 % of the items, every item in the object store (none handed over by value). Rocket's published single-node efficiencies are printed beside:
microscopy 99.2 %, forensics 94.6 %, bioinformatics (phylogeny) 88.5 %. For phylogeny, the wall
time of the dense brute-force reference (every 20^k component, numpy) on the same proteomes.

Results go to benchmarks/out/apps.json; absolute times on a shared machine are noise.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np  # noqa: E402

ROCKET = {"microscopy": 0.992, "forensics": 0.946, "phylogeny": 0.885}
DATA = os.environ.get("PAIRFLOW_DATA") or os.path.join(ROOT, ".data")
# (quick, full) problem sizes; full aims at >= 20 s of compute on 2 cores
SIZES = {"phylogeny": ({"proteomes": 4, "k": 4}, {"proteomes": 16, "k": 5}),
         "forensics": ({"size": 256, "cameras": 2, "shots": 4},
                       {"size": 512, "cameras": 4, "shots": 12}),
         "microscopy": ({"particles": 8}, {"particles": 80})}


def _raw(url: str) -> bytes:
    with open(url, "rb") as fh:
        return fh.read()


def stage_times(app) -> tuple[float, float, int]:
    """(Σ parse + preprocess over every item, mean compare seconds per pair, pairs)."""
    keys = list(app.keys())
    items, t_items = {}, 0.0
    for key in keys:
        raw = _raw(app.url(key))
        t0 = time.perf_counter()
        items[key] = app.preprocess(key, app.parse(key, raw), "cpu")
        t_items += time.perf_counter() - t0
    side = min(4, len(keys) // 2)
    left, right = [items[k] for k in keys[:side]], [items[k] for k in keys[side:2 * side]]
    mask = np.ones((side, side), bool)
    best = min(_timed(lambda: app.compare(left, right, mask, "cpu")) for _ in range(2))
    n = len(keys)
    return t_items, best / (side * side), n * (n - 1) // 2


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def build(name: str, size: dict, work: str):
    """(app, sinks, after) of one app at one problem size, data made or found as needed."""
    if name == "phylogeny":
        from apps import phylogeny as mod
        paths = sorted(glob.glob(os.path.join(DATA, "proteomes", "*", "*.faa")))
        # smallest proteomes first in quick mode: the check is that it runs
        paths = sorted(paths, key=os.path.getsize)[:size["proteomes"]]
        return mod.PhylogenyApp(paths, k=size["k"]), [mod._sink()], mod.write_tree
    if name == "forensics":
        from apps import forensics as mod
        from scripts.simulate_cameras import DEFAULTS, simulate
        shots = simulate(os.path.join(work, "cameras"), **{**DEFAULTS, **size})
        app = mod.ForensicsApp([p for p, _ in shots])
        return app, [mod._sink()], lambda result: mod.write_clusters(result, app.threshold)
    from apps import microscopy as mod
    from scripts.simulate_particles import DEFAULTS, simulate
    parts = simulate(os.path.join(work, "particles"), **{**DEFAULTS, **size})
    app = mod.MicroscopyApp([p for p, _ in parts])
    return app, [mod._sink()], lambda result: mod.fuse_run(app, result)


def phylogeny_reference_s(app) -> float:
    """Wall time of the dense brute-force distances (tests/unit/cvtree_oracle.py)."""
    from tests.unit.cvtree_oracle import dense_distances, dense_vector, read_proteins
    t0 = time.perf_counter()
    dense_distances([dense_vector(read_proteins(app.url(k)), app.k) for k in app.keys()])
    return time.perf_counter() - t0


def bench(name: str, quick: bool, runs_root: str, work: str) -> dict:
    from engine import allpairs
    app, sinks, after = build(name, SIZES[name][0 if quick else 1], work)
    t_items, t_pair, pairs = stage_times(app)
    t_min = t_items + pairs * t_pair
    n = len(app.keys())
    # items travel by reference (inline_item_bytes=0): the engine's host tier, when smaller than
    # the items of the tiles under way, handed an evicted small (by-value) item over as its
    # load task's info list (reported to the engine's developers)
    host = max(2, n // 4)
    result = allpairs(app=app, sinks=sinks, runs_root=runs_root, progress=False, wait=True,
                      host_cache_items=host, inline_item_bytes=0)
    after(result)
    s = result.summary
    p, compute = s["n_actors"], s["compute_s"]
    row = {"n": n, "pairs": pairs, "t_items_s": t_items, "t_pair_s": t_pair, "T_min": t_min,
           "p": p, "T": compute, "efficiency": t_min / (p * compute), "R": s["R"],
           "host_cache_items": host, "wall_s": s["wall_s"],
           "rocket_efficiency": ROCKET[name], "leaf": s["leaf_items"],
           "run_dir": result.run_dir}
    if name == "phylogeny":
        row["bruteforce_reference_s"] = phylogeny_reference_s(app)
    line = (f"{name:11s} n={n:3d} pairs={pairs:5d} T_min={t_min:7.2f}s p={p} "
            f"T={compute:7.2f}s efficiency={row['efficiency']:.3f} (Rocket {ROCKET[name]:.3f}) "
            f"R={s['R']:.2f} (host tier {row['host_cache_items']} of {n} items)")
    if "bruteforce_reference_s" in row:
        line += (f"\n            wall {s['wall_s']:.2f}s (compute {compute:.2f}s) against the "
                 f"dense brute-force reference {row['bruteforce_reference_s']:.2f}s")
    print(line, flush=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--apps", default="phylogeny,forensics,microscopy")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args(argv)
    from engine.run.runtime import init_ray
    init_ray(num_cpus=args.num_cpus, object_store_mb=1536)
    out = {"quick": args.quick, "apps": {}}
    with tempfile.TemporaryDirectory(prefix="pairflow-apps-") as work:
        for name in args.apps.split(","):
            out["apps"][name] = bench(name.strip(), args.quick, os.path.join(work, "runs"),
                                      work)
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    path = os.path.join(ROOT, "benchmarks", "out", "apps.json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"written {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
