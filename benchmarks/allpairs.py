"""All-pairs benchmark: efficiency against the modelled limit, R against 1 + n/(2S), and exact
Jaccard on 16 real genomes against mash, sourmash and a naive one-task-per-pair Ray baseline.

    .venv/bin/python benchmarks/allpairs.py                # everything, ~15 minutes on 2 cores
    .venv/bin/python benchmarks/allpairs.py --parts a,b    # a subset
    .venv/bin/python benchmarks/allpairs.py --quick        # tiny sizes, 4 genomes: proves it runs

(a) system efficiency = T_min / (p * T), T_min = n (t_parse + t_pre) + pairs * t_cmp from stage
    times measured in this process (best of 5), p = device actors, T = the engine's wall time for
    the compute phase, the best of two runs, each run's figure printed (actors started, every
    item loaded, every tile computed and written; Ray start-up and actor process spawn
    excluded, and reported separately as the end-to-end figure). Also
    against stage times measured in two processes at once (the modelled limit of 2 busy cores,
    which slow each other on this VM), to separate the engine's loss from the machine's.
(b) R = loads / n measured by the engine for host tiers holding 5..100 % of the items, planned
    (stripe + next-use eviction) and baseline (Z-order + LRU), next to 1 + n/(2S) and the
    simulator's prediction.
(c) the Jaccard app on the 16 ragout genomes against mash (sketch larger than any union: exact)
    and sourmash (scaled=1: every hash), same k, one run; max |difference| reported.
(d) the same workload as one Ray task per pair, no cache (each task parses both genomes).
(e) the journal's overhead: the same real run with and without it.
(f) the time to resume a run that was 90 % done, against the full run.

Ratios are what matters; absolute times on this machine are noise. Results go to
benchmarks/out/allpairs.json; benchmarks/RESULTS.md keeps the latest figures.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np  # noqa: E402
import ray  # noqa: E402

from cpu_meter import CpuMeter  # noqa: E402
from _record import out_path, target, write  # noqa: E402
from pairflow.engine.pairs.driver import allpairs  # noqa: E402
from pairflow.engine.run.rundir import read_json  # noqa: E402
from pairflow.engine.run.runtime import init_ray  # noqa: E402
from pairflow.engine.pairs.plan.simulate import simulate  # noqa: E402
from pairflow.engine.pairs.sinks import Sink  # noqa: E402
from pairflow.engine.pairs.space import Triangle  # noqa: E402
from pairflow.apps.synthetic import SyntheticApp  # noqa: E402
from pairflow.kernels.spin import spin_rate  # noqa: E402

# Shaped like Rocket's Table 1: which stage dominates one item's or one pair's cost.
PROFILES = {
    "parse-heavy": dict(n=100, t_parse=0.040, t_pre=0.004, t_cmp=0.001),
    "preprocess-heavy": dict(n=100, t_parse=0.004, t_pre=0.040, t_cmp=0.001),
    "compare-heavy": dict(n=60, t_parse=0.003, t_pre=0.003, t_cmp=0.010),
}
# The same profiles at about 3x the work (15-25 s of compute on 2 cores): the fixed costs of
# a run (the first tiles waiting for their items, the last actor finishing alone, Ray's own
# processes) weigh less, which is where the >= 0.90 target is read.
LARGE = {"parse-heavy": 200, "preprocess-heavy": 200, "compare-heavy": 100}
# --quick: sizes that only prove each part runs (their figures say nothing about the targets)
QUICK_N = {"parse-heavy": 20, "preprocess-heavy": 20, "compare-heavy": 12}


def _best_time(fn, reps=5):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _stage_times(app) -> tuple[float, float, float]:
    """(t_parse, t_pre, t_cmp) of ``app``'s stages, the best of 5, in the calling process."""
    item = app.parse("item000001", None)
    t_parse = _best_time(lambda: app.parse("item000001", None))
    t_pre = _best_time(lambda: app.preprocess("item000001", item, "cpu"))
    mask = np.ones((4, 4), bool)
    t_cmp = _best_time(lambda: app.compare([item] * 4, [item] * 4, mask, "cpu")) / 16
    return t_parse, t_pre, t_cmp


