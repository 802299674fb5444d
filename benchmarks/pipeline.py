"""Pipeline benchmark: adaptive operator order and DS/DP balancing against static choices.

    .venv/bin/python benchmarks/pipeline.py                # everything, ~15 minutes on 2 cores
    .venv/bin/python benchmarks/pipeline.py --parts a      # a subset (a, b, c)
    .venv/bin/python benchmarks/pipeline.py --quick        # 1 repetition, small sizes

(a) Synthetic pipelines whose operators burn known CPU per record (compiled spin, GIL released)
    and pass records with known probabilities (independent uniform columns): the adaptive run,
    started from a deliberately poor written order, against the best static order (the best of
    the three orders of least modelled work, found by brute force over every valid order, each
    run as a fixed order) and against the written order run as written.
(b) The HEP app (ttH-style selection on uproot-HZZ.root read 20 times) written in its poor order:
    adaptive, against the same order fixed as written, against a HEFT-like static list schedule
    (upward rank over the dependency DAG from the costs the adaptive run measured, blind to pass
    rates) and against the physicist's written order. The selections must be identical.
(c) DS/DP balancing against fixed splits of the slots (CPUs + 1) between reading and
    processing, for a read-heavy variant (LZMA file, every branch, reopened for each small batch,
    light preselection) and a compute-heavy one (uncompressed file, heavy reconstruction first).
(d) Against the user's alternative, end to end as each is run: `pairflow app=hep` (the CLI,
    cold, adaptive from the written order) against benchmarks/hep_plain.py (awkward/numpy over
    all events at once, the written order) on the bundled 2,421 events, and both on the events
    replicated to 1,002,294, twice: read 414 times (`data.repeat=414`; the plain script
    replicates in memory) and from one file of 10^6 events written once into the data
    directory's cache (both read it from disk), on this machine's cores. Same rows, both.

Times are the compute phase of each run (slot actors up, every batch read, processed and
sunk), medians of interleaved repetitions; the machine is shared, so ratios matter and
absolute times are noise. Results go to benchmarks/out/pipeline.json.
"""
from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np  # noqa: E402

from pairflow.engine.pipeline.ordering import (OpSpec, brute_force_best, expected_cost,  # noqa: E402
                                      heft_order, is_valid_order)
from pairflow.engine.pipeline import Filter, Map, Pipeline  # noqa: E402
from pairflow.operators.arrays import ArraySource  # noqa: E402
from pairflow.engine.run.runtime import init_ray  # noqa: E402
from pairflow.kernels.spin import spin as _spin, spin_rate  # noqa: E402
from _record import out_path, target, write  # noqa: E402

RUNS = tempfile.mkdtemp(prefix="pairflow-bench-pipeline-")

# name, kind, cost (us per record), pass rate, after; listed in a deliberately poor order
SYNTHETIC = {
    "independent-6": [
        ("f16", "filter", 16.0, 0.6, ()), ("f32", "filter", 32.0, 0.1, ()),
        ("f8", "filter", 8.0, 0.3, ()), ("f1", "filter", 1.0, 0.9, ()),
        ("f2", "filter", 2.0, 0.8, ()), ("f4", "filter", 4.0, 0.5, ()),
    ],
    "map-and-deps": [
        ("g30", "filter", 30.0, 0.3, ()), ("m", "map", 3.0, 1.0, ()),
        ("h20", "filter", 20.0, 0.5, ("m",)), ("g2", "filter", 2.0, 0.7, ()),
        ("h1", "filter", 1.0, 0.2, ("m",)), ("g05", "filter", 0.5, 0.95, ()),
    ],
    "one-tight-cheap": [
        ("a50", "filter", 50.0, 0.5, ()), ("b10", "filter", 10.0, 0.5, ()),
        ("c5", "filter", 5.0, 0.9, ()), ("d2", "filter", 2.0, 0.8, ()),
        ("e05", "filter", 0.5, 0.05, ()),
    ],
}


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def _synthetic_ops(table, iters_per_us):
    ops = []
    for k, (name, kind, cost, p, after) in enumerate(table):
        iters = iters_per_us * cost

        def work(b, iters=iters):
            _spin(int(iters * len(b)))

        if kind == "map":
            def fn(b, work=work, name=name):
                work(b)
                return {f"{name}_out": np.asarray(b["u0"]) * 2.0}
            ops.append(Map(name, fn, after=after))
        else:
            col = f"u{k}"

            def fn(b, work=work, col=col, p=p):
                work(b)
                return np.asarray(b[col]) < p
            ops.append(Filter(name, fn, after=after))
    return ops


