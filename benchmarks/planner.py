"""Planner benchmark: does the plan the driver picks by simulation load no more than the
Z-order/LRU baseline, in real runs, and what does choosing cost before a run?

    .venv/bin/python benchmarks/planner.py            # ~5 minutes on 2 cores
    .venv/bin/python benchmarks/planner.py --quick    # a synthetic stand-in, ~1 minute

(a) simulated: for n = 16, 120, 400 items and host tiers of 5..50 % of them (leaf n // 60, 2
    actors, 2 tiles under way each), R of every candidate (stripe, Hilbert, Z-order, each with next-use
    and LRU eviction), the one ``choose_plan`` picks, and the seconds the choice took.
(b) real runs of issue 19's case, 16 genomes and a host tier of 4 items: R of the planned run
    (plan=auto), of the baseline (zorder/lru) and of the old default (stripe/next_use), each
    beside its simulated R. ``--quick`` runs the synthetic app with 16 items instead.

Results go to benchmarks/out/planner.json; benchmarks/RESULTS.md keeps the latest figures.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine.pairs.items import ItemMap  # noqa: E402
from engine.pairs.simulate import choose_plan  # noqa: E402
from engine.pairs.space import Triangle  # noqa: E402
from _record import out_path, target, write  # noqa: E402


def part_a(sizes=(16, 120, 400), fractions=(0.05, 0.10, 0.25, 0.50)) -> list[dict]:
    rows = []
    for n in sizes:
        leaf = max(1, n // 60)  # about 1,800 tiles: simulated on the run's own grid
        for f in fractions:
            s_items = max(2, round(f * n))
            t0 = time.perf_counter()
            choice = choose_plan(Triangle(n), leaf, s_items, items=ItemMap.shared(n),
                                 actors_per_node=2, in_flight=2)
            took = time.perf_counter() - t0
            rows.append({"n": n, "leaf": leaf, "S": s_items,
                         "chosen": f"{choice.plan}/{choice.eviction}", "R_chosen": choice.R,
                         "R": choice.simulated, "choose_s": took, "note": choice.note})
            print(f"(a) n={n:4d} leaf={leaf} S={s_items:4d}: {choice.describe()} "
                  f"[chosen in {took:.3f} s]", flush=True)
    return rows


def part_b(runs_root: str, quick: bool) -> list[dict]:
    from engine import DenseMatrix
    from engine.pairs.driver import allpairs
    if quick:
        from apps.synthetic import SyntheticApp

        def app():
            return SyntheticApp(16, t_parse=0.01, item_floats=64)
    else:
        from apps.jaccard import JaccardApp
        from tests.oracles import RAGOUT
        paths = sorted(glob.glob(os.path.join(RAGOUT, "*/references/*.fasta.gz")))
        if len(paths) != 16:
            raise SystemExit(f"expected the 16 ragout genomes under {RAGOUT}")

        def app():
            return JaccardApp(paths, k=21)
    rows = []
    for label, plan, eviction in (("planned", "auto", "auto"), ("zorder_lru", "zorder", "lru"),
                                  ("stripe_next_use", "stripe", "next_use")):
        res = allpairs(app=app(), sink=DenseMatrix(), runs_root=runs_root, progress=False,
                       wait=True, host_cache_items=4, plan=plan, eviction=eviction)
        s = res.summary
        row = {"label": label, "plan": s["plan"], "eviction": s["eviction"], "R": s["R"],
               "leaf": s["leaf_items"], "wall_s": s["wall_s"],
               "simulated_R": (s["plan_choice"] or {}).get("simulated_R")}
        rows.append(row)
        print(f"(b) {label:16s} {s['plan']}/{s['eviction']}: R {s['R']:.3f} "
              f"({s['plan_choice']['line']})", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/planner.json")
    args = ap.parse_args(argv)
    started = time.time()
    from engine.run.runtime import init_ray
    runs_root = tempfile.mkdtemp(prefix="pairflow-planner-")
    results = {"quick": args.quick}
    try:
        results["a_simulated"] = part_a((16, 120) if args.quick else (16, 120, 400))
        init_ray(num_cpus=2, object_store_mb=1536)  # the CLI's default store
        results["b_real"] = part_b(runs_root, args.quick)
    finally:
        shutil.rmtree(runs_root, ignore_errors=True)
        real = {r["label"]: r["R"] for r in results.get("b_real", [])}
        goals = [target("(b) R planned / R Z-order+LRU, real run", real["planned"] /
                        real["zorder_lru"] if "planned" in real and "zorder_lru" in real
                        else None, "<=", 1.0)]
        write(out_path("planner.json", args.out), results, "planner", targets=goals,
              quick=args.quick, started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
