"""``pairflow bench``: every benchmark of benchmarks/ in one command, then the report.

    pairflow bench                      # the bench profile (36 min measured on 2 cores, 2026-11-24)
    pairflow bench --quick              # each benchmark's quick mode (4.6 min here): proves it runs
    pairflow bench --only allpairs align
    pairflow bench --report-only        # rebuild RESULTS.md, the plots and the README block
    pairflow bench --quick --only peers --out /tmp/b    # JSON and report under /tmp/b
    pairflow bench --list               # the benchmarks, their commands and estimates

Each benchmark runs as its own subprocess (a fresh Ray each time, its exact command recorded in
its JSON by ``benchmarks/_record.py`` and in ``bench_run.json`` here), with its output in
``<out>/logs/NAME.log``. A progress bar runs over the whole suite, advanced by each benchmark's
estimated duration. A benchmark that fails is reported and the others still run.

Where things go: the full profile writes ``benchmarks/out/*.json`` and rebuilds
``benchmarks/RESULTS.md``, ``benchmarks/plots/`` and the README's headline block. ``--quick``
writes to ``benchmarks/out/quick/`` (JSON, RESULTS.md and plots there) so a quick check never
replaces the figures of a real run; ``--out DIR`` puts everything of a run under DIR and leaves
the repository's files alone.

The bench profile: the sizes each benchmark's own defaults use, cut where the sum would pass
45 minutes on this 2-core machine (each estimate is its benchmark's measured time in a full run on the idle machine); ``CUTS`` says
which and how. Quick mode: each benchmark's ``--quick`` (tiny sizes, no figure worth reading).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks")


@dataclass(frozen=True)
class Bench:
    name: str
    script: str
    full: tuple = ()           # arguments of the bench profile
    quick: tuple = ("--quick",)
    est_full_s: float = 60.0   # estimated seconds on this machine (2 cores), idle
    est_quick_s: float = 20.0
    outputs: tuple = ()        # JSON files it writes (default: NAME.json)
    cut: str = ""              # how the bench profile departs from the benchmark's defaults

    def json_names(self) -> tuple:
        return self.outputs or (f"{self.name}.json",)


BENCHMARKS = (
    Bench("allpairs", "allpairs.py",
          full=("--repeat", "1", "--journal-reps", "5", "--b-n", "80"),
          quick=("--quick", "--parts", "a"),  # (b) runs in full mode: 5 minutes hold no more
          est_full_s=600, est_quick_s=25,
          cut="part (a) one engine run per profile, not the best of 2; part (b)'s real runs at "
              "n = 80 instead of 120 (leaf 1: 3,160 tiles per run, not 7,140; the simulator "
              "still covers n = 400); part (e) 5 runs with and without the journal, not 10"),
    Bench("align", "align.py", full=("--repeat", "2"), est_full_s=100, est_quick_s=20,
          cut="best of 2 runs, not 3"),
    Bench("apps", "apps.py", est_full_s=240, est_quick_s=35),
    Bench("peers", "peers.py", est_full_s=600, est_quick_s=90),
    Bench("startup", "startup.py", est_full_s=135, est_quick_s=30),
    Bench("pipeline", "pipeline.py", full=("--reps", "2"), quick=("--quick", "--parts", "a"),
          est_full_s=300, est_quick_s=25, cut="medians of 2 repetitions, not 3"),
    Bench("farm", "farm.py", full=("--reps", "3"), est_full_s=600, est_quick_s=120,
          cut="the 50-record cases and clustalo 3 repetitions, not 5"),
    Bench("cluster", "cluster.py", full=("--n", "150", "--t-cmp", "0.001"), est_full_s=210,
          quick=("--quick", "--mode", "wait"), est_quick_s=20,
          cut="n = 150 items at 1 ms per compare in both modes, not 300 at 1 ms (wait) and "
              "2 ms (burn)"),
    Bench("many_small", "many_small.py", full=("--merge-on", "reads_1"), est_full_s=130,
          quick=("--quick", "--parts", "reads", "--no-merge"), est_quick_s=20, outputs=("many_small.json", "many_small_proteomes.json"),
          cut="the merge kernel (bare and through the engine) on reads_1 only, not on the "
              "26 K reads of all three files"),
    Bench("planner", "planner.py", est_full_s=40, est_quick_s=20),
    Bench("scaling", "scaling.py", est_full_s=80, quick=("--quick", "--nodes", "1,4"),
          est_quick_s=30),
    Bench("stealing", "stealing.py", est_full_s=215, quick=("--quick", "--nodes", "2"),
          est_quick_s=25),
    Bench("kernels_micro", "kernels_micro.py", est_full_s=20, est_quick_s=10),
    Bench("sw_micro", "sw_micro.py", est_full_s=25, est_quick_s=10),
    Bench("dense_layout", "dense_layout.py", est_full_s=30, est_quick_s=30),
    Bench("tile_costs", "tile_costs.py", full=("--reps", "1"), est_full_s=300, est_quick_s=80,
          cut="one run of each variant, not 2 interleaved"),
    Bench("dashboard", "dashboard.py", est_full_s=150, est_quick_s=40),
    Bench("scale", "scale.py", est_full_s=600, est_quick_s=40,
          cut="reads and synthetic items at n = 10^3, 10^4, 10^5; 10^6 reads (~1 h on 2 cores) "
              "only by `benchmarks/scale.py --reads 1000000 --no-synthetic --kill-after 900`"),
)
BY_NAME = {b.name: b for b in BENCHMARKS}


def command(b: Bench, quick: bool) -> list[str]:
    return [sys.executable, os.path.join(HERE, b.script), *(b.quick if quick else b.full)]


def shown(argv: list[str]) -> str:
    """A command as typed from the repository's root."""
    out = []
    for a in argv:
        rel = os.path.relpath(a, ROOT) if os.path.isabs(a) else a
        out.append(rel if not rel.startswith("..") else a)
    return shlex.join(out)


