"""Scaling across nodes: loads from storage (R), bytes from storage and L3 directory hits per
hop, for 1, 2 and 4 real nodes with and without L3, and for 16 and 64 simulated nodes beside
Rocket's published R (6.7 on one node, 1.7 on sixteen).

    .venv/bin/python benchmarks/scaling.py            # the real sizes (a quiet machine)
    .venv/bin/python benchmarks/scaling.py --quick    # small, to prove it runs (< 2 min)
    .venv/bin/python benchmarks/scaling.py --grid     # issue 57's grid (~15 min here)
    .venv/bin/python benchmarks/scaling.py --grid-report benchmarks/out/scaling_grid.json

Issue 57's grid (``--grid``): the exact Jaccard of 241 loci as record packs (host tiers of 4, 8
and 16 leaves a node), of all 397 at 8 leaves, and of 120 as one file each (4 and 8 leaves), 2, 3
and 4 worker nodes
(``--grid-nodes``), each with L3
off and on, beside one node at the same tier and the planner's simulation of the run; targets:
with L3 never above one node's R and within 1.25x of the simulation in every cell, the median
R with L3 at most 0.6 of one node's at the most nodes run, storage with L3 at most half that
without (bytes, or loads for record packs). ``--grid-report`` prints RESULTS.md's table and
draws benchmarks/plots/scaling_grid.png from its JSON (``sections/scaling_grid.py``).

Real nodes: one ``ray.cluster_utils.Cluster`` on this machine (a head with no CPU, worker
nodes of one CPU each, small object stores), grown from 1 to 2 to 4 worker nodes; every run
has the same per-node host tier S, well below n. Each run's result is checked against a brute
force. Simulated nodes: ``engine/pairs/plan/simulate.py`` with the same cache and policy classes,
with one shared plan (what the engine runs today) and with the plan dealt to nodes in
contiguous shares (the hierarchical scheduling of issue 15, without stealing).

Targets (issue 15): R(4 nodes, L3) <= 1.1 x (1 + n/(8S)); bytes from storage with L3 at 4 nodes
<= 1/2 of those without; hand-out round trips to the head node <= 1 per 10 tiles (from
``summary.json: scheduling``: with more than one node the hierarchical scheduler's frontiers hand
out tiles and steal). Results go to benchmarks/out/scaling.json.

What this machine cannot show: every "node" here is a process on the same 2 cores, so a
speedup (super-linear or not) cannot be measured; loads, bytes and hits can, and are what this
reports.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # tests.parse_count (the runs' app), not pairflow
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# the cluster's workers import this checkout (its app for the runs lives in tests/parse_count.py)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)

import numpy as np  # noqa: E402

from pairflow.engine.pairs.plan.simulate import simulate  # noqa: E402
from _record import out_path, target, write  # noqa: E402
from pairflow.engine.pairs.space import Triangle  # noqa: E402

ROCKET_R = {1: 6.7, 16: 1.7}  # Rocket's published R (its figure: one node, sixteen nodes)
NO_SPEEDUP = ("A speedup cannot be measured on this machine: every node is a process on the "
              "same 2 cores. Loads from storage, bytes and directory hits are what it reports. "
              "With L3 the planner chooses between stripes dealt across the cluster "
              "(`StripePlan.deal`: the nodes stream the same columns in step) and contiguous "
              "shares of the one plan, simulating both with the nodes drifting apart "
              "(`drift.Timing`: one-CPU nodes time-sliced on two cores run columns apart, "
              "and a node more than its room of columns behind the one that loaded a column "
              "loads it again); its simulation of the run is beside the measured R.")


def _scheduling(summary: dict) -> dict:
    """Steals and hand-out round trips to the head (``summary.json: scheduling``)."""
    s = summary.get("scheduling") or {}
    return {"hierarchical": bool(s.get("hierarchical", s.get("frontiers"))),
            "steals": s.get("steals"), "head_round_trips": s.get("head_round_trips"),
            "tiles": summary.get("tiles_total"),
            "round_trips_per_tile": s.get("round_trips_per_tile")}


def _items(path: str, n: int, nbytes: int) -> list[str]:
    rng = np.random.default_rng(15)
    os.makedirs(path, exist_ok=True)
    out = []
    for i in range(n):
        p = os.path.join(path, f"item{i:04d}.bin")
        with open(p, "wb") as fh:
            fh.write(rng.integers(0, 256, nbytes, dtype=np.uint8).tobytes())
        out.append(p)
    return out


def real_runs(n: int, nbytes: int, host: int, leaf: int, workers=(1, 2, 4)) -> list[dict]:
    """Grow one Cluster and run with L3 off and on at each size (once at one node)."""
    import ray
    from ray.cluster_utils import Cluster

    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    from tests.parse_count import CountedBytes, parsed
    tmp = tempfile.mkdtemp(prefix="pf-scaling-")
    paths = _items(os.path.join(tmp, "items"), n, nbytes)
    vectors = np.stack([np.frombuffer(open(p, "rb").read(), np.uint8).astype(np.int64)
                        for p in paths])
    brute, iu = vectors @ vectors.T, np.triu_indices(n, 1)
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    out = []
    try:
        have = 0
        for k in workers:
            while have < k:
                cluster.add_node(num_cpus=1, **node)
                have += 1
            cluster.wait_for_nodes()
            if not ray.is_initialized():
                ray.init(address=cluster.address)
            for l3 in ((False,) if k == 1 else (False, True)):
                count = os.path.join(tmp, "parsed.txt")
                t0 = time.time()
                res = allpairs(app=CountedBytes(paths, count), sinks=[DenseMatrix()],
                               runs_root=os.path.join(tmp, "runs"), leaf_items=leaf,
                               host_cache_items=host, l3=l3, progress=False, wait=True)
                s = res.summary
                exact = bool(np.array_equal(res.matrix("dot")[iu], brute[iu]))
                out.append({
                    "nodes": k, "l3": l3, "n": n, "S": host, "R": s["R"], "loads": s["loads"],
                    "parse_calls": len(parsed(count)) - 2,  # less the driver's 2-item probe
                    "bytes_from_storage": s["tiers"]["source"]["bytes"],
                    "l3_hits_per_hop": s["l3"]["hits_per_hop"], "l3_misses": s["l3"]["misses"],
                    "l3_failed": s["l3"]["failed"], "tiles": s["tiles_total"],
                    # how the work fell on the nodes decides loads as much as L3 does: a node
                    # that joins late takes few tiles, and the run is then nearly one node's
                    "loads_per_node": {c["node"]: c.get("loads") for c in s["node_caches"]},
                    "exact": exact, "wall_s": time.time() - t0, "run_dir": res.run_dir,
                    # the planner's simulation of this very run (lockstep nodes): the modelled R
                    "plan": s.get("plan"), "simulated_R": ((s.get("plan_choice") or {}).get(
                        "simulated_R") or {}).get(f"{s.get('plan')}/{s.get('eviction')}"),
                    "scheduling": _scheduling(s)})
                print(f"  {k} node(s), L3 {'on ' if l3 else 'off'}: R {s['R']:.2f}, "
                      f"{s['tiers']['source']['bytes'] / 1e6:.1f} MB from storage, "
                      f"L3 hits per hop {s['l3']['hits_per_hop']}, loads per node "
                      f"{[c.get('loads') for c in s['node_caches']]}, exact {exact}", flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return out


GRID_NOTE = ("Issue 57's grid on this 2-core machine: the exact Jaccard of Klebsiella/"
             "Acinetobacter loci, 241 as record packs (host tiers of 4, 8 and 16 leaves a node), "
             "all 397 distinct loci as record packs (8 leaves: the one n ~ 400 cell, each of its "
             "runs ~2.6x the tiles of n = 241) and 120 as one file each (4 and 8 leaves), 2, 3 "
             "and 4 one-CPU worker nodes (and a 0-CPU head), each with L3 off and on, beside one "
             "node (threads, one CPU) at the same per-node tier and the planner's simulation of "
             "the plan each run ran (with the nodes drifting apart: drift.Timing). The planner "
             "chooses between stripes dealt across the cluster, paced (stealing.Pace: no node "
             "granted more than one streamed column ahead of the slowest, with 1, 2 or 3 leaves "
             "of room a node), and contiguous shares. A directory lookup claims the items no "
             "node holds for its asker, so paced nodes asking for a column together load it "
             "once. A dealt run that loads more than 1.25x its simulation re-deals what is left "
             "in contiguous shares only where those would load less over the tiles left (a "
             "course change); else it keeps its shares and records the drift.")


def _loci(where: str, n: int, as_files: bool) -> list[str]:
    """The first ``n`` loci of benchmarks/dense_layout.py's set (241), then those of Kaptive's
    other reference files (397 distinct loci in all): one FASTA, or a file each."""
    from benchmarks.dense_layout import FILES, loci_fasta
    from tests.oracles import KAPTIVE, read_sequences
    os.makedirs(where, exist_ok=True)
    fasta = loci_fasta(os.path.join(where, "loci.fa"))
    recs = open(fasta).read().split(">")[1:][:n]
    if len(recs) < n:  # past dense_layout's set: the loci of the other files, by name once
        seen = {r.split("\n", 1)[0] for r in recs}
        more = sorted(x for x in os.listdir(KAPTIVE) if x.endswith(".gbk") and x not in FILES)
        for f in [*FILES, *more]:  # dense_layout's files past its first 241, then the others
            for name, seq in read_sequences(os.path.join(KAPTIVE, f), "genbank"):
                if name not in seen and len(recs) < n:
                    seen.add(name)
                    recs.append(f"{name}\n{seq}\n")
    if len(recs) < n:
        raise SystemExit(f"only {len(recs)} distinct loci: a cell of n={n} cannot be made")
    if not as_files:
        path = os.path.join(where, f"first{n}.fa")
        with open(path, "w") as fh:
            fh.writelines(">" + r for r in recs)
        return [path]
    os.makedirs(os.path.join(where, "files"), exist_ok=True)
    out = []
    for k, rec in enumerate(recs):
        out.append(os.path.join(where, "files", f"locus{k:03d}.fa"))
        with open(out[-1], "w") as fh:
            fh.write(">" + rec)
    return out


def _cli_run(inputs: list[str], item: str, leaf: int, host: int, run_dir: str, *extra) -> dict:
    """One ``pairflow app=jaccard`` run as a user starts it; what its summary.json says."""
    import json
    import subprocess
    data = inputs[0] if item == "record" else os.path.join(os.path.dirname(inputs[0]), "*.fa")
    cmd = [sys.executable, "-m", "pairflow.apps.cli", "app=jaccard", f"data.inputs={data}",
           f"data.item={item}", f"cache.host_cache_items={host}",
           f"scheduler.leaf_items={leaf}", f"hydra.run.dir={run_dir}", "progress=false", *extra]
    t0 = time.time()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    choice = s.get("plan_choice") or {}
    l3 = s.get("l3") or {}
    return {"R": s["R"], "loads": s["loads"], "units": s.get("packs") or s["n_items"],
            "plan": s.get("plan"), "eviction": s.get("eviction"),
            "shares": choice.get("shares"), "expected_R": choice.get("expected_R"),
            "modes": choice.get("modes"), "one_node_sim_R": choice.get("one_node_R"),
            "bytes_from_storage": s["tiers"]["source"]["bytes"],
            "l3_hits": l3.get("hits", 0), "l3_misses": l3.get("misses", 0),
            # dealt runs are paced (stealing.Pace); a run past its simulation changes course
            "pace": choice.get("pace"), "room": choice.get("room"),
            "paced": (s.get("scheduling") or {}).get("paced"),
            "course_change": (s.get("scheduling") or {}).get("course_change"),
            # past the margin, but contiguous shares would have loaded more: course kept
            "course_drift": (s.get("scheduling") or {}).get("course_drift"),
            "l3_claims": l3.get("claims"),
            "wall_s": round(time.time() - t0, 1), "run_dir": run_dir,
            "command": "pairflow " + " ".join(cmd[4:])}


def _same_result(a: str, b: str) -> bool:
    """Two runs' dense matrices equal, field by field (the one-node run is the reference)."""
    import zarr
    ga, gb = (zarr.open_group(os.path.join(d, "result", "matrix.zarr"), mode="r") for d in (a, b))
    return all(np.array_equal(ga[f][:], gb[f][:]) for f, _ in ga.arrays())


