"""Cluster benchmark: devices of unequal speed finishing together.

    .venv/bin/python benchmarks/cluster.py                # the real sizes, both modes
    .venv/bin/python benchmarks/cluster.py --mode wait    # one mode
    .venv/bin/python benchmarks/cluster.py --quick        # small, to prove it runs

Three device actors whose compares are slowed by factors 1, 2 and 4 (``SyntheticApp(slow=...)``)
share one run. Targets (issue 14): every actor's last tile ends within 10 % of the run's compute
time of the others', and the run's throughput is at least 0.9 x the sum of each actor's solo
throughput (each factor run alone, one actor). The hand-out is pull-based, so a faster device
simply asks more often; the end spread is about one tile, which the leaf size bounds.

Two modes, reported apart:

* ``wait``: a compare waits (sleeps) for its cost times the factor, as a host waits on a GPU
  kernel. Three actors need no three cores, so the scheduling question (do unequal devices
  finish together, is nothing lost) is measured even on a 2-core machine.
* ``burn``: a compare burns this machine's CPU for that long. With fewer cores than actors
  (3 actors on 2 cores) they contend, the factors are no longer the devices' speeds and the
  targets cannot be judged: the figures say how the run behaves on an oversubscribed host.

Results go to benchmarks/out/cluster.json.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from pairflow.apps.synthetic import SyntheticApp  # noqa: E402
from pairflow.engine.pairs.driver import allpairs  # noqa: E402
from pairflow.engine.run.rundir import read_jsonl  # noqa: E402
from pairflow.engine.run.runtime import init_ray  # noqa: E402
from _record import out_path, target, write  # noqa: E402


def _run(runs: str, n: int, t_cmp: float, slow: dict, actors: int, leaf: int | None,
         wait: bool = False) -> dict:
    app = SyntheticApp(n, t_cmp=t_cmp, slow=slow, wait=wait)
    res = allpairs(app=app, runs_root=runs, progress=False, wait=True, actors_per_node=actors,
                   leaf_items=leaf, devices="cpu")
    tiles = read_jsonl(os.path.join(res.run_dir, "tiles.jsonl"))
    start = min(t["t_start"] for t in tiles)
    ends, pairs = {}, {}
    for t in tiles:
        ends[t["actor"]] = max(ends.get(t["actor"], 0.0), t["t_end"] - start)
        pairs[t["actor"]] = pairs.get(t["actor"], 0) + t["pairs"]
    span = max(ends.values())
    return {"span_s": span, "pairs_per_s": res.summary["pairs_total"] / span, "ends_s": ends,
            "pairs": pairs, "leaf": res.summary["leaf_items"]}


def unequal_devices(runs: str, n: int, t_cmp: float, factors=(1, 2, 4),
                    leaf: int | None = None, wait: bool = False) -> dict:
    slow = {f"node-0/dev-{d}": float(f) for d, f in enumerate(factors)}
    # a small run first, not measured: the first run also pays for Ray's worker processes and
    # the compiled kernels' first load, which would be charged to the first solo run
    _run(runs, 40, t_cmp, slow, len(factors), leaf, wait)
    solo = {f: _run(runs, n, t_cmp, {"node-0/dev-0": float(f)}, 1, leaf, wait)["pairs_per_s"]
            for f in factors}
    together = _run(runs, n, t_cmp, slow, len(factors), leaf, wait)
    ends = list(together["ends_s"].values())
    out = {"mode": "wait" if wait else "burn", "cores": os.cpu_count(),
           "n": n, "t_cmp": t_cmp, "factors": list(factors), "solo_pairs_per_s": solo,
           "together": together,
           "end_spread": (max(ends) - min(ends)) / together["span_s"],
           "throughput_ratio": together["pairs_per_s"] / sum(solo.values())}
    out["targets_met"] = out["end_spread"] <= 0.10 and out["throughput_ratio"] >= 0.9
    # burning compares on fewer cores than actors contend: the factors are not the speeds
    out["judgeable"] = wait or len(factors) <= (os.cpu_count() or 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, to prove it runs")
    ap.add_argument("--mode", choices=("both", "wait", "burn"), default="both",
                    help="wait: compares wait on a modelled device; burn: they burn the CPU")
    ap.add_argument("--n", type=int, default=None, help="items, both modes (default 300)")
    ap.add_argument("--t-cmp", type=float, default=None,
                    help="seconds per compare, both modes (default 0.001 wait, 0.002 burn)")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/cluster.json")
    args = ap.parse_args(argv)
    started = time.time()
    # (n, t_cmp) per mode: waiting costs no core, so the wait mode's compares can be cheaper
    sizes = {"wait": (40, 0.0005), "burn": (40, 0.0005)} if args.quick else \
        {"wait": (300, 0.001), "burn": (300, 0.002)}
    sizes = {m: (args.n or n, args.t_cmp or t) for m, (n, t) in sizes.items()}
    modes = ("wait", "burn") if args.mode == "both" else (args.mode,)
    init_ray(num_cpus=4, object_store_mb=512)
    results = {}
    with tempfile.TemporaryDirectory() as runs:
        for mode in modes:
            results[mode] = unequal_devices(runs, *sizes[mode], wait=mode == "wait")
            _print(results[mode])
    targets = []
    for mode, r in results.items():  # only a judgeable mode's figures are held to the targets
        if r["judgeable"]:
            targets += [target(f"{mode}: end spread / compute time", r["end_spread"], "<=", 0.10),
                        target(f"{mode}: throughput / sum of solo throughputs",
                               r["throughput_ratio"], ">=", 0.9)]
    write(out_path("cluster.json", args.out), results, "cluster", quick=args.quick,
          started=started, targets=targets)
    return 0


LABELS = {"wait": "compares wait on a modelled device (sleep)",
          "burn": "compares burn the CPU ({actors} actors on {cores} cores{contend})"}


def _print(result: dict) -> None:
    t = result["together"]
    actors = len(result["factors"])
    label = LABELS[result["mode"]].format(
        actors=actors, cores=result["cores"],
        contend=": they contend, targets not judgeable" if actors > result["cores"] else "")
    ends = ", ".join(f"{a} {e:.2f}s" for a, e in sorted(t["ends_s"].items()))
    print(f"[{result['mode']}] {label}; n={result['n']} t_cmp={result['t_cmp']}: "
          f"factors {result['factors']}: ends {ends}"
          f" (spread {result['end_spread']:.1%} of {t['span_s']:.2f}s), pairs "
          f"{dict(sorted(t['pairs'].items()))}, solo pairs/s "
          f"{ {f: round(v, 1) for f, v in result['solo_pairs_per_s'].items()} }, throughput "
          f"{result['throughput_ratio']:.2f} x the sum of solo runs; targets met: "
          f"{result['targets_met']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
