"""All-pairs peers, side by side in one run: what a user would otherwise write for the same job.

    .venv/bin/python benchmarks/peers.py            # the 16 ragout genomes (~2-3 minutes)
    .venv/bin/python benchmarks/peers.py --quick    # the 4 V. cholerae genomes: proves it runs

The job: exact k-mer Jaccard (k = 21) of every pair of genomes, every contender calling the
same stages of ``apps.jaccard.JaccardApp`` (parse: canonical k-mer set of a genome; compare: the
merge-intersection kernel), on the machine's 2 cores, with the matrix checked equal to pairflow's:

* pairflow: ``allpairs`` with a dense sink (Ray already running; its start is excluded, the
  actors' start is not);
* one Ray task per pair, no cache (each task parses both genomes: 2 x pairs parses);
* ``dask.bag``: ``from_sequence(keys).map(load)``, ``product`` with itself, the pairs i < j
  compared; the processes scheduler (dask.bag's default), 2 workers;
* ``dask.array``, blockwise: an index array in 4 chunks, ``da.blockwise`` over (i, j) blocks,
  each block loading its rows' and columns' genomes and comparing them (blocks below the
  diagonal skipped); the threaded scheduler (dask.array's default), 2 workers;
* ``multiprocessing`` with every item in memory: a pool of 2 parses every genome once, then a
  forked pool of 2 compares rows of pairs against items held in memory. No reuse is needed
  because nothing is evicted: this is the machine's no-reuse limit for the job (R = 1, no
  scheduling beyond rows), which a system with a cache can approach but not pass.

Times are wall seconds from nothing loaded to the full matrix. pairflow's also include its
probe and start-up; the pool start of multiprocessing and dask is included for them. Results go
to benchmarks/out/peers.json.
"""
from __future__ import annotations

import argparse
import glob
import multiprocessing
import os
import sys
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np  # noqa: E402

from _record import out_path, target, write  # noqa: E402

K = 21
APP = None      # the JaccardApp of this process (set by _app)
ITEMS = None    # multiprocessing: every item, inherited by the forked compare workers


def genomes(quick: bool) -> list[str]:
    from pairflow.apps.data import data_path
    group = "V.Cholerae" if quick else "*"
    paths = sorted(glob.glob(data_path("usr/share/doc/ragout/examples") +
                             f"/{group}/references/*.fasta.gz"))
    want = 4 if quick else 16
    if len(paths) != want:
        raise SystemExit(f"expected {want} ragout genomes, found {len(paths)}: run setup")
    return paths


def _app(paths):
    global APP
    if APP is None:
        from pairflow.apps.jaccard import JaccardApp
        APP = JaccardApp(paths, k=K, kernel="merge")
    return APP


def load(paths, key):
    """One genome's k-mer set, through the app's own stages."""
    from pairflow.engine import fetch
    app = _app(paths)
    return app.preprocess(key, app.parse(key, fetch(app.url(key))), "cpu")


def compare_one(paths, a, b) -> float:
    return float(_app(paths).compare([a], [b], np.ones((1, 1), bool), "cpu")["similarity"][0, 0])


def compare_block(paths, rows, cols) -> np.ndarray:
    mask = np.ones((len(rows), len(cols)), bool)
    return np.asarray(_app(paths).compare(rows, cols, mask, "cpu")["similarity"], float)


# ---- multiprocessing, every item in memory ------------------------------------------------

def _load_indexed(args):
    paths, key = args
    return load(paths, key)


def _row(args):
    paths, i = args
    n = len(ITEMS)
    if i + 1 >= n:
        return i, np.zeros(0)
    return i, compare_block(paths, [ITEMS[i]], ITEMS[i + 1:])[0]


def multiprocessing_in_memory(paths, keys) -> tuple[float, np.ndarray, dict]:
    global ITEMS
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        ITEMS = pool.map(_load_indexed, [(paths, k) for k in keys], chunksize=1)
    t_load = time.perf_counter() - t0
    n = len(keys)
    m = np.eye(n)
    # rows in an order that deals long and short rows alike to both workers
    order = [i for pair in zip(range(n), reversed(range(n))) for i in pair][:n]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        for i, row in pool.imap_unordered(_row, [(paths, i) for i in dict.fromkeys(order)]):
            m[i, i + 1:] = row
    t = time.perf_counter() - t0
    ITEMS = None
    return t, m, {"load_s": t_load, "compare_s": t - t_load}


# ---- dask ---------------------------------------------------------------------------------

def dask_bag(paths, keys) -> tuple[float, np.ndarray, dict]:
    import dask.bag as db
    n = len(keys)
    idx = {k: i for i, k in enumerate(keys)}
    t0 = time.perf_counter()
    items = db.from_sequence(keys, npartitions=min(4, n)).map(lambda k: (idx[k], load(paths, k)))
    pairs = items.product(items).filter(lambda ab: ab[0][0] < ab[1][0])
    out = pairs.map(lambda ab: (ab[0][0], ab[1][0], compare_one(paths, ab[0][1], ab[1][1])))
    got = out.compute(scheduler="processes", num_workers=2)
    t = time.perf_counter() - t0
    m = np.eye(n)
    for i, j, v in got:
        m[i, j] = v
    return t, m, {"partitions": min(4, n), "scheduler": "processes"}


