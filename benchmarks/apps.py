"""Rocket's three applications on pairflow: system efficiency and R per app, next to Rocket's.

    .venv/bin/python benchmarks/apps.py              # the real sizes (minutes, a quiet machine)
    .venv/bin/python benchmarks/apps.py --quick      # tiny sizes: checks that it runs
    .venv/bin/python benchmarks/apps.py --apps phylogeny,microscopy

For each app, as ``benchmarks/allpairs.py`` part (a) defines it: system efficiency
T_min / (p · T), with T_min = Σ_items (t_parse + t_pre) + pairs · t_cmp from stage times
measured in this process (every item parsed and preprocessed once, every pair compared once,
on one thread, in tiles of the run's own leaf or of 26 x 26 items, whichever is larger), p the
run's device actors and T the engine's compute phase (Ray start-up and actor spawn excluded).
This VM's speed drifts by 10-15 % within a minute, so the engine runs ``REPEATS`` times with
T_min measured after each: a run's efficiency uses the mean of the T_min measured just before
it (after the run before) and just after it, both in tiles of its side (else the one after it
alone), and the app's figure is the median run's (every run's is printed and kept). The CPU
of the two cores over the median run's T is split by who spent it (``cpu_meter.CpuMeter``).
Beside it, the same as a fraction of the two-process limit: two plain processes comparing
tiles (of 26 items where the items allow) side by side, no Ray, give what two busy cores of
this machine do against 2 × one alone (``benchmarks/align.py`` measures the same); and of the
mix limit, where each of the two also parses items in the app's own proportion to its
compares (``mix_parses``: every item once for n (n - 1) / 2 pairs), as the engine's loaders
and device actors together do: for a data-bound app the compares-only limit leaves out what a
parse beside a parse or a compare costs.
Every stage time is one core's: BLAS gets one thread here, as in each device actor, and the
allocator keeps freed memory (``engine.run.runtime.keep_freed_memory``) here and in the two
plain processes, as in every process of the engine's.

Each app runs with the host tier the engine sizes itself (every item fits: R = 1), then once
with a host tier holding 25 % of the items (R = item loads / n > 1, each reload parsed and
preprocessed again), small items by value as the engine does by default. Rocket's
published single-node efficiencies are printed beside: microscopy 99.2 %, forensics 94.6 %,
bioinformatics (phylogeny) 88.5 %. Phylogeny's problem is the 16 proteomes and two jackknife
replicates of each (``jackknife``): the 16 alone at k = 7, the most the app accepts, are under
10 s of compute here, below the >= 20 s the target is read at; for every one of the 48 to
fit the host tier the engine sizes (40 % of the object store), the local Ray gets 3 GB. For
phylogeny, the wall time of a k = 5 run against the dense brute-force reference (every 20^k
component, numpy; k = 7 would need 20^7) on the same proteomes.

Results go to benchmarks/out/apps.json; absolute times on a shared machine are noise.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # tests/ (the CVTree oracle), not pairflow
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# T_min is one core's time: the stage measurement and the two plain processes get one BLAS
# thread each, as each device actor has (Ray gives a 1-CPU actor OMP_NUM_THREADS=1); with a
# thread per core the stage times would use both cores and the plain processes oversubscribe
# them.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # (not setdefault: a caller's setting would make T_min no core's)

import numpy as np  # noqa: E402

from _record import out_path, target, write  # noqa: E402
from cpu_meter import CpuMeter  # noqa: E402

# items a side of the tiles T_min's compares are timed in, at least: never smaller than the
# run's own tiles (``tmin_side``), as forensics' compare costs less a pair in larger tiles (its
# matrix products amortise each item's part over more pairs), and a T_min timed in smaller
# tiles would flatter the engine
STAGE_TILE = 26
# engine runs with the engine's host tier (quick, full): five, not three. A shared VM has slow
# minutes, each sinking the run it falls in, and of three runs two slow ones set the median
REPEATS = (1, 5)
ROCKET = {"microscopy": 0.992, "forensics": 0.946, "phylogeny": 0.885}
from pairflow.apps.data import data_dir  # noqa: E402  (PAIRFLOW_DATA, else the user data dir)
DATA = data_dir()
# (quick, full) problem sizes; full aims at >= 20 s of compute on 2 cores (each app's T_min:
# benchmarks/RESULTS.md). phylogeny: the 16 proteomes at k = 7 (the most the app accepts) fall
# short, so the full size adds two jackknife replicates of each (CVTree's own robustness test:
# a seeded 90 % of each proteome's proteins), 48 proteomes of the real shape; forensics: 384
# shots (96 a camera), the fewest that keep T_min above 20 s with room for the VM's fast minutes
SIZES = {"phylogeny": ({"proteomes": 4, "k": 4, "jackknife": 1},
                       {"proteomes": 16, "k": 7, "jackknife": 2}),
         "forensics": ({"size": 256, "cameras": 2, "shots": 4},
                       {"size": 512, "cameras": 4, "shots": 96}),
         "microscopy": ({"particles": 8}, {"particles": 80})}


def _raw(url: str) -> bytes:
    with open(url, "rb") as fh:
        return fh.read()


def tmin_side(leaf: int) -> int:
    """The side of the tiles T_min's compares are timed in for a run of ``leaf``."""
    return max(STAGE_TILE, int(leaf))