def part_a(reps: int, n_records: int, batch: int) -> dict:
    iters_per_us = spin_rate() / 1e6
    rng = np.random.default_rng(0)
    out = {}
    for pname, table in SYNTHETIC.items():
        specs = [OpSpec(n, k, tuple(a)) for n, k, _, _, a in table]
        cost = {n: c * 1e-6 for n, _, c, _, _ in table}
        rate = {n: p for n, k, _, p, _ in table}
        orders = [list(o) for o in itertools.permutations([s.name for s in specs])
                  if is_valid_order(specs, o)]
        orders.sort(key=lambda o: expected_cost(specs, o, cost, rate))
        best_model, best_v = brute_force_best(specs, cost, rate)
        assert abs(expected_cost(specs, orders[0], cost, rate) - best_v) <= 1e-12 * best_v
        candidates = orders[:3]
        written = [n for n, *_ in table]
        data = {"id": np.arange(n_records)}
        for k in range(len(table)):
            data[f"u{k}"] = rng.uniform(size=n_records)
        ops = _synthetic_ops(table, iters_per_us)
        keep = np.ones(n_records, bool)
        for k, (name, kind, _, p, _) in enumerate(table):
            if kind == "filter":
                keep &= data[f"u{k}"] < p
        expected_ids = data["id"][keep]
        # batch="source": (a)-(c) measure ordering and balancing over the batches as cut
        pipe = Pipeline(ArraySource(data, batch_size=batch), ops, runs_root=RUNS,
                        progress=False, columns=["id"], batch="source")
        configs = {"adaptive": {}, "written": {"order": "written"}}
        for i, o in enumerate(candidates):
            configs[f"static-{i}"] = {"order": o}
        times = {k: [] for k in configs}
        work = {k: [] for k in configs}
        final = None
        pipe.run(order="written")  # warm the slot actors
        for _ in range(reps):
            for key, opts in configs.items():
                res = pipe.run(**opts)
                assert np.array_equal(np.sort(res.selected["id"]), expected_ids), key
                times[key].append(res.summary["phases"]["compute_s"])
                work[key].append(res.summary["op_seconds"])
                if key == "adaptive":
                    final = res.summary["final_order"]
        med = {k: _median(v) for k, v in times.items()}
        best_static = min(med[f"static-{i}"] for i in range(len(candidates)))
        wmed = {k: _median(v) for k, v in work.items()}
        best_work = min(wmed[f"static-{i}"] for i in range(len(candidates)))
        out[pname] = {
            "written_order": written, "best_order_model": best_model,
            "candidates": candidates,
            "model_cost_us": {"written": expected_cost(specs, written, cost, rate) * 1e6,
                              "best": best_v * 1e6},
            "adaptive_final_order": final, "times_s": times, "op_seconds": work,
            "median_s": med, "best_static_s": best_static,
            "adaptive_over_best_static": med["adaptive"] / best_static,
            "written_over_adaptive": med["written"] / med["adaptive"],
            "op_seconds_median": wmed,
            "work_adaptive_over_best_static": wmed["adaptive"] / best_work,
            "work_written_over_adaptive": wmed["written"] / wmed["adaptive"],
            "records": n_records, "batches": -(-n_records // batch),
        }
        print(f"(a) {pname}: adaptive {med['adaptive']:.2f} s, best static "
              f"{best_static:.2f} s -> ratio {med['adaptive'] / best_static:.3f} (target <= 1.1); "
              f"written {med['written']:.2f} s -> speedup {med['written'] / med['adaptive']:.2f}x"
              f"; operator CPU time: adaptive/best static {wmed['adaptive'] / best_work:.3f}, "
              f"written/adaptive {wmed['written'] / wmed['adaptive']:.2f}x; final order {final}",
              flush=True)
    return out


def part_b(reps: int, repeat: int) -> dict:
    from pairflow.apps.hep import hep_pipeline, operators
    common = dict(file="uproot-HZZ.root", step_size=807, repeat=repeat, reco_draws=1024,
                  progress=False, runs_root=RUNS, batch="source")
    specs = [o.spec for o in operators("poor")]
    hep_pipeline(order="written", adaptive=False, **{**common, "repeat": 1}).run()  # warm
    configs = {"adaptive (from poor)": dict(order="poor", adaptive=True),
               "poor, fixed as written": dict(order="poor", adaptive=False),
               "written (physicist), fixed": dict(order="written", adaptive=False)}
    times = {k: [] for k in configs}
    times["HEFT-like static"] = []
    work = {k: [] for k in times}
    selected, heft, info = {}, None, {}
    for r in range(reps):
        for key, opts in configs.items():
            res = hep_pipeline(**opts, **common).run()
            times[key].append(res.summary["phases"]["compute_s"])
            work[key].append(res.summary["op_seconds"])
            selected[key] = sorted(np.asarray(res.selected["event"]).tolist())
            if key.startswith("adaptive"):
                info["adaptive_final_order"] = res.summary["final_order"]
                info["adaptive_distinct_orders"] = res.summary["distinct_orders"]
                if heft is None:  # costs as measured: seconds per record over the whole run
                    cost = {}
                    for name, st in res.summary["ops"].items():
                        tot = st["total"]["seconds"] + st["sample_total"]["seconds"]
                        recs = st["total"]["records_in"] + st["sample_total"]["records_in"]
                        cost[name] = tot / max(1, recs)
                    heft = heft_order(specs, cost)
                    info["heft_costs_s"] = cost
        res = hep_pipeline(order=heft, adaptive=False, **common).run()
        times["HEFT-like static"].append(res.summary["phases"]["compute_s"])
        work["HEFT-like static"].append(res.summary["op_seconds"])
        selected["HEFT-like static"] = sorted(np.asarray(res.selected["event"]).tolist())
    assert len({tuple(v) for v in selected.values()}) == 1, "selections differ"
    med = {k: _median(v) for k, v in times.items()}
    a = med["adaptive (from poor)"]
    out = {"events": 2421 * repeat, "batches": 3 * repeat, "selected": len(selected[
        "HEFT-like static"]), "heft_order": heft, "times_s": times, "median_s": med,
        "poor_fixed_over_adaptive": med["poor, fixed as written"] / a,
        "heft_over_adaptive": med["HEFT-like static"] / a,
        "written_fixed_over_adaptive": med["written (physicist), fixed"] / a,
        "op_seconds": work, "op_seconds_median": {k: _median(v) for k, v in work.items()},
        **info}
    print(f"(b) HEP {out['events']} events, {out['selected']} selected: adaptive {a:.2f} s; poor "
          f"fixed {med['poor, fixed as written']:.2f} s ({out['poor_fixed_over_adaptive']:.2f}x); "
          f"HEFT-like {med['HEFT-like static']:.2f} s ({out['heft_over_adaptive']:.2f}x); "
          f"physicist's order {med['written (physicist), fixed']:.2f} s "
          f"({out['written_fixed_over_adaptive']:.2f}x)", flush=True)
    return out


def part_c(reps: int, cpus: int) -> dict:
    from pairflow.apps.hep import hep_pipeline
    slots = cpus + 1
    variants = {
        "read-heavy": dict(file="uproot-HZZ-lzma.root", step_size=250, repeat=8,
                           selection="preselection", branches="all", keep_open=False,
                           order="written", adaptive=False),
        "compute-heavy": dict(file="uproot-HZZ-uncompressed.root", step_size=807, repeat=8,
                              reco_draws=1024, order="poor", adaptive=False),
    }
    out = {}
    for vname, kw in variants.items():
        configs = {"balanced": None, **{f"fixed {k}:{slots - k}": k for k in range(1, slots)}}
        times = {k: [] for k in configs}
        bal_info = None
        kw = {**kw, "batch": "source"}
        hep_pipeline(progress=False, runs_root=RUNS, slots=slots, **{**kw, "repeat": 1}).run()
        for _ in range(reps):
            for key, ds in configs.items():
                res = hep_pipeline(progress=False, runs_root=RUNS, slots=slots, ds_slots=ds,
                                   **kw).run()
                times[key].append(res.summary["phases"]["compute_s"])
                if ds is None:
                    b = res.summary["balance"]
                    st = res.summary["stage_seconds"]
                    bal_info = {"final_split": f"{b['final_ds']}:{b['final_dp']}",
                                "checkpoints": len(b["checkpoints"]),
                                "read_cpu_s": st["read_cpu_s"],
                                "process_cpu_s": st["process_cpu_s"]}
        med = {k: _median(v) for k, v in times.items()}
        fixed = {k: v for k, v in med.items() if k != "balanced"}
        best, worst = min(fixed.values()), max(fixed.values())
        out[vname] = {"slots": slots, "times_s": times, "median_s": med, **(bal_info or {}),
                      "balanced_over_best_fixed": med["balanced"] / best,
                      "worst_fixed_over_balanced": worst / med["balanced"]}
        print(f"(c) {vname}: balanced {med['balanced']:.2f} s -> "
              f"{bal_info['final_split']} (DS:DP); " +
              ", ".join(f"{k} {v:.2f} s" for k, v in fixed.items()) +
              f"; balanced/best fixed {med['balanced'] / best:.3f}, worst fixed/balanced "
              f"{worst / med['balanced']:.2f}", flush=True)
    return out


HERE = os.path.dirname(os.path.abspath(__file__))
EVENTS_IN_FILE = 2421


def _timed(cmd: list[str], cwd: str) -> tuple[float, str]:
    """Wall seconds of one command as a user runs it (a fresh process, its own directory)."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800,
                          env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    wall = time.perf_counter() - t
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall, proc.stdout


def _same_rows(pairflow_parquet: str, plain_parquet: str) -> int:
    import pandas as pd
    got = pd.read_parquet(pairflow_parquet).sort_values("event").reset_index(drop=True)
    want = pd.read_parquet(plain_parquet).sort_values("event").reset_index(drop=True)
    pd.testing.assert_frame_equal(got[list(want.columns)], want, check_dtype=False)
    return len(want)


def replicated_file(repeat: int) -> str:
    """The bundled events written ``repeat`` times into one ROOT file (zlib), once, cached under
    the data directory (`pairflow data where`): 10^6 events on disk, as a physicist's are."""
    from pairflow.apps.data import data_dir
    path = os.path.join(data_dir(), "cache", "hep", f"uproot-HZZ-x{repeat}.root")
    if os.path.exists(path):
        return path
    import uproot
    from hep_plain import BRANCHES, default_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with uproot.open(default_file()) as f:
        one = f["events"].arrays(BRANCHES, library="ak")
    tmp = f"{path}.{os.getpid()}.tmp"
    with uproot.recreate(tmp, compression=uproot.ZLIB(1)) as f:
        f["events"] = {k: one[k] for k in BRANCHES}
        for _ in range(repeat - 1):
            f["events"].extend({k: one[k] for k in BRANCHES})
    os.replace(tmp, path)
    return path


def part_d(reps: int, big_repeat: int) -> dict:
    """pairflow's CLI against the plain script, end to end, interleaved, each run cold."""
    cli = os.path.join(os.path.dirname(sys.executable), "pairflow")
    plain = [sys.executable, os.path.join(HERE, "hep_plain.py")]
    big_file = replicated_file(big_repeat)
    # case: (pairflow's overrides, the plain script's options, events)
    cases = {"bundled": ([], [], EVENTS_IN_FILE),
             "replicated in memory": ([f"data.repeat={big_repeat}"],
                                      ["--repeat", str(big_repeat)], EVENTS_IN_FILE * big_repeat),
             "replicated file": ([f"data.file={big_file}"], ["--file", big_file],
                                 EVENTS_IN_FILE * big_repeat)}
    out = {}
    for case, (extra, popts, events) in cases.items():
        times = {"pairflow": [], "plain": []}
        pipeline_wall, selected, how = [], None, []
        for _ in range(reps):
            cwd = tempfile.mkdtemp(dir=RUNS)
            wall, text = _timed([cli, "app=hep", *extra], cwd)
            times["pairflow"].append(wall)
            m = re.search(r"wall time ([\d.]+) s", text)
            pipeline_wall.append(float(m.group(1)) if m else None)
            m = re.search(r"batches=(\d+).*?\n.*?executor (\S+)", text)
            how.append(f"{m.group(2)}, {m.group(1)} batches" if m else None)
            pq = re.search(r"^parquet: (.+)$", text, re.M).group(1).strip()
            wall, text = _timed([*plain, *popts, "--out", "plain.parquet"], cwd)
            times["plain"].append(wall)
            n = _same_rows(os.path.join(cwd, pq), os.path.join(cwd, "plain.parquet"))
            assert selected in (None, n), "selections differ between repetitions"
            selected = n
        med = {k: _median(v) for k, v in times.items()}
        out[case] = {"events": events, "selected": selected, "times_s": times,
                     "median_s": med, "pairflow_pipeline_wall_s": pipeline_wall,
                     "pairflow_ran": how,
                     "pairflow_over_plain": med["pairflow"] / med["plain"],
                     "pairflow_minus_plain_s": med["pairflow"] - med["plain"],
                     "commands": {"pairflow": f"pairflow app=hep {' '.join(extra)}".strip(),
                                  "plain": f"python benchmarks/hep_plain.py {' '.join(popts)}"
                                  .strip()}}
        print(f"(d) {case} ({events:,} events, {selected} selected by both): "
              f"pairflow app=hep {med['pairflow']:.2f} s ({how[-1]}), plain script "
              f"{med['plain']:.2f} s -> {med['pairflow'] / med['plain']:.2f}x; times "
              f"{times}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="a,b,c,d")
    ap.add_argument("--quick", action="store_true",
                    help="1 repetition, 60,000 records, the HEP file read twice")
    ap.add_argument("--reps", type=int, default=None, help="default 3 (1 with --quick)")
    ap.add_argument("--records", type=int, default=None, help="default 600,000")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--hep-repeat", type=int, default=None, help="default 20")
    ap.add_argument("--big-repeat", type=int, default=None,
                    help="(d) copies of the 2,421 events: default 414 (10^6); 8 with --quick")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/pipeline.json")
    args = ap.parse_args()
    args.reps = args.reps or (1 if args.quick else 3)
    args.records = args.records or (60_000 if args.quick else 600_000)
    args.hep_repeat = args.hep_repeat or (2 if args.quick else 20)
    args.big_repeat = args.big_repeat or (8 if args.quick else 414)
    cpus = os.cpu_count() or 1
    t0 = time.time()
    results = {"cpus": cpus, "reps": args.reps, "records": args.records,
               "hep_repeat": args.hep_repeat, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    parts = args.parts.split(",")
    if "d" in parts:  # first, before this process starts Ray: each pairflow run starts its own
        results["d_plain"] = part_d(args.reps, args.big_repeat)
    if {"a", "b", "c"} & set(parts):
        init_ray(num_cpus=cpus)
    if "a" in parts:
        results["a_synthetic"] = part_a(args.reps, args.records, args.batch)
    if "b" in parts:
        results["b_hep"] = part_b(args.reps, args.hep_repeat)
    if "c" in parts:
        results["c_dsdp"] = part_c(args.reps, cpus)
    results["wall_s"] = time.time() - t0
    goals = [target(f"(a) adaptive / best static order, {name}",
                    row["adaptive_over_best_static"], "<=", 1.1)
             for name, row in results.get("a_synthetic", {}).items()]
    d = results.get("d_plain")
    if d:
        goals += [target(f"(d) pairflow app=hep / plain script, {d[k]['events']:,} events "
                         f"{k[len('replicated '):]}, {cpus} cores, end to end",
                         d[k]["pairflow_over_plain"], "<=", 1.0)
                  for k in ("replicated in memory", "replicated file")]
        goals.append(target("(d) pairflow app=hep - plain script, bundled 2,421 events, end to "
                            "end", d["bundled"]["pairflow_minus_plain_s"], "<=", 1.5, "s"))
    write(out_path("pipeline.json", args.out), results, "pipeline", targets=goals,
          quick=args.quick, started=t0)


if __name__ == "__main__":
    main()