def grid_runs(cells: list[dict], workers=(2, 3)) -> list[dict]:
    """Each cell's one-node run, then on one Cluster grown to each worker count, L3 off and on."""
    from ray.cluster_utils import Cluster
    tmp = tempfile.mkdtemp(prefix="pf-grid-")
    for c in cells:
        c["inputs"] = _loci(os.path.join(tmp, f"{c['storage']}-{c['n']}"), c["n"],
                            c["storage"] == "files")
        c["item"] = "file" if c["storage"] == "files" else "record"
        c["host"] = c["tier_leaves"] * c["leaf"]
        c["name"] = f"{c['storage']} n={c['n']} tier={c['tier_leaves']} leaves"
        c["dir"] = f"{c['storage']}-{c['n']}-tier{c['tier_leaves']}"  # (Hydra: no '=')
    out = []
    for c in cells:
        one = _cli_run(c["inputs"], c["item"], c["leaf"], c["host"],
                       os.path.join(tmp, "runs", c["dir"], "one"),
                       "cluster=inprocess", "cluster.num_cpus=1")
        c["one"] = one
        print(f"  {c['name']}: one node R {one['R']:.2f}", flush=True)
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    try:
        have = 0
        for k in workers:
            while have < k:
                cluster.add_node(num_cpus=1, **node)
                have += 1
            cluster.wait_for_nodes()
            for c in cells:
                if k not in c.get("nodes", workers):  # a cell measured on fewer shapes
                    continue
                for l3 in (False, True):
                    where = os.path.join(tmp, "runs", c["dir"], f"{k}-{'on' if l3 else 'off'}")
                    r = _cli_run(c["inputs"], c["item"], c["leaf"], c["host"], where,
                                 "cluster=ray", f"cluster.ray_address={cluster.address}",
                                 f"cache.l3={str(l3).lower()}")
                    r.update(cell=c["name"], storage=c["storage"], n=c["n"], leaf=c["leaf"],
                             tier_leaves=c["tier_leaves"], nodes=k, l3=l3,
                             one_node_R=c["one"]["R"],
                             one_node_bytes=c["one"]["bytes_from_storage"],
                             exact=_same_result(c["one"]["run_dir"], where))
                    out.append(r)
                    print(f"  {c['name']}, {k} nodes, L3 {'on ' if l3 else 'off'}: R "
                          f"{r['R']:.2f} (expected {r['expected_R']}, {r['shares']} shares; "
                          f"one node {r['one_node_R']:.2f}), exact {r['exact']}", flush=True)
    finally:
        cluster.shutdown()
    return out


