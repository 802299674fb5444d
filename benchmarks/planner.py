"""Planner benchmark: does the plan the driver picks by simulation load no more than the
Z-order/LRU baseline, in real runs, and what does choosing cost before a run?

    .venv/bin/python benchmarks/planner.py            # ~5 minutes on 2 cores
    .venv/bin/python benchmarks/planner.py --quick    # a synthetic stand-in, ~1 minute

(a) simulated: for n = 16, 120, 400 items and host tiers of 5..50 % of them (leaf n // 60, 2
    actors, 2 tiles under way each), R of every candidate (stripe, Hilbert, Z-order, each with next-use
    and LRU eviction), the one ``choose_plan`` picks, and the seconds the choice took.
(c) large runs, where the planner simulates the grid of leaf blocks (one item per block): the
    choice's seconds against the planner item by item (``MAX_SIM_VISITS`` lifted: the exact
    simulation, what it did before), side by side, with each candidate's R both ways; then a
    run's whole sizing (``sizing.plan_run``, its leaf search included) both ways.
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
sys.path.insert(0, ROOT)  # tests.oracles (the ragout genomes), not pairflow

from pairflow.engine.pairs.items import ItemMap  # noqa: E402
from pairflow.engine.pairs.plan.simulate import choose_plan  # noqa: E402
from pairflow.engine.pairs.space import Triangle  # noqa: E402
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


def _item_by_item(fn):
    """``fn()`` with the planner simulating every run item by item, as it did before it took
    large runs on their grid of leaf blocks (``simulate.MAX_SIM_VISITS`` lifted)."""
    from pairflow.engine.pairs.plan import simulate as sim
    kept, sim.MAX_SIM_VISITS = sim.MAX_SIM_VISITS, float("inf")
    try:
        return fn()
    finally:
        sim.MAX_SIM_VISITS = kept


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def part_c(cases=((2000, 25, 100), (10000, 125, 500), (10000, 125, 2000)),
           sized=((10000, 500),)) -> dict:
    """(n, leaf, S) ``cases`` large enough for the leaf-block grid (``MAX_SIM_VISITS``): the
    choice both ways; ``sized`` (n, S): a run's whole sizing (``plan_run``: the leaf search,
    a choice per candidate leaf) both ways, on one node of 2 CPUs."""
    from pairflow.engine.pairs.config import AllPairsConfig
    from pairflow.engine.pairs.plan.sizing import plan_run
    rows = []
    for n, leaf, s_items in cases:
        def choose():
            return choose_plan(Triangle(n), leaf, s_items, items=ItemMap.shared(n),
                               actors_per_node=2, in_flight=2)
        grid, took = _timed(choose)
        items, took_items = _timed(lambda: _item_by_item(choose))
        exact = items.simulated
        best = min(exact, key=exact.get)
        chosen = f"{grid.plan}/{grid.eviction}"
        worst = max(abs(grid.simulated[c] - r) / r for c, r in exact.items())
        rows.append({"n": n, "leaf": leaf, "S": s_items, "chosen": chosen,
                     "R_chosen_exact": exact[chosen], "best_exact": best,
                     "R_best_exact": exact[best], "R_blocks": grid.simulated, "R_exact": exact,
                     "max_rel_diff": worst, "choose_s": took, "exact_s": took_items,
                     "speedup": took_items / took, "note": grid.note})
        print(f"(c) n={n:5d} leaf={leaf} S={s_items:4d}: chose {chosen} in {took:.2f} s (item by "
              f"item: {best} in {took_items:.2f} s, {took_items / took:.1f}x); its exact R "
              f"{exact[chosen]:.2f} vs the best {exact[best]:.2f}; candidates' R on the grid "
              f"within {worst:.1%} of the exact", flush=True)
    node = [{"node_id": "n0", "address": "127.0.0.1", "head": True, "cpus": 2, "gpus": 0,
             "object_store": 1536 << 20}]
    sizing = []
    for n, s_items in sized:
        def size():
            return plan_run({"t_pair": 2e-4, "t_parse": 0.01, "item_bytes": 1e5}, Triangle(n),
                            None, node, AllPairsConfig(host_cache_items=s_items),
                            items=ItemMap.shared(n))
        grid, took = _timed(size)
        items, took_items = _timed(lambda: _item_by_item(size))
        sizing.append({"n": n, "S": s_items, "leaf": grid.leaf, "plan": grid.plan,
                       "eviction": grid.eviction, "leaf_items": items.leaf,
                       "plan_items": f"{items.plan}/{items.eviction}", "plan_s": took,
                       "plan_items_s": took_items, "speedup": took_items / took})
        print(f"(c) sizing n={n} S={s_items}: leaf {grid.leaf}, {grid.plan}/{grid.eviction} in "
              f"{took:.2f} s; item by item leaf {items.leaf}, {items.plan}/{items.eviction} in "
              f"{took_items:.2f} s ({took_items / took:.1f}x)", flush=True)
    return {"choices": rows, "sizing": sizing}


def part_b(runs_root: str, quick: bool) -> list[dict]:
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    if quick:
        from pairflow.apps.synthetic import SyntheticApp

        def app():
            return SyntheticApp(16, t_parse=0.01, item_floats=64)
    else:
        from pairflow.apps.jaccard import JaccardApp
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
    from pairflow.engine.run.runtime import init_ray
    runs_root = tempfile.mkdtemp(prefix="pairflow-planner-")
    results = {"quick": args.quick}
    try:
        results["a_simulated"] = part_a((16, 120) if args.quick else (16, 120, 400))
        results["c_large"] = part_c(((2000, 25, 100),), ()) if args.quick else part_c()
        init_ray(num_cpus=2, object_store_mb=1536)  # the CLI's default store
        results["b_real"] = part_b(runs_root, args.quick)
    finally:
        shutil.rmtree(runs_root, ignore_errors=True)
        real = {r["label"]: r["R"] for r in results.get("b_real", [])}
        goals = [target("(b) R planned / R Z-order+LRU, real run", real["planned"] /
                        real["zorder_lru"] if "planned" in real and "zorder_lru" in real
                        else None, "<=", 1.0)]
        goals += [target(f"(c) n={r['n']} S={r['S']}: exact R of the choice / the best's",
                         r["R_chosen_exact"] / r["R_best_exact"], "<=", 1.05)
                  for r in results.get("c_large", {}).get("choices", [])]
        write(out_path("planner.json", args.out), results, "planner", targets=goals,
              quick=args.quick, started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