def _busy_stage_times(app) -> tuple[float, float, float]:
    """The same stage times measured in two processes at once: what the stages cost when both
    cores work, as they do in a run (on this VM the two cores slow each other by a few %)."""
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        both = pool.map(_stage_times, [app, app])
    return tuple(float(np.mean(x)) for x in zip(*both))


def part_a(runs_root: str, sizes=("small", "large"), repeat: int = 2) -> dict:
    out = {}
    spin_rate()
    plan = [(name, prof, size) for size in sizes for name, prof in PROFILES.items()]
    for base, prof, size in plan:
        name = base if size == "small" else f"{base} (n={LARGE[base]})"
        if size == "large":
            prof = {**prof, "n": LARGE[base]}
        elif size == "quick":
            name = f"{base} (n={QUICK_N[base]})"
            prof = {**prof, "n": QUICK_N[base]}
        app = SyntheticApp(**prof)
        t_parse, t_pre, t_cmp = _stage_times(app)
        n = prof["n"]
        pairs = n * (n - 1) // 2
        t_min = n * (t_parse + t_pre) + pairs * t_cmp
        bp, bq, bc = _busy_stage_times(app)
        t_min_busy = n * (bp + bq) + pairs * bc
        # the best of ``repeat`` runs (every run's efficiency is printed and kept): this VM's
        # run-to-run spread (±0.03) is as large as the differences being measured; the stage
        # times of T_min are the best of their repetitions too
        runs = []
        for _ in range(repeat):
            # sampled every 0.5 s: the meter runs in this process, and a faster one costs CPU
            # that the efficiency would charge to the engine
            meter = CpuMeter(interval=0.5)
            try:
                res = allpairs(app=app, sink="dense", runs_root=runs_root, progress=False,
                               wait=True)
            finally:
                meter.close()
            runs.append((res, meter))
        res, meter = min(runs, key=lambda rm: rm[0].summary["compute_s"])
        run_effs = [t_min / (r.summary["n_actors"] * r.summary["compute_s"]) for r, _ in runs]
        s = res.summary
        p = s["n_actors"]
        eff = t_min / (p * s["compute_s"])
        eff_busy = t_min_busy / (p * s["compute_s"])
        t_end = read_json(os.path.join(res.run_dir, "status.json"))["finished"]
        # the machine's 2 cores over the compute phase
        shares = meter.shares_between(t_end - s["compute_s"], t_end, cores=2)
        eff_e2e = t_min / (p * (s["wall_s"] - s["phases"]["ray_init_s"]))
        m = res.matrix()
        iu = np.triu_indices(n, 1)
        ok = bool(np.array_equal(m[iu], (iu[0] * 7919 + iu[1]) % 1000))
        out[name] = {"n": n, "pairs": pairs, "t_parse": t_parse, "t_pre": t_pre, "t_cmp": t_cmp,
                     "T_min": t_min, "p": p, "T": s["compute_s"], "efficiency": eff,
                     "T_min_two_busy_cores": t_min_busy, "efficiency_vs_two_busy_cores": eff_busy,
                     "efficiency_incl_startup": eff_e2e, "leaf": s["leaf_items"], "R": s["R"],
                     "correct": ok, "cpu_shares": shares, "runs_efficiency": run_effs}
        print(f"(a) {name:28s} T_min={t_min:6.2f}s p={p} T={s['compute_s']:6.2f}s "
              f"efficiency={eff:.3f} (with start-up {eff_e2e:.3f}; against stage times measured "
              f"with both cores busy {eff_busy:.3f}) leaf={s['leaf_items']} "
              f"R={s['R']:.2f} correct={ok}\n    every run's efficiency: "
              + ", ".join(f"{x:.3f}" for x in run_effs) + "\n    CPU of 2 cores x T: "
              + ", ".join(f"{k} {v:.1%}" for k, v in shares.items()), flush=True)
    return out


class NullSink(Sink):
    """Writes nothing: part (b) counts loads, and sink I/O would only slow its many tiny tiles."""

    name = "null"

    def write_tile(self, tile, fields, mask):
        return []


FRACTIONS = (0.05, 0.10, 0.25, 0.50, 1.0)


