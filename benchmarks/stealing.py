"""Hierarchical scheduling benchmark: steals and round trips to the head on 1, 2 and 4 nodes.

    .venv/bin/python benchmarks/stealing.py            # the real sizes (a quiet machine)
    .venv/bin/python benchmarks/stealing.py --quick    # small, to prove it runs

For each node count a ``ray.cluster_utils.Cluster`` on this machine (a head with no CPU, worker
nodes of one CPU each, a host tier of S items per node) runs the same synthetic all-pairs run
twice: with one pull queue on the head (``hierarchical=false``) and with node frontiers and work
stealing (``hierarchical=true``). One device (node-1's) is slowed by ``--slow`` so the others
must steal. Reported per run: tiles, steals, hand-out round trips to the head (and per tile:
target <= 0.1 with frontiers, issue 15), tiles handed out inside nodes, R, wall and compute
seconds. All nodes share this machine's cores, so wall times say nothing about a cluster's
speedup; the counts are what this benchmark measures. Results: benchmarks/out/stealing.json.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from pairflow.apps.synthetic import SyntheticApp  # noqa: E402
from pairflow.engine.pairs.driver import allpairs  # noqa: E402
from _record import out_path, target, write  # noqa: E402


def one_cluster(nodes: int, n: int, leaf: int, t_cmp: float, slow: float, host_items: int,
                batch: int, runs: str) -> list[dict]:
    import ray
    from ray.cluster_utils import Cluster
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    for _ in range(nodes):
        cluster.add_node(num_cpus=1, **node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    out = []
    try:
        for hier in ("false", "true"):
            app = SyntheticApp(n, t_cmp=t_cmp, slow={"node-1/dev-0": slow})
            res = allpairs(app=app, runs_root=runs, leaf_items=leaf, progress=False, wait=True,
                           host_cache_items=host_items, hierarchical=hier, steal_batch=batch,
                           devices="cpu")
            s, sch = res.summary, res.summary["scheduling"]
            out.append({"nodes": nodes, "hierarchical": sch["hierarchical"],
                        "tiles": s["tiles_total"], "steals": sch["steals"],
                        "head_round_trips": sch["head_round_trips"],
                        "round_trips_per_tile": sch["round_trips_per_tile"],
                        "local_handouts": sch.get("local_handouts", 0), "R": s["R"],
                        "wall_s": s["wall_s"], "compute_s": s["compute_s"],
                        "run_dir": res.run_dir})
            print(json.dumps({k: v for k, v in out[-1].items() if k != "run_dir"}), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--slow", type=float, default=4.0)
    ap.add_argument("--out", default=None, help="default: benchmarks/out/stealing.json")
    args = ap.parse_args()
    started = time.time()
    if args.quick:
        size = dict(n=48, leaf=2, t_cmp=2e-4, host_items=12, batch=16)
    else:
        size = dict(n=400, leaf=8, t_cmp=2e-4, host_items=80, batch=16)
    runs = tempfile.mkdtemp(prefix="pf-steal-")
    rows = []
    for nodes in (int(x) for x in args.nodes.split(",")):
        rows += one_cluster(nodes, slow=args.slow, runs=runs, **size)
    hier = [r for r in rows if r["hierarchical"]]
    result = {"size": size, "slow": args.slow, "quick": args.quick, "runs": rows,
              "targets": {"round_trips_per_tile_max": 0.1,
                          "met": all(r["round_trips_per_tile"] <= 0.1 for r in hier),
                          "steals_on_unequal_nodes": all(r["steals"] > 0 for r in hier
                                                         if r["nodes"] > 1)}}
    goals = [target(f"{r['nodes']} node(s): hand-out round trips to the head per tile",
                    r["round_trips_per_tile"], "<=", 0.1) for r in hier]
    goals += [target(f"{r['nodes']} nodes, one device slowed: steals", r["steals"], ">", 0)
              for r in hier if r["nodes"] > 1]
    write(out_path("stealing.json", args.out), result, "stealing", quick=args.quick,
          started=started, targets=goals)
    print(json.dumps(result["targets"]))


if __name__ == "__main__":
    main()