def dask_array_blockwise(paths, keys, chunks: int = 4) -> tuple[float, np.ndarray, dict]:
    import dask
    import dask.array as da
    n = len(keys)
    size = -(-n // chunks)

    def block(rows, cols):
        if rows[0] > cols[-1]:  # below the diagonal: the matrix is symmetric
            return np.full((len(rows), len(cols)), np.nan)
        left = [load(paths, keys[i]) for i in rows]
        right = [load(paths, keys[j]) for j in cols]
        return compare_block(paths, left, right)

    t0 = time.perf_counter()
    index = da.arange(n, chunks=size)
    m = da.blockwise(block, "ij", index, "i", index, "j", dtype=float)
    with dask.config.set(scheduler="threads", num_workers=2):
        m = m.compute()
    t = time.perf_counter() - t0
    m = np.triu(np.nan_to_num(m), 1)
    m = m + np.eye(n)
    blocks = -(-n // size)
    loads = sum((min(n, (a + 1) * size) - a * size) + (min(n, (b + 1) * size) - b * size)
                for a in range(blocks) for b in range(a, blocks))
    return t, m, {"chunk": size, "scheduler": "threads", "R": loads / n}


# ---- Ray ----------------------------------------------------------------------------------

def ray_task_per_pair(paths, keys) -> tuple[float, np.ndarray, dict]:
    import ray

    @ray.remote(num_cpus=1)
    def pair(i, j):
        return i, j, compare_one(paths, load(paths, keys[i]), load(paths, keys[j]))

    n = len(keys)
    t0 = time.perf_counter()
    got = ray.get([pair.remote(i, j) for i in range(n) for j in range(i + 1, n)])
    t = time.perf_counter() - t0
    m = np.eye(n)
    for i, j, v in got:
        m[i, j] = v
    return t, m, {"R": 2 * len(got) / n}


def pairflow(paths, keys, runs_root) -> tuple[float, np.ndarray, dict]:
    from pairflow.engine import DenseMatrix, allpairs
    from pairflow.apps.jaccard import JaccardApp
    t0 = time.perf_counter()
    app = JaccardApp(paths, k=K, kernel="merge")
    res = allpairs(app=app, sinks=[DenseMatrix(diagonal={"similarity": 1.0})],
                   runs_root=runs_root, progress=False, wait=True)
    t = time.perf_counter() - t0
    s = res.summary
    order = [list(app.keys()).index(k) for k in keys]
    m = np.asarray(res.matrix("similarity"))[np.ix_(order, order)]
    return t, np.triu(m), {"compute_s": s["compute_s"], "R": s["R"], "leaf": s["leaf_items"],
                           "tiles": s["tiles_total"],
                           "startup_s": s["phases"].get("startup_s"),
                           "executor": s.get("executor")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the 4 V. cholerae genomes")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/peers.json")
    args = ap.parse_args(argv)
    started = time.time()
    paths = genomes(args.quick)
    keys = list(_app(paths).keys())
    n = len(keys)
    results = {"quick": args.quick, "n": n, "pairs": n * (n - 1) // 2, "k": K,
               "kernel": "merge", "peers": {}}
    # the process-forking peers first, before this process starts Ray's threads
    contenders = [("multiprocessing, every item in memory", multiprocessing_in_memory),
                  ("dask.bag product", dask_bag),
                  ("dask.array blockwise", dask_array_blockwise)]
    mats = {}
    for name, fn in contenders:
        t, m, info = fn(paths, keys)
        mats[name] = m
        results["peers"][name] = {"wall_s": t, **info}
        print(f"{name:40s} {t:7.2f} s", flush=True)
    from pairflow.engine.run.runtime import init_ray
    t0 = time.time()
    init_ray(num_cpus=2, object_store_mb=2048)
    results["ray_init_s"] = time.time() - t0
    with tempfile.TemporaryDirectory(prefix="pairflow-peers-") as runs_root:
        for name, fn in (("one Ray task per pair", ray_task_per_pair),
                         ("pairflow", lambda p, k: pairflow(p, k, runs_root))):
            t, m, info = fn(paths, keys)
            mats[name] = m
            results["peers"][name] = {"wall_s": t, **info}
            print(f"{name:40s} {t:7.2f} s", flush=True)
    ref = np.triu(mats["pairflow"], 1)
    ours = results["peers"]["pairflow"]["wall_s"]
    limit = results["peers"]["multiprocessing, every item in memory"]["wall_s"]
    for name, row in results["peers"].items():
        row["max_abs_diff_vs_pairflow"] = float(np.max(np.abs(np.triu(mats[name], 1) - ref)))
        row["pairflow_speedup"] = row["wall_s"] / ours
    results["pairflow_of_no_reuse_limit"] = limit / ours
    print(f"pairflow runs at {limit / ours:.2f} of the no-reuse limit (multiprocessing, every "
          f"item in memory); " + ", ".join(
              f"{k}: x{v['pairflow_speedup']:.2f}" for k, v in results["peers"].items()
              if k != "pairflow"), flush=True)
    goals = [target(f"same matrix as pairflow: {name}", row["max_abs_diff_vs_pairflow"], "<=",
                    1e-12) for name, row in results["peers"].items() if name != "pairflow"]
    write(out_path("peers.json", args.out), results, "peers", targets=goals, quick=args.quick,
          started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