def part_b(runs_root: str, n: int = 120, leaf: int = 1, n_big: int = 400,
           fractions=FRACTIONS) -> dict:
    """R measured by real runs (n=120) and by the simulator at a larger n (n=400, leaf 1)."""
    rows = []
    for f in fractions:
        s_items = max(1, round(f * n))
        row = {"n": n, "leaf": leaf, "fraction": f, "S": s_items, "model": 1 + n / (2 * s_items)}
        for label, plan, eviction in (("planned", "stripe", "next_use"),
                                      ("zorder_lru", "zorder", "lru")):
            app = SyntheticApp(n, t_parse=0.001, item_floats=64)
            res = allpairs(app=app, sinks=[NullSink()], runs_root=runs_root, progress=False,
                           wait=True, leaf_items=leaf, host_cache_items=s_items, plan=plan,
                           eviction=eviction, in_flight=1)
            row[f"R_{label}"] = res.summary["R"]
            sim = simulate(Triangle(n), leaf, s_items, actors_per_node=res.summary["n_actors"],
                           plan=plan, eviction=eviction)
            row[f"R_{label}_simulated"] = sim.R
        row["planned_over_model"] = row["R_planned"] / row["model"]
        rows.append(row)
        print(f"(b) real runs, S={f:4.0%} of n={n}: R planned {row['R_planned']:.2f} "
              f"(sim {row['R_planned_simulated']:.2f}), Z-order/LRU {row['R_zorder_lru']:.2f} "
              f"(sim {row['R_zorder_lru_simulated']:.2f}), 1+n/2S {row['model']:.2f}, "
              f"planned/model {row['planned_over_model']:.3f}", flush=True)
    big = []
    for f in fractions:
        s_items = max(1, round(f * n_big))
        planned = simulate(Triangle(n_big), 1, s_items, actors_per_node=2)
        base = simulate(Triangle(n_big), 1, s_items, actors_per_node=2, plan="zorder",
                        eviction="lru")
        model = 1 + n_big / (2 * s_items)
        big.append({"n": n_big, "leaf": 1, "fraction": f, "S": s_items, "model": model,
                    "R_planned_simulated": planned.R, "R_zorder_lru_simulated": base.R,
                    "planned_over_model": planned.R / model})
        print(f"(b) simulated, S={f:4.0%} of n={n_big}: R planned {planned.R:.2f}, "
              f"Z-order/LRU {base.R:.2f}, 1+n/2S {model:.2f}, planned/model "
              f"{planned.R / model:.3f}", flush=True)
    return {"real": rows, "simulated_large": big}


# --quick uses the 4 V. cholerae genomes instead of all 16
QUICK = False


def _genomes() -> list[str]:
    from pairflow.apps.data import data_path
    group = "V.Cholerae" if QUICK else "*"
    paths = sorted(glob.glob(data_path("usr/share/doc/ragout/examples") +
                             f"/{group}/references/*.fasta.gz"))
    want = 4 if QUICK else 16
    assert len(paths) == want, f"expected {want} ragout genomes, found {len(paths)}; run setup"
    return paths


