"""Cluster benchmark: devices of unequal speed finishing together.

    .venv/bin/python benchmarks/cluster.py            # the real sizes (a quiet machine, >= 4 cores)
    .venv/bin/python benchmarks/cluster.py --quick    # small, to prove it runs

Three device actors whose compares are slowed by factors 1, 2 and 4 (``SyntheticApp(slow=...)``)
share one run. Targets (issue 14): every actor's last tile ends within 10 % of the run's compute
time of the others', and the run's throughput is at least 0.9 x the sum of each actor's solo
throughput (each factor run alone, one actor). The hand-out is pull-based, so a faster device
simply asks more often; the end spread is about one tile, which the leaf size bounds.
Results go to benchmarks/out/cluster.json.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from apps.synthetic import SyntheticApp  # noqa: E402
from engine.pairs.driver import allpairs  # noqa: E402
from engine.run.rundir import read_jsonl  # noqa: E402
from engine.run.runtime import init_ray  # noqa: E402
from _record import out_path, target, write  # noqa: E402


def _run(runs: str, n: int, t_cmp: float, slow: dict, actors: int, leaf: int | None) -> dict:
    app = SyntheticApp(n, t_cmp=t_cmp, slow=slow)
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
                    leaf: int | None = None) -> dict:
    slow = {f"node-0/dev-{d}": float(f) for d, f in enumerate(factors)}
    solo = {f: _run(runs, n, t_cmp, {"node-0/dev-0": float(f)}, 1, leaf)["pairs_per_s"]
            for f in factors}
    together = _run(runs, n, t_cmp, slow, len(factors), leaf)
    ends = list(together["ends_s"].values())
    out = {"n": n, "t_cmp": t_cmp, "factors": list(factors), "solo_pairs_per_s": solo,
           "together": together,
           "end_spread": (max(ends) - min(ends)) / together["span_s"],
           "throughput_ratio": together["pairs_per_s"] / sum(solo.values())}
    out["targets_met"] = out["end_spread"] <= 0.10 and out["throughput_ratio"] >= 0.9
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, to prove it runs")
    ap.add_argument("--n", type=int, default=None, help="items (default 300; 40 with --quick)")
    ap.add_argument("--t-cmp", type=float, default=None,
                    help="seconds per compare (default 0.002; 0.0005 with --quick)")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/cluster.json")
    args = ap.parse_args(argv)
    started = time.time()
    n, t_cmp = (40, 0.0005) if args.quick else (300, 0.002)
    n, t_cmp = args.n or n, args.t_cmp or t_cmp
    init_ray(num_cpus=4, object_store_mb=512)
    with tempfile.TemporaryDirectory() as runs:
        result = unequal_devices(runs, n, t_cmp)
    result["cores"] = os.cpu_count()
    write(out_path("cluster.json", args.out), result, "cluster", quick=args.quick,
          started=started,
          targets=[target("end spread / compute time", result["end_spread"], "<=", 0.10),
                   target("throughput / sum of solo throughputs", result["throughput_ratio"],
                          ">=", 0.9)])
    t = result["together"]
    ends = ", ".join(f"{a} {e:.2f}s" for a, e in sorted(t["ends_s"].items()))
    print(f"factors {result['factors']}: ends {ends}"
          f" (spread {result['end_spread']:.1%} of {t['span_s']:.2f}s), pairs "
          f"{dict(sorted(t['pairs'].items()))}, throughput {result['throughput_ratio']:.2f} x "
          f"the sum of solo runs; targets met: {result['targets_met']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