def default_out(quick: bool) -> str:
    base = os.path.join(HERE, "out")
    return os.path.join(base, "quick") if quick else base


def _run_one(b: Bench, quick: bool, out: str, log_dir: str) -> dict:
    argv = command(b, quick)
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PAIRFLOW_BENCH_OUT": out}
    log = os.path.join(log_dir, f"{b.name}.log")
    t0 = time.time()
    with open(log, "w") as fh:
        fh.write(f"$ {shown(argv)}\n")
        fh.flush()
        code = subprocess.run(argv, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL).returncode
    return {"name": b.name, "command": shown(argv), "returncode": code,
            "elapsed_s": round(time.time() - t0, 1), "log": log,
            "outputs": list(b.json_names()), "cut": "" if quick else b.cut}


def _tail(path: str, n: int = 15) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-n:])
    except OSError:
        return ""


def run(names: list[str], quick: bool, out: str) -> list[dict]:
    """Run ``names`` one after another under one progress bar; returns what each did."""
    from rich.console import Console
    from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    log_dir = os.path.join(out, "logs")
    os.makedirs(log_dir, exist_ok=True)
    chosen = [BY_NAME[n] for n in names]
    est = {b.name: (b.est_quick_s if quick else b.est_full_s) for b in chosen}
    console = Console(stderr=True)
    done: list[dict] = []
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                  TextColumn("{task.fields[step]}"), TimeElapsedColumn(),
                  TextColumn("eta"), TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("pairflow bench", total=sum(est.values()), step="")
        base = 0.0
        for i, b in enumerate(chosen):
            bar.update(task, step=f"{i + 1}/{len(chosen)} {b.name}")
            stop = threading.Event()

            def tick(b=b, base=base):
                # advance within a benchmark by its elapsed time, never past its estimate
                t0 = time.time()
                while not stop.wait(1.0):
                    bar.update(task, completed=base + min(time.time() - t0,
                                                          0.95 * est[b.name]))
            th = threading.Thread(target=tick, daemon=True)
            th.start()
            try:
                rec = _run_one(b, quick, out, log_dir)
            finally:
                stop.set()
                th.join()
            base += est[b.name]
            bar.update(task, completed=base)
            done.append(rec)
            state = "ok" if rec["returncode"] == 0 else f"FAILED (exit {rec['returncode']})"
            bar.console.print(f"{b.name}: {state} in {rec['elapsed_s']:.0f} s "
                              f"(estimated {est[b.name]:.0f} s): {rec['command']}")
            if rec["returncode"] != 0:
                bar.console.print(_tail(rec["log"]), markup=False, highlight=False)
    return done


def _write_manifest(out: str, quick: bool, records: list[dict]) -> str:
    path = os.path.join(out, "bench_run.json")
    old = {}
    if os.path.exists(path):  # runs of --only keep the records of the benchmarks not rerun
        with open(path) as fh:
            old = {r["name"]: r for r in json.load(fh).get("benchmarks", [])}
    for r in records:
        old[r["name"]] = r
    with open(path, "w") as fh:
        json.dump({"quick": quick, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                   "benchmarks": [old[b.name] for b in BENCHMARKS if b.name in old]},
                  fh, indent=1)
    return path


def listing(quick: bool) -> str:
    lines, total = [], 0.0
    for b in BENCHMARKS:
        est = b.est_quick_s if quick else b.est_full_s
        total += est
        lines.append(f"{b.name:14s} ~{est / 60:4.1f} min  {shown(command(b, quick))}")
        if b.cut and not quick:
            lines.append(f"{'':14s} cut: {b.cut}")
    lines.append(f"{'total':14s} ~{total / 60:4.1f} min (estimated, an idle 2-core machine)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="pairflow bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="each benchmark's quick mode (results under benchmarks/out/quick)")
    ap.add_argument("--only", nargs="+", metavar="NAME", choices=list(BY_NAME),
                    help=f"run these only ({', '.join(BY_NAME)})")
    ap.add_argument("--out", metavar="DIR",
                    help="JSON, logs, RESULTS.md and plots under DIR; the repository's files "
                    "are left alone")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: rebuild the report from the JSON already there")
    ap.add_argument("--no-report", action="store_true", help="run, but write no report")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args(argv)
    if args.list:
        print(listing(args.quick))
        return 0
    out = os.path.abspath(args.out) if args.out else default_out(args.quick)
    os.makedirs(out, exist_ok=True)
    failed = []
    if not args.report_only:
        names = args.only or list(BY_NAME)
        records = run(names, args.quick, out)
        _write_manifest(out, args.quick, records)
        failed = [r["name"] for r in records if r["returncode"] != 0]
    if not args.no_report:
        sys.path.insert(0, HERE)
        import report
        # the committed RESULTS.md, plots and README block only from a full run in the
        # repository's own output directory; any other run reports next to its JSON
        repo_run = args.out is None and not args.quick
        paths = report.build(out, results_md=None if repo_run else os.path.join(out, "RESULTS.md"),
                             plots_dir=None if repo_run else os.path.join(out, "plots"),
                             readme=report.README if repo_run else None)
        print(f"report: {paths['results_md']} ({len(paths['plots'])} plots in "
              f"{paths['plots_dir']})" + (f"; README block in {paths['readme']}"
                                           if paths.get("readme") else ""))
    if failed:
        print(f"failed: {', '.join(failed)} (logs in {os.path.join(out, 'logs')})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