def part_c(runs_root: str, with_sourmash: bool = True) -> dict:
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine.pairs.sinks import DenseMatrix
    paths = _genomes()
    k = 21
    t0 = time.time()
    app = JaccardApp(paths, k=k)
    res = allpairs(app=app, sinks=[DenseMatrix(diagonal={"similarity": 1.0})],
                   runs_root=runs_root, progress=False, wait=True)
    t_engine = time.time() - t0
    s = res.summary
    ours = res.matrix("similarity")
    idx = {p: i for i, p in enumerate(paths)}
    out = {"n": len(paths), "k": k, "engine_wall_s": t_engine, "engine_compute_s": s["compute_s"],
           "engine_startup_s": s["phases"]["startup_s"], "ray_init_s": s["phases"]["ray_init_s"],
           "R": s["R"], "leaf": s["leaf_items"]}
    work = tempfile.mkdtemp()
    try:
        lst = os.path.join(work, "in.txt")
        with open(lst, "w") as fh:
            fh.write("\n".join(paths) + "\n")
        t0 = time.time()
        subprocess.run(["mash", "sketch", "-k", str(k), "-s", "10000000", "-p", "2", "-o",
                        os.path.join(work, "all"), "-l", lst], check=True, capture_output=True)
        dist = subprocess.run(["mash", "dist", "-p", "2", os.path.join(work, "all.msh"),
                               os.path.join(work, "all.msh")], check=True,
                              capture_output=True, text=True).stdout
        out["mash_s"] = time.time() - t0
        diff = 0.0
        for line in dist.splitlines():
            a, b, _, _, shared = line.split("\t")
            x, y = map(int, shared.split("/"))
            diff = max(diff, abs(x / y - ours[idx[a], idx[b]]))
        out["max_abs_diff_vs_mash"] = diff
        if with_sourmash:
            sourmash = shutil.which("sourmash") or os.path.join(os.path.dirname(sys.executable),
                                                                "sourmash")
            t0 = time.time()
            sigs = []
            procs = []
            for part in (paths[0::2], paths[1::2]):  # two processes: same cores as the others
                sig = os.path.join(work, f"s{len(sigs)}.sig")
                sigs.append(sig)
                procs.append(subprocess.Popen([sourmash, "sketch", "dna", "-p",
                                               f"k={k},scaled=1", "-o", sig, *part],
                                              stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
            for p in procs:
                assert p.wait() == 0
            csv = os.path.join(work, "cmp.csv")
            subprocess.run([sourmash, "compare", "-k", str(k), "-p", "2", "--csv", csv, *sigs],
                           check=True, capture_output=True)
            out["sourmash_s"] = time.time() - t0
            import pandas as pd
            df = pd.read_csv(csv)
            names = list(df.columns)
            order = [idx[next(p for p in paths if os.path.basename(p) in nm or p == nm)]
                     for nm in names]
            sm = df.to_numpy()
            out["max_abs_diff_vs_sourmash"] = float(np.max(np.abs(
                sm - ours[np.ix_(order, order)])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["speedup_vs_mash_incl_ray_start"] = out["mash_s"] / t_engine
    out["speedup_vs_mash_running_ray"] = out["mash_s"] / (t_engine - out["ray_init_s"])
    if "sourmash_s" not in out:
        print(f"(c) {len(paths)} genomes k={k}: pairflow {t_engine:.1f}s, mash "
              f"{out['mash_s']:.1f}s (x{out['speedup_vs_mash_running_ray']:.2f} on a running Ray);"
              f" max diff vs mash {out['max_abs_diff_vs_mash']:.2e} (sourmash left out)",
              flush=True)
        return out
    out["speedup_vs_sourmash"] = out["sourmash_s"] / (t_engine - out["ray_init_s"])
    print(f"(c) {len(paths)} genomes k={k}: pairflow {t_engine:.1f}s (Ray start "
          f"{out['ray_init_s']:.1f}s, R={s['R']:.2f}) | mash {out['mash_s']:.1f}s (x{out['speedup_vs_mash_running_ray']:.2f}"
          f" on a running Ray, x{out['speedup_vs_mash_incl_ray_start']:.2f} incl. Ray start) | "
          f"sourmash {out['sourmash_s']:.1f}s | max diff vs mash "
          f"{out['max_abs_diff_vs_mash']:.2e}, vs sourmash {out['max_abs_diff_vs_sourmash']:.2e}",
          flush=True)
    return out


@ray.remote(num_cpus=1)
def _pair_task(app, a, b):
    from pairflow.engine.pairs.cache.loading import load_and_parse
    from pairflow.kernels.jaccard import intersection_count
    x = load_and_parse(app, a)[0]["kmers"]
    y = load_and_parse(app, b)[0]["kmers"]
    i = intersection_count(x, y)
    return i / (len(x) + len(y) - i)


def part_d(engine_s: float | None) -> dict:
    from pairflow.apps.jaccard import JaccardApp
    paths = _genomes()
    app = JaccardApp(paths, k=21)
    ref = ray.put(app)
    keys = app.keys()
    t0 = time.time()
    ray.get([_pair_task.remote(ref, keys[i], keys[j])
             for i in range(len(keys)) for j in range(i + 1, len(keys))])
    t = time.time() - t0
    out = {"naive_s": t, "pairs": len(keys) * (len(keys) - 1) // 2}
    if engine_s:
        out["engine_speedup"] = t / engine_s
    print(f"(d) naive one Ray task per pair, no cache: {t:.1f}s"
          + (f" (pairflow x{t / engine_s:.1f} faster)" if engine_s else ""), flush=True)
    return out


def part_e(runs_root: str, reps: int = 10) -> dict:
    """Journal overhead on a real run, two ways.

    Direct: the scheduler times every journal append (``summary["journal_s"]``); appends run on
    the scheduler's serial path, so journal_s / T bounds what the journal adds there (fsync runs
    in a background thread, timed apart as ``journal_fsync_s``).
    A/B: the same run with and without the journal in a shuffled order (alternating put the
    journal first in every pair and measured an order effect of +12 %), medians of ``reps``
    each; on this VM the run-to-run spread (printed) is larger than the journal's cost, so the
    direct figure is the one that can be read to 1 %."""
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.apps.data import data_path
    gbk = data_path("usr/share/kaptive/reference_database/"
                    "Klebsiella_k_locus_primary_reference.gbk")
    times = {True: [], False: []}
    direct, fsyncs = [], []
    tiles = None
    order = [True, False] * reps
    random.Random(7).shuffle(order)
    for journal in order:
        app = JaccardApp([gbk], k=21, item="record")
        res = allpairs(app=app, sink="dense", runs_root=runs_root, progress=False,
                       wait=True, journal=journal, leaf_items=8)
        times[journal].append(res.summary["compute_s"])
        if journal:
            direct.append(res.summary["journal_s"] / res.summary["compute_s"])
            fsyncs.append(res.summary.get("journal_fsync_s", 0.0) / res.summary["compute_s"])
        tiles = res.summary["tiles_total"]
    on, off = float(np.median(times[True])), float(np.median(times[False]))
    spread = (max(times[False]) - min(times[False])) / off
    # interference on a shared VM only adds time: the fastest run of each side is the estimate
    # least disturbed by it (the medians are kept too)
    best_on, best_off = min(times[True]), min(times[False])
    out = {"with_journal_median_s": on, "without_journal_median_s": off,
           "ab_overhead": on / off - 1, "ab_spread_without": spread,
           "with_journal_best_s": best_on, "without_journal_best_s": best_off,
           "ab_overhead_best": best_on / best_off - 1,
           "direct_overhead": float(np.median(direct)), "direct_overhead_max": max(direct),
           "background_fsync_fraction": float(np.median(fsyncs)),
           "tiles": tiles, "runs": {str(k): v for k, v in times.items()}}
    print(f"(e) journal overhead on 162 Klebsiella loci ({tiles} tiles): direct (journal time / "
          f"T) {100 * out['direct_overhead']:.2f}% (max {100 * max(direct):.2f}%; background "
          f"fsync {100 * out['background_fsync_fraction']:.2f}% of T); A/B medians "
          f"{on:.2f}s with, {off:.2f}s without: {100 * (on / off - 1):+.1f}% (spread of the "
          f"runs without: {100 * spread:.0f}%); fastest runs {best_on:.2f}s with, "
          f"{best_off:.2f}s without: {100 * (best_on / best_off - 1):+.1f}%", flush=True)
    return out


def _resume_case(label: str, make_app, runs_root: str, **options) -> dict:
    """Run to the end, drop the journal's last 10 % of tiles, resume; times after Ray start."""
    from pairflow.engine.run.rundir import read_jsonl
    res = allpairs(app=make_app(), sink="dense", runs_root=runs_root, progress=False,
                   wait=True, **options)
    full = res.summary["wall_s"] - res.summary["phases"]["ray_init_s"]
    entries = read_jsonl(os.path.join(res.run_dir, "journal.jsonl"))
    tiles = sorted({e["tile"] for e in entries})
    keep = set(tiles[: int(0.9 * len(tiles))])
    with open(os.path.join(res.run_dir, "journal.jsonl"), "w") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in entries if e["tile"] in keep)
    t0 = time.time()
    again = allpairs(app=make_app(), sink="dense", run_dir=res.run_dir, resume=True,
                     progress=False, wait=True)
    resume = time.time() - t0
    rep, phases = again.summary["resumed"], again.summary["phases"]
    out = {"full_s": full, "resume_s": resume, "ratio": resume / full, "tiles": len(tiles),
           "resume_startup_s": phases["startup_s"], "resume_compute_s": again.summary["compute_s"],
           **rep}
    print(f"(f) resume of a 90%-done run, {label} ({len(tiles)} tiles): {resume:.2f}s vs full "
          f"{full:.2f}s = {100 * resume / full:.0f}% (start-up {phases['startup_s']:.2f}s, "
          f"of which actors {phases.get('actors_s', 0):.2f}s; reused {rep['reused']}, "
          f"recomputed {rep['recomputed']})", flush=True)
    return out


def part_f(runs_root: str, n_synthetic: int = 140) -> dict:
    """Resume of a run that was 90 % done against the full run: the 16 genomes (a short run,
    where the resume's fixed start-up dominates) and a compare-heavy synthetic run of ~1 min."""
    from pairflow.apps.jaccard import JaccardApp
    paths = _genomes()
    return {"genomes": _resume_case(f"{len(paths)} genomes", lambda: JaccardApp(paths, k=21),
                                    runs_root, leaf_items=1),
            "synthetic": _resume_case(f"compare-heavy synthetic n={n_synthetic}",
                                      lambda: SyntheticApp(**{**PROFILES["compare-heavy"],
                                                              "n": n_synthetic}), runs_root)}


def targets(results: dict) -> list[dict]:
    """The issue's targets, each with the figure this run measured (None: part not run)."""
    out = []
    a = results.get("a_efficiency") or {}
    for name, row in a.items():
        out.append(target(f"(a) efficiency, {name}", row["efficiency"], ">=", 0.90))
    b = results.get("b_R") or {}
    for row in b.get("real", []):
        if row["fraction"] <= 0.5:
            out.append(target(f"(b) R planned / (1 + n/2S), S = {row['fraction']:.0%} of "
                              f"n = {row['n']}", row["planned_over_model"], "<=", 1.1))
    c = results.get("c_jaccard_vs_tools")
    if c:
        out.append(target(f"(c) speed-up over exact mash ({c['n']} genomes, running Ray)",
                          c.get("speedup_vs_mash_running_ray"), ">=", 1.5, "x"))
        out.append(target("(c) max abs difference from mash's J",
                          c.get("max_abs_diff_vs_mash"), "<=", 1e-9))
    e = results.get("e_journal")
    if e:
        out.append(target("(e) journal time / T (direct)", e["direct_overhead"], "<=", 0.03))
    f = results.get("f_resume")
    if f:
        out.append(target("(f) resume of a 90 %-done run / full run (synthetic)",
                          f["synthetic"]["ratio"], "<=", 0.15))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="a,b,c,d,e,f")
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes, 4 genomes, no sourmash: proves every part runs")
    ap.add_argument("--repeat", type=int, default=None,
                    help="engine runs per profile in part (a), the best kept (default 2)")
    ap.add_argument("--journal-reps", type=int, default=None,
                    help="runs with and without the journal in part (e) (default 10)")
    ap.add_argument("--b-n", type=int, default=None,
                    help="items of part (b)'s real runs (default 120; leaf 1, so n^2/2 tiles)")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/allpairs.json")
    args = ap.parse_args(argv)
    global QUICK
    QUICK = args.quick
    started = time.time()
    parts = set(args.parts.split(","))
    runs_root = tempfile.mkdtemp(prefix="pairflow-bench-")
    init_ray(num_cpus=2, object_store_mb=2048)
    results = {"quick": args.quick, "parts": sorted(parts)}
    try:
        if "a" in parts:
            results["a_efficiency"] = part_a(
                runs_root, sizes=("quick",) if args.quick else ("small", "large"),
                repeat=args.repeat or (1 if args.quick else 2))
        if "b" in parts:
            results["b_R"] = (part_b(runs_root, n=20, n_big=100, fractions=(0.1, 0.5))
                              if args.quick else part_b(runs_root, n=args.b_n or 120))
        engine_s = None
        if "c" in parts:
            results["c_jaccard_vs_tools"] = part_c(runs_root, with_sourmash=not args.quick)
            c = results["c_jaccard_vs_tools"]
            engine_s = c["engine_wall_s"] - c["ray_init_s"]
        if "d" in parts:
            results["d_naive"] = part_d(engine_s)
        if "e" in parts:
            results["e_journal"] = part_e(runs_root,
                                          reps=args.journal_reps or (1 if args.quick else 10))
        if "f" in parts:
            results["f_resume"] = part_f(runs_root, n_synthetic=30 if args.quick else 140)
    finally:
        shutil.rmtree(runs_root, ignore_errors=True)
        write(out_path("allpairs.json", args.out), results, "allpairs",
              targets=targets(results), quick=args.quick, started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
