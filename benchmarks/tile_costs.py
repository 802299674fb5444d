"""What a tile costs beyond its compares, and the leaf chosen with it (issue 58, part 2).

The exact Jaccard of the 241 loci of ``dense_layout.py`` (one FASTA, ``data.item=record``), on
both executors (in process and a local Ray), two cases:

* ``host24``: ``cache.host_cache_items=24``, the issue's run. Before: the stripe rule's leaf of
  6 (860 tiles), what the planner took for packed items (it never searched their leaf);
  after: the leaf searched with every tile's measured fixed cost (``plan/tile_cost.py``).
* ``default``: the default host tier (it holds every item). Before: one fixed cost of 20 ms a
  tile for every executor (``scheduler.tile_overhead_s=0.02``, the old default); after: the
  executor's, measured.

Each pair of runs interleaved, ``--reps`` times, each a ``pairflow`` command as a user types
it; from each run's ``summary.json``: leaf, tiles, the compute phase's seconds, the CPU seconds
of the command and its children, and ``tile_costs`` (an actor's time per tile and the part of
it spent on no compare):

    .venv/bin/python benchmarks/tile_costs.py [--reps 2] [--executors inprocess,local]

writes benchmarks/out/tile_costs.json (report.py's section). ``--quick``: one rep, in process.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

CASES = {  # case -> (its options, the before variant's options)
    "host24": (["cache.host_cache_items=24"], ["scheduler.leaf_items=6"]),
    "default": ([], ["scheduler.tile_overhead_s=0.02"]),
}


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(fasta: str, run_dir: str, options: list[str]) -> dict:
    cmd = [sys.executable, "-m", "pairflow.apps.cli", "app=jaccard", f"data.inputs={fasta}",
           "data.item=record", f"hydra.run.dir={run_dir}", "progress=false", *options]
    c0 = cpu_children()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    cpu = cpu_children() - c0
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    costs = s.get("tile_costs") or {}
    return {"leaf": s["leaf_items"], "tiles": s["tiles_total"], "executor": s["executor"],
            "compute_s": s["compute_s"], "wall_s": s["wall_s"], "cpu_s": cpu, "R": s["R"],
            "compare_s": s["stage_seconds"]["compare"],
            "per_tile_overhead_s": costs.get("per_tile_overhead_s"),
            "tile_seconds": costs.get("tile_seconds"),
            "overhead_share": costs.get("overhead_share"),
            "modelled_overhead_s": costs.get("modelled_overhead_s")}


def median_of(runs: list[dict]) -> dict:
    out = {}
    for key in runs[0]:
        vals = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = statistics.median(vals) if vals and len(vals) == len(runs) else runs[0][key]
    return out


def main() -> None:
    from _record import out_path, target, write
    from dense_layout import loci_fasta
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--executors", default="inprocess,local",
                    help="cluster groups: inprocess (threads) and local (a Ray of its own)")
    ap.add_argument("--cases", default="host24,default")
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="one rep, in process")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.executors = 1, "inprocess"
    where = args.work or tempfile.mkdtemp(prefix="pairflow-tile-costs-")
    os.makedirs(where, exist_ok=True)
    fasta = loci_fasta(os.path.join(where, "first241.fa"))
    rows = []
    load0 = os.getloadavg()[0]
    for case in args.cases.split(","):
        opts, before_opts = CASES[case]
        for cluster in args.executors.split(","):
            runs: dict[str, list] = {"before": [], "after": []}
            for rep in range(args.reps):
                for variant in ("before", "after"):  # interleaved: the same load for both
                    extra = before_opts if variant == "before" else []
                    run_dir = os.path.join(where, f"{case}-{cluster}-{variant}-{rep}")
                    got = one_run(fasta, run_dir, [f"cluster={cluster}", *opts, *extra])
                    runs[variant].append(got)
                    print(json.dumps({"case": case, "cluster": cluster, "variant": variant,
                                      **got}), flush=True)
            for variant, found in runs.items():
                rows.append({"case": case, "cluster": cluster, "variant": variant,
                             "reps": len(found), **median_of(found), "runs": found})
    out = {"n": 241, "reps": args.reps, "rows": rows,
           "load_avg_1m": [load0, os.getloadavg()[0]]}

    def share(case, cluster):
        return next((r["overhead_share"] for r in rows if r["case"] == case
                     and r["cluster"] == cluster and r["variant"] == "after"), None)
    targets = [target(f"per-tile overhead share at the leaf chosen, {case}, {cluster}",
                      share(case, cluster), "<=", 0.10)
               for case in ("default",) for cluster in args.executors.split(",")
               if share(case, cluster) is not None]
    write(out_path("tile_costs.json", args.out), out, "tile_costs", quick=args.quick,
          targets=targets)


if __name__ == "__main__":
    main()