def stage_times(app, side: int = STAGE_TILE) -> tuple[float, float, int]:
    """(Σ parse + preprocess over every item, mean compare seconds per pair, pairs), all
    measured: every item prepared once and every pair compared once, in tiles of ``side``
    items on one thread. A sample could not stand for the run: items differ in cost
    (particles of 78 to 102 points), and a shared VM's speed drifts within minutes."""
    keys = list(app.keys())
    # the first item once, untimed: a fresh process's first parse loads the app's kernels
    # (numba's cache), which the engine's processes do in their warm-up, before T
    app.preprocess(keys[0], app.parse(keys[0], _raw(app.url(keys[0]))), "cpu")
    items, t_items = [], 0.0
    for key in keys:
        raw = _raw(app.url(key))
        t0 = time.perf_counter()
        items.append(app.preprocess(key, app.parse(key, raw), "cpu"))
        t_items += time.perf_counter() - t0
    n = len(keys)
    app.compare(items[:1], items[1:2], np.ones((1, 1), bool), "cpu")  # compiled, warm
    t_compare = 0.0
    for r0 in range(0, n, side):
        for c0 in range(r0, n, side):
            left, right = items[r0:r0 + side], items[c0:c0 + side]
            mask = np.ones((len(left), len(right)), bool)
            if r0 == c0:
                mask = np.triu(mask, 1)
            t_compare += _timed(lambda: app.compare(left, right, mask, "cpu"))
    pairs = n * (n - 1) // 2
    return t_items, t_compare / pairs, pairs


def _work_in_process(app, keys, index, barriers, queue, parses: int) -> None:
    """One side of a two-process limit: prepare ``keys``, time a unit of work alone (process 0
    first, then process 1, the other waiting), then both side by side (best of two each
    time). A unit is the compare of a tile of the keys, after ``parses`` items parsed and
    preprocessed (the app's own mix; 0: compares alone). Each process is its own reference:
    the two halves hold different items (particles of 78 to 102 points cost up to 1.7x
    apart), so a time of one half against the other's measured the items, not the machine."""
    from pairflow.engine.run.runtime import keep_freed_memory, long_time_slices
    keep_freed_memory()  # as every process of the engine's does
    long_time_slices()  # (as each of its computing threads asks)
    side = len(keys) // 2
    items = [app.preprocess(k, app.parse(k, _raw(app.url(k))), "cpu") for k in keys]
    mask = np.ones((side, side), bool)

    def unit():
        for j in range(parses):
            key = keys[j % len(keys)]
            app.preprocess(key, app.parse(key, _raw(app.url(key))), "cpu")
        app.compare(items[:side], items[side:], mask, "cpu")

    def best():
        return min(_timed(unit) for _ in range(2))
    solo = None
    for turn in range(2):  # one process alone at a time
        if turn == index:
            solo = best()
        barriers[turn].wait()
    barriers[2].wait()
    queue.put((index, solo, best()))