def grid_targets(grid: list[dict]) -> dict:
    """Issue 57's acceptance over the grid's cells."""
    from sections.scaling_grid import storage_ratio
    on = [r for r in grid if r["l3"]]
    if not on:
        return {}
    never_worse = sum(r["R"] <= r["one_node_R"] for r in on)
    near_sim = sum(r["expected_R"] is not None and r["R"] <= 1.25 * r["expected_R"] for r in on)
    out = {"grid_L3_never_worse_than_one_node": {
               "value": never_worse / len(on), "target": ">= 1.0", "met": never_worse == len(on)},
           "grid_L3_within_1.25x_of_simulation": {
               "value": near_sim / len(on), "target": ">= 1.0", "met": near_sim == len(on)}}
    top = max(r["nodes"] for r in on)
    ratios = sorted(r["R"] / r["one_node_R"] for r in on if r["nodes"] == top)
    med = ratios[len(ratios) // 2]
    out[f"grid_median_R_L3_over_one_node_at_{top}_nodes"] = {
        "value": med, "target": "<= 0.6", "met": med <= 0.6}
    pairs = {(r["cell"], r["nodes"]): r for r in grid if not r["l3"]}
    byt = sorted(storage_ratio(r, pairs[(r["cell"], r["nodes"])])
                 for r in on if (r["cell"], r["nodes"]) in pairs)
    if byt:
        out["grid_median_storage_bytes_L3_over_off"] = {
            "value": byt[len(byt) // 2], "target": "<= 0.5", "met": byt[len(byt) // 2] <= 0.5}
    return out


def simulated(n: int, leaf: int, host: int, nodes=(1, 16, 64)) -> list[dict]:
    out = []
    for k in nodes:
        for deal in ((False,) if k == 1 else (False, True)):
            for l3 in ((False,) if k == 1 else (False, True)):
                r = simulate(Triangle(n), leaf, host, nodes=k, l3=l3, deal=deal)
                out.append({"nodes": k, "l3": l3, "plan": "dealt" if deal else "shared",
                            "n": n, "S": host, "R": r.R, "l3_hits_per_hop": r.l3_hits,
                            "rocket_R": ROCKET_R.get(k)})
    return out


def targets(real: list[dict]) -> dict:
    four = {r["l3"]: r for r in real if r["nodes"] == 4}
    out = {}
    if True in four:
        on = four[True]
        bound = 1.1 * (1 + on["n"] / (8 * on["S"]))
        out["R_4_nodes_L3"] = {"value": on["R"], "target": f"<= {bound:.3f}",
                               "met": on["R"] <= bound}
    if True in four and False in four:
        ratio = four[True]["bytes_from_storage"] / max(1, four[False]["bytes_from_storage"])
        out["storage_bytes_L3_over_no_L3"] = {"value": ratio, "target": "<= 0.5",
                                              "met": ratio <= 0.5}
    if True in four:
        trips = four[True]["scheduling"].get("round_trips_per_tile")
        out["head_round_trips_per_tile"] = {"value": trips, "target": "<= 0.1",
                                            "met": None if trips is None else trips <= 0.1}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-real", action="store_true", help="simulated nodes only")
    ap.add_argument("--nodes", default="1,2,4", help="real node counts (default 1,2,4)")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/scaling.json")
    ap.add_argument("--grid", action="store_true",
                    help="issue 57's grid (loci records and files, tiers of 4 and 8 leaves, "
                         "2 and 3 nodes) instead of the issue 15 runs")
    ap.add_argument("--grid-nodes", default="2,3,4")
    ap.add_argument("--grid-cells", default=None, metavar="STORAGE:N:TIER,...",
                    help="only these cells of the grid, e.g. records:241:4,files:120:4")
    ap.add_argument("--grid-report", metavar="JSON",
                    help="print the grid's table from a scaling_grid.json and plot it")
    args = ap.parse_args()
    started = time.time()
    print(NO_SPEEDUP)
    if args.quick:
        real_kw = dict(n=32, nbytes=50_000, host=8, leaf=4)  # S: two leaves of rows
    else:
        # S = 8 leaves: the model 1 + n/(8S) assumes a leaf well below S (with S = 4 leaves,
        # the two leaves of room for the streamed columns are half the host tier)
        real_kw = dict(n=96, nbytes=200_000, host=16, leaf=2)
    sim_kw = dict(n=256, leaf=4, host=24)  # one node's R near Rocket's 6.7
    t0 = time.time()
    if args.grid_report:
        import json
        from sections.scaling_grid import grid_markdown, plot_grid
        data = json.load(open(args.grid_report))
        print(grid_markdown(data))
        print(plot_grid(data, os.path.join(ROOT, "benchmarks", "plots", "scaling_grid.png")))
        return
    if args.grid:
        cells = [dict(storage="records", n=241, leaf=6, tier_leaves=4),
                 dict(storage="records", n=241, leaf=6, tier_leaves=8),
                 dict(storage="records", n=241, leaf=6, tier_leaves=16),
                 dict(storage="files", n=120, leaf=4, tier_leaves=4),
                 dict(storage="files", n=120, leaf=4, tier_leaves=8),
                 # n ~ 400: every distinct Kaptive locus, one tier (each run is ~2.6x the
                 # tiles of n = 241: a second tier would take the grid past 15 minutes here)
                 dict(storage="records", n=397, leaf=6, tier_leaves=8)]
        if args.grid_cells:  # a part of the grid (a check; --out keeps the recorded JSON)
            cells = [c for c in cells if any(
                f"{c['storage']}:{c['n']}:{c['tier_leaves']}" == want
                for want in args.grid_cells.split(","))]
        grid = grid_runs(cells, tuple(int(x) for x in args.grid_nodes.split(",")))
        met = grid_targets(grid)
        for name, t in met.items():
            print(f"  target {name}: {t['value']:.3f} (target {t['target']}): "
                  f"{'met' if t['met'] else 'NOT met'}")
        write(out_path("scaling_grid.json", args.out), {
            "note": GRID_NOTE, "grid": grid, "targets": met, "wall_s": time.time() - t0,
            "one_node": [{k: v for k, v in c.items() if k != "inputs"} for c in cells]},
            "scaling_grid", started=started,
            targets=[target(n, t["value"], t["target"].split()[0], float(t["target"].split()[1]))
                     for n, t in met.items()])
        return
    real = [] if args.no_real else real_runs(
        **real_kw, workers=tuple(int(x) for x in args.nodes.split(",")))
    sim = simulated(**sim_kw)
    for r in sim:
        rocket = f"   (Rocket: {r['rocket_R']})" if r["rocket_R"] else ""
        print(f"  simulated {r['nodes']:>2} node(s), {r['plan']:<6} plan, L3 "
              f"{'on ' if r['l3'] else 'off'}: R {r['R']:.2f}, hits per hop "
              f"{r['l3_hits_per_hop']}{rocket}")
    met = targets(real)
    for name, t in met.items():
        state = "not measured" if t["met"] is None else ("met" if t["met"] else "NOT met")
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        print(f"  target {name}: {value} (target {t['target']}): {state}")
    out = {"quick": args.quick, "note": NO_SPEEDUP, "real": real, "simulated": sim,
           "targets": met, "rocket_R": ROCKET_R, "wall_s": time.time() - t0,
           "config": {"real": real_kw, "simulated": sim_kw}}
    write(out_path("scaling.json", args.out), out, "scaling", quick=args.quick, started=started,
          targets=[target(name, t["value"], t["target"].split()[0], float(t["target"].split()[1]))
                   for name, t in met.items() if t["value"] is not None])


if __name__ == "__main__":
    main()