def limit_side(n: int) -> int:
    """The side of the two-process limits' tiles: as T_min's (as the engine's) where the n
    items allow (a smaller tile streams each item for fewer pairs)."""
    return min(STAGE_TILE, n // 4) or 1


def mix_parses(n: int, side: int) -> int:
    """Items parsed per tile of ``side`` x ``side`` pairs in the app's own mix: every item
    parsed once (R = 1) for the n (n - 1) / 2 pairs."""
    return max(1, round(side * side * n / max(1, n * (n - 1) // 2)))


def two_process_limit(app, mix: bool = False) -> tuple[float, list[float]]:
    """The machine's own limit: two plain processes (no Ray) side by side, each against its
    own time alone (``_work_in_process``): 1.0 when two busy cores each run as fast as one
    alone; below 1 when they contend (memory bandwidth, shared cache). ``mix``: each compares
    tiles and parses items in the app's own proportion (``mix_parses``), as the engine's
    processes together do; else compares alone. Returns the mean of the two ratios and each
    process's time per pair side by side."""
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    keys = list(app.keys())
    side = limit_side(len(keys))
    halves = [keys[:2 * side], keys[2 * side:4 * side] or keys[:2 * side]]
    parses = mix_parses(len(keys), side) if mix else 0
    barriers, queue = [ctx.Barrier(2) for _ in range(3)], ctx.Queue()
    procs = [ctx.Process(target=_work_in_process, args=(app, h, i, barriers, queue, parses))
             for i, h in enumerate(halves)]
    for proc in procs:
        proc.start()
    got = sorted(queue.get() for _ in procs)
    for proc in procs:
        proc.join()
    ratios = [solo / both for _, solo, both in got]
    return float(np.mean(ratios)), [both / (side * side) for _, _, both in got]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def build(name: str, size: dict, work: str):
    """(app, sinks, after) of one app at one problem size, data made or found as needed."""
    if name == "phylogeny":
        from pairflow.apps import phylogeny as mod
        paths = sorted(glob.glob(os.path.join(DATA, "proteomes", "*", "*.faa")))
        # smallest proteomes first in quick mode: the check is that it runs
        paths = sorted(paths, key=os.path.getsize)[:size["proteomes"]]
        paths += jackknife(paths, os.path.join(work, "jackknife"), size.get("jackknife", 0))
        return mod.PhylogenyApp(paths, k=size["k"]), [mod._sink()], mod.write_tree
    if name == "forensics":
        from pairflow.apps import forensics as mod
        from pairflow.apps.datasets import CAMERAS as DEFAULTS
        from pairflow.apps.datasets import simulate_cameras as simulate
        shots = simulate(os.path.join(work, "cameras"), **{**DEFAULTS, **size})
        app = mod.ForensicsApp([p for p, _ in shots])
        return app, [mod._sink()], lambda result: mod.write_clusters(result, app.threshold)
    from pairflow.apps import microscopy as mod
    from pairflow.apps.datasets import PARTICLES as DEFAULTS
    from pairflow.apps.datasets import simulate_particles as simulate
    parts = simulate(os.path.join(work, "particles"), **{**DEFAULTS, **size})
    app = mod.MicroscopyApp([p for p, _ in parts])
    return app, [mod._sink()], lambda result: mod.fuse_run(app, result)


def jackknife(paths: list[str], out_dir: str, copies: int, keep: float = 0.9) -> list[str]:
    """``copies`` jackknife replicates of each proteome (``{stem}-jk{c}.faa``): each protein
    kept with probability ``keep``, seeded by the file's stem and the copy, so every run of
    the benchmark compares the same proteomes."""
    import zlib

    from pairflow.operators.sequences import read_records
    os.makedirs(out_dir, exist_ok=True)
    out = []
    for path in paths:
        records = read_records(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        for c in range(1, copies + 1):
            rng = np.random.default_rng(zlib.crc32(f"{stem}-jk{c}".encode()))
            dest = os.path.join(out_dir, f"{stem}-jk{c}.faa")
            with open(dest, "wb") as fh:
                fh.writelines(b">%s\n%s\n" % (r.name.encode(), r.sequence)
                              for r in records if rng.random() < keep)
            out.append(dest)
    return out


def phylogeny_reference_s(app) -> float:
    """Wall time of the dense brute-force distances (tests/unit/cvtree_oracle.py)."""
    from tests.unit.cvtree_oracle import dense_distances, dense_vector, read_proteins
    t0 = time.perf_counter()
    dense_distances([dense_vector(read_proteins(app.url(k)), app.k) for k in app.keys()])
    return time.perf_counter() - t0


def run_once(app, sinks, after, runs_root: str, host: int | None,
             meter: CpuMeter | None = None) -> dict:
    """One engine run: its summary (host=None: the host tier the engine sizes itself), with
    the CPU of its compute phase split by role when ``meter`` samples."""
    from pairflow.engine import allpairs
    from pairflow.engine.run.rundir import read_json
    result = allpairs(app=app, sinks=sinks, runs_root=runs_root, progress=False, wait=True,
                      host_cache_items=host)
    s = dict(result.summary)
    if meter is not None:
        t_end = read_json(os.path.join(result.run_dir, "status.json"))["finished"]
        # the machine's 2 cores over the compute phase
        s["cpu_shares"] = meter.shares_between(t_end - s["compute_s"], t_end, cores=2)
    after(result)
    s["run_dir"] = result.run_dir
    return s


def _run_row(s: dict, t_min: float, limits: tuple[float, float], host: int | None) -> dict:
    p, compute = s["n_actors"], s["compute_s"]
    eff = t_min / (p * compute)
    row = {"p": p, "T": compute, "T_min": t_min, "efficiency": eff,
           "of_two_process_limit": eff / limits[0], "of_mix_limit": eff / limits[1],
           "R": s["R"],
           "host_cache_items": s.get("host_cache_items", host), "leaf": s["leaf_items"],
           "tiles": s.get("tiles_total"), "wall_s": s["wall_s"], "run_dir": s["run_dir"]}
    if "cpu_shares" in s:
        row["cpu_shares"] = s["cpu_shares"]
    return row


def _say(name: str, n: int, pairs: int, run: dict, label: str) -> None:
    print(f"{name:11s} n={n:3d} pairs={pairs:5d} T_min={run['T_min']:7.2f}s p={run['p']} "
          f"T={run['T']:7.2f}s efficiency={run['efficiency']:.3f} "
          f"({run['of_two_process_limit']:.3f} of the limit, {run['of_mix_limit']:.3f} of the "
          f"mix limit; Rocket {ROCKET[name]:.3f}) "
          f"R={run['R']:.2f} leaf={run['leaf']} "
          f"[{label}: {run['host_cache_items']} of {n} items]", flush=True)
    if "cpu_shares" in run:
        print("            CPU of 2 cores x T: " + ", ".join(
            f"{k} {v:.1%}" for k, v in run["cpu_shares"].items()), flush=True)


def bench(name: str, quick: bool, runs_root: str, work: str) -> dict:
    size = SIZES[name][0 if quick else 1]
    app, sinks, after = build(name, size, work)
    limit, two_times = two_process_limit(app)
    mix, _ = two_process_limit(app, mix=True)
    limits = (limit, mix)
    print(f"{name:11s} two processes side by side compare at {limit:.3f} of one alone "
          f"(the machine's limit), and parse and compare the app's mix at {mix:.3f} (the mix "
          f"limit)", flush=True)
    # (side, T_min) measured after each run, in tiles of that run's side
    stages: list[tuple[int, float]] = []
    n = len(app.keys())
    runs = []
    meter = CpuMeter(interval=0.5)
    try:
        for _ in range(REPEATS[0 if quick else 1]):
            s = run_once(app, sinks, after, runs_root, None, meter)
            side = tmin_side(s["leaf_items"])
            t_items, t_pair, pairs = stage_times(app, side)
            stages.append((side, t_items + pairs * t_pair))
            around = [t for sd, t in stages[-2:] if sd == side]
            runs.append({**_run_row(s, sum(around) / len(around), limits, None),
                         "T_min_side": side})
            _say(name, n, pairs, runs[-1], "engine_host_tier")
    finally:
        meter.close()
    t_mins = [t for _, t in stages]
    median = sorted(runs, key=lambda r: r["efficiency"])[len(runs) // 2]
    row = {"n": n, "pairs": pairs, "T_min": float(np.mean(t_mins)), "T_min_each": t_mins,
           "T_min_sides": [sd for sd, _ in stages], "two_process_limit": limit,
           "mix_limit": mix, "mix_parses_per_tile": mix_parses(n, limit_side(n)),
           "two_process_t_pair_s": two_times,
           "rocket_efficiency": ROCKET[name], "size": size,
           "runs": {"engine_host_tier": {**median,
                                         "each": [r["efficiency"] for r in runs],
                                         "each_T": [r["T"] for r in runs]}}}
    host = max(2, n // 4)
    quarter = _run_row(run_once(app, sinks, after, runs_root, host), row["T_min"], limits, host)
    row["runs"]["host_tier_25pct"] = quarter
    _say(name, n, pairs, quarter, "host_tier_25pct")
    print(f"{name:11s} efficiency (median of {len(runs)}): {median['efficiency']:.3f}; every "
          f"run: " + ", ".join(f"{r['efficiency']:.3f}" for r in runs), flush=True)
    if name == "phylogeny":
        small = {**size, "k": min(size["k"], 5)}
        app5, sinks5, after5 = build(name, small, work)
        s5 = run_once(app5, sinks5, after5, runs_root, None)
        ref = phylogeny_reference_s(app5)
        row["reference_k"] = small["k"]
        row["reference_wall_s"] = s5["wall_s"]
        row["reference_compute_s"] = s5["compute_s"]
        row["bruteforce_reference_s"] = ref
        print(f"            k={small['k']}: pairflow wall {s5['wall_s']:.2f}s (compute "
              f"{s5['compute_s']:.2f}s) against the dense brute-force reference {ref:.2f}s "
              f"({ref / s5['wall_s']:.1f}x)", flush=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--apps", default="phylogeny,forensics,microscopy")
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--object-store-mb", type=int, default=3072,
                        help="phylogeny's 48 proteomes at k = 7 need ~2.4 GB for every item "
                        "to fit the host tier the engine sizes (40 %% of the store)")
    parser.add_argument("--out", default=None, help="default: benchmarks/out/apps.json")
    args = parser.parse_args(argv)
    started = time.time()
    from pairflow.engine.run.runtime import init_ray, keep_freed_memory
    # the stage times are measured in this process: with the allocator every process of the
    # engine's has (else a fresh process pays page faults an earlier app's run had spared it)
    keep_freed_memory()
    init_ray(num_cpus=args.num_cpus, object_store_mb=args.object_store_mb)
    out = {"quick": args.quick, "apps": {}}
    with tempfile.TemporaryDirectory(prefix="pairflow-apps-") as work:
        for name in args.apps.split(","):
            out["apps"][name] = bench(name.strip(), args.quick, os.path.join(work, "runs"),
                                      work)
    goals = [target(f"efficiency, {name} (engine's host tier)",
                    row["runs"]["engine_host_tier"]["efficiency"], ">=", 0.90)
             for name, row in out["apps"].items()]
    write(out_path("apps.json", args.out), out, "apps", targets=goals, quick=args.quick,
          started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
