"""Scale on one machine (issue 58, part 4): 10^3 to 10^6 items through the ``pairflow`` command.

    .venv/bin/python benchmarks/scale.py                          # reads 10^3..10^5, synthetic
    .venv/bin/python benchmarks/scale.py --reads 1000000 --synthetic --kill-after 600
    .venv/bin/python benchmarks/scale.py --quick                  # 10^3 only: checks it runs

Reads: ``n`` reads of 150 bp simulated, seeded, from the 16 ragout genomes
(``pairflow.apps.reads_sim``: 1 % substitutions, either strand), exact canonical k-mer Jaccard
at k = 7 with the top 10 per read (``app=jaccard data.item=record sink=topk sink.k=10``: the
many_small reads setup, the bitset kernel ``auto`` picks). Synthetic: ``app=synthetic`` with no
burnt cost (``synthetic.t_cmp=0``: its compiled compare, each tile straight to its rows' and
columns' top 10 by ``compare_reduced``), items loaded a tile side at a time
(``synthetic.packs=true``), the same TopK(10) sink.

Each run is the ``pairflow`` command as a user types it, in a process tree of its own whose
memory is sampled every 0.5 s from /proc (``tree_memory.py``: the sum of the RSS of the command
and every process below it, Ray's daemons and workers included; PSS beside it, which counts a
shared page once), with a line every 30 s of elapsed time, the tree's memory and the run's own
progress line (its ETA). Per n: wall time, compute seconds, the peak, tiles and leaf, files
under the run's ``result/``, the per-tile overhead (``summary.json: tile_costs``: an actor's
time per tile on no compare, beside its time per tile), the engine's pairs/s of compute against
a bare kernel's on the same kind of pairs (reads: the plain popcount loop of many_small.py on 2
threads, and the engine's own top-k kernel bare, over all pairs of the first ``--bare-rows``
reads; synthetic: the compare as a plain numpy script over cache-sized chunks on 2 threads,
over all pairs up to 10^9 of them, else over chunks drawn from the same triangle: the app's
int64 expression and the int32 residue form, the faster of the two), and the processes at the
peak.

Exactness, against ``scale_oracle.py`` (no pairflow import): the whole top-k at n <= 10^3
(every read's 10 best from the full matrix), ``--sample`` reads' top 10 against all n at larger
n. ``--kill-after S`` kills the run's whole process tree S seconds in (SIGKILL, every process
by id) and resumes it with ``pairflow resume=true run_dir=...``; the resumed result is checked.

Results: benchmarks/out/scale.json (report section ``sections/scale.py``). A run's folders
stay under ``--work`` (default: a temporary directory, removed at the end unless ``--keep``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PAIRFLOW = os.path.join(os.path.dirname(sys.executable), "pairflow")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import numpy as np  # noqa: E402

import scale_oracle as oracle  # noqa: E402
from scale_bare import bare_synthetic  # noqa: E402
from tree_memory import TreeSampler, sample, tree  # noqa: E402

K, TOP = 7, 10
GIB = 2 ** 30


def _progress_line(log: str) -> str:
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log) - 4096))
            lines = [x for x in fh.read().decode(errors="replace").splitlines()
                     if "[pairflow]" in x]
        return lines[-1].strip() if lines else ""
    except OSError:
        return ""


def _journaled(run_dir: str | None) -> int:
    try:
        with open(os.path.join(run_dir, "journal.jsonl"), "rb") as fh:
            return fh.read().count(b'{"tile"')
    except (OSError, TypeError):
        return 0


def run_tree(argv: list[str], log: str, kill_after: float | None = None,
             timeout: float | None = None, label: str = "", run_dir: str | None = None,
             kill_tiles: int = 0) -> dict:
    """``argv`` with its tree's memory sampled; a line every 30 s. ``kill_after``: SIGKILL
    every process of the tree then, once ``run_dir``'s journal holds ``kill_tiles`` tiles
    (a killed run), returns ``killed``."""
    import subprocess
    t0 = time.time()
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    sampler = TreeSampler(proc.pid, 0.5).start()
    stop = threading.Event()

    def beat():
        while not stop.wait(30):
            now = sample(proc.pid)
            print(f"  [{label} {time.time() - t0:6.0f} s] tree {now['rss'] / GIB:.2f} GiB "
                  f"({now['procs']} processes)  {_progress_line(log)[:150]}", flush=True)
    threading.Thread(target=beat, daemon=True).start()
    killed = False
    try:
        while True:
            try:
                code = proc.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                spent = time.time() - t0
                if (kill_after is not None and spent >= kill_after
                        and _journaled(run_dir) >= kill_tiles) or \
                        (timeout is not None and spent >= timeout):
                    raise
    except subprocess.TimeoutExpired:
        for pid in reversed(tree(proc.pid)):  # every process of the run, by id
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
        code, killed = -9, True
    stop.set()
    peak = sampler.stop()
    return {"returncode": code, "killed": killed, "seconds": time.time() - t0,
            "peak_rss": peak["rss"], "peak_pss": peak["pss"], "processes": peak["procs"],
            "at_peak": [[name, rss, pss] for name, rss, pss in sampler.at_peak[:12]],
            "timeline": sampler.timeline[::max(1, len(sampler.timeline) // 200)]}


def files_under(path: str) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def pairs_computed(run_dir: str, s: dict) -> int:
    """The pairs this run's compute phase did: all of them, or for a resumed run those of the
    tiles it recomputed, the last of ``tiles.jsonl``'s records (finished tiles are appended in
    time, the run before the kill's first). ``pairs_total / compute_s`` of a resume would
    credit its seconds with the killed run's tiles too."""
    r = s.get("resumed") or {}
    redone = int(r.get("recomputed", 0)) + int(r.get("repaired", 0))
    if not r.get("reused"):
        return int(s["pairs_total"])
    with open(os.path.join(run_dir, "tiles.jsonl")) as fh:
        records = [json.loads(line) for line in fh if line.strip()]
    return int(sum(rec["pairs"] for rec in records[-redone:])) if redone else 0


def tile_costs(s: dict) -> dict:
    """``summary.json: tile_costs`` where the run wrote it, else the same figures from its
    actors and stage seconds (an actor's busy time per tile, and its part on no compare)."""
    if s.get("tile_costs", {}).get("per_tile_overhead_s") is not None:
        return dict(s["tile_costs"], source="summary.tile_costs")
    actors = s.get("actors") or {}
    tiles = sum(int(a.get("tiles", 0)) for a in actors.values())
    busy = sum(float(a.get("busy_s", 0.0)) for a in actors.values())
    st = s.get("stage_seconds") or {}
    compute = float(st.get("compare", 0.0)) + float(st.get("postprocess", 0.0))
    if not tiles:
        return {"per_tile_overhead_s": None, "overhead_share": None, "source": "stage_seconds"}
    over = max(0.0, busy - compute) / tiles
    return {"tiles": tiles, "per_tile_overhead_s": over, "tile_seconds": busy / tiles,
            "overhead_share": over / (busy / tiles) if busy else None,
            "write_s_per_tile": float(st.get("write", 0.0)) / tiles, "source": "stage_seconds"}


def probe_run(kind: str, n: int, data: str | None, run_dir: str, log: str,
              seconds: float) -> dict:
    """The first ``seconds`` of a run too long to finish here, then killed: the tree's peak
    memory so far (start-up, the parse, packs flowing), where it is, and the run's own
    progress line (tiles done, pairs/s, ETA)."""
    r = run_tree(_argv(kind, n, data, run_dir), log, seconds, None, f"{kind} {n:,} probe")
    line = _progress_line(log)
    return {"kind": kind, "n": n, "probe_s": seconds, "finished": not r["killed"],
            "progress": line,
            "peak_rss": r["peak_rss"], "peak_pss": r["peak_pss"], "processes": r["processes"],
            "at_peak": r["at_peak"], "timeline": r["timeline"]}


def _argv(kind: str, n: int, data: str | None, run_dir: str) -> list[str]:
    if kind == "reads":
        argv = [PAIRFLOW, "app=jaccard", f"data.inputs=[{data}]", "data.item=record",
                f"data.k={K}"]
    else:
        argv = [PAIRFLOW, "app=synthetic", f"synthetic.n={n}", "synthetic.t_cmp=0.0",
                "synthetic.item_floats=1", "synthetic.packs=true"]
    return argv + ["sink=topk", f"sink.k={TOP}", f"run_dir={run_dir}", "progress=true"]


def engine_run(kind: str, n: int, data: str | None, run_dir: str, log: str,
               kill_after: float | None, timeout: float | None) -> dict:
    argv = _argv(kind, n, data, run_dir)
    runs = [run_tree(argv, log, kill_after, timeout, f"{kind} {n:,}", run_dir, kill_tiles=1)]
    if runs[0]["killed"]:
        print(f"  killed {kind} n={n:,} after {runs[0]['seconds']:.0f} s; resuming", flush=True)
        runs.append(run_tree([PAIRFLOW, "resume=true", f"run_dir={run_dir}", "progress=true"],
                             log, None, timeout, f"{kind} {n:,} resumed"))
    last = runs[-1]
    if last["returncode"] != 0:
        raise SystemExit(f"{kind} n={n}: pairflow exited {last['returncode']} (log {log})")
    with open(os.path.join(run_dir, "summary.json")) as fh:
        s = json.load(fh)
    out = {"n": n, "items": s["n_items"], "pairs": s["pairs_total"], "wall_s": s["wall_s"],
           "command_s": sum(r["seconds"] for r in runs), "compute_s": s["compute_s"],
           "pairs_computed": pairs_computed(run_dir, s), "tiles": s["tiles_total"],
           "leaf": s["leaf_items"], "executor": s.get("executor"),
           "peak_rss": max(r["peak_rss"] for r in runs),
           "peak_pss": max(r["peak_pss"] for r in runs),
           "processes": max(r["processes"] for r in runs),
           "at_peak": max(runs, key=lambda r: r["peak_rss"])["at_peak"],
           "timeline": runs[-1]["timeline"],
           "files_in_result": files_under(os.path.join(run_dir, "result")),
           "result_bytes": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in
                               os.walk(os.path.join(run_dir, "result")) for f in fs),
           "tile_costs": tile_costs(s), "phases": s.get("phases"),
           "stage_seconds": s.get("stage_seconds"), "plan": s.get("plan"),
           "resumed": s.get("resumed"), "argv": argv}
    out["pairs_per_s"] = out["pairs_computed"] / s["compute_s"]
    if len(runs) > 1:
        out["killed_after_s"] = runs[0]["seconds"]
        out["killed_peak_rss"] = runs[0]["peak_rss"]
        out["resumed_peak_rss"] = runs[1]["peak_rss"]
    return out


def _topk_of_run(run_dir: str, queries: list[int], index_of) -> dict:
    import pyarrow.parquet as pq
    table = pq.read_table(os.path.join(run_dir, "result", "topk.parquet"),
                          columns=["query", "target", "score", "rank"]).to_pandas()
    qidx = table["query"].map(index_of).to_numpy()
    want = set(queries)
    rows = table[np.isin(qidx, list(want))].assign(q=qidx[np.isin(qidx, list(want))])
    got = {}
    for q, part in rows.sort_values(["q", "rank"]).groupby("q"):
        got[int(q)] = ([index_of(t) for t in part["target"]], part["score"].to_numpy())
    return got


def check_reads(path: str, run_dir: str, n: int, sample_n: int, seed: int) -> dict:
    t0 = time.time()
    names, seqs = oracle.read_fastx(path)
    sets = oracle.ReadSets(seqs, K)
    pos = {name: i for i, name in enumerate(names)}

    def index_of(key: str) -> int:
        return pos[key.split("/", 1)[1]]
    whole = n <= 1000
    if whole:
        queries = [i for i in range(n) if sets.sizes[i] > 0]
        matrix = sets.matrix()
        want = {q: oracle.top_k(matrix[q], q, TOP) for q in queries}
    else:
        rng = np.random.default_rng(seed)
        queries = sorted(int(q) for q in rng.choice(np.flatnonzero(sets.sizes > 0),
                                                    sample_n, replace=False))
        want = {q: oracle.top_k(row, q, TOP) for q, row in sets.jaccard_of(queries).items()}
    bad = oracle.compare_topk(_topk_of_run(run_dir, queries, index_of), want)
    return {"mode": "whole top-k (full matrix)" if whole else "sampled reads vs all",
            "queries": len(queries), "mismatches": len(bad), "examples": bad[:3],
            "seconds": time.time() - t0}


def check_synthetic(run_dir: str, n: int, sample_n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    queries = list(range(n)) if n <= 1000 else sorted(int(q) for q in
                                                       rng.choice(n, sample_n, replace=False))
    want = {q: oracle.top_k(oracle.synthetic_values(q, n), q, TOP) for q in queries}
    bad = oracle.compare_topk(_topk_of_run(run_dir, queries, lambda key: int(key[4:])), want)
    return {"mode": "whole top-k" if n <= 1000 else "sampled items vs all",
            "queries": len(queries), "mismatches": len(bad), "examples": bad[:3]}


def bare_reads(path: str, rows: int) -> dict:
    """The plain popcount loop and the engine's top-k kernel, bare, on 2 threads, over all
    pairs of the first ``rows`` reads (many_small.py's ``bare``)."""
    import many_small
    from pairflow.kernels.bitset import kmer_bitsets
    _, seqs = oracle.read_fastx(path)
    bits = kmer_bitsets(seqs[:rows], K)
    bits = np.ascontiguousarray(bits[bits.any(axis=1)])
    return {"rows": len(bits), "popcount": many_small.bare(bits, "popcount"),
            "topk": many_small.bare(bits, "topk")}


def case(kind: str, n: int, args, work: str, kill: float | None = None,
         tag: str = "") -> dict:
    print(f"{kind} n={n:,}{tag}", flush=True)
    data = None
    if kind == "reads":
        from pairflow.apps.reads_sim import simulate_reads
        data = os.path.join(work, f"reads-{n}-seed{args.seed}.fq")
        if not os.path.exists(data):
            t0 = time.time()
            simulate_reads(n, data, seed=args.seed)
            print(f"  simulated {n:,} reads in {time.time() - t0:.1f} s: {data}", flush=True)
    run_dir = os.path.join(work, f"run-{kind}-{n}{tag}")
    shutil.rmtree(run_dir, ignore_errors=True)
    log = os.path.join(work, f"run-{kind}-{n}{tag}.log")
    if args.probe_s and n >= args.probe_from:
        out = probe_run(kind, n, data, run_dir, log, args.probe_s)
        print(f"  probe: {out['probe_s']:.0f} s, peak {out['peak_rss'] / GIB:.2f} GiB RSS "
              f"({out['peak_pss'] / GIB:.2f} PSS); {out['progress']}", flush=True)
        return out
    out = engine_run(kind, n, data, run_dir, log, kill, args.timeout)
    out["log"] = log
    if kind == "reads":
        out["exact"] = check_reads(data, run_dir, n, args.sample, args.seed)
        out["bare"] = bare_reads(data, args.bare_rows)
        out["engine_vs_bare"] = out["pairs_per_s"] / out["bare"]["popcount"]["pairs_per_s"]
        out["engine_vs_bare_topk"] = out["pairs_per_s"] / out["bare"]["topk"]["pairs_per_s"]
    else:
        out["exact"] = check_synthetic(run_dir, n, args.sample, args.seed)
        out["bare"] = bare_synthetic(n)
        out["engine_vs_bare"] = out["pairs_per_s"] / out["bare"]["compare"]["pairs_per_s"]
    tc = out["tile_costs"]
    print(f"  {out['items']:,} items, {out['pairs']:,} pairs: wall {out['wall_s']:.1f} s "
          f"(compute {out['compute_s']:.1f} s, {out['pairs_per_s'] / 1e6:.1f} M pairs/s, "
          f"{out['engine_vs_bare']:.2f} of bare), peak {out['peak_rss'] / GIB:.2f} GiB RSS "
          f"({out['peak_pss'] / GIB:.2f} PSS), {out['tiles']:,} tiles of {out['leaf']}, "
          f"{out['files_in_result']:,} files, per-tile overhead "
          f"{1e3 * (tc.get('per_tile_overhead_s') or 0):.1f} ms "
          f"({100 * (tc.get('overhead_share') or 0):.1f} %), exact: "
          f"{out['exact']['mismatches']} mismatches in {out['exact']['queries']} queries",
          flush=True)
    return out


def _at(cases: list[dict], n: int) -> dict | None:
    return next((c for c in cases if c["n"] == n), None)


def targets(results: dict) -> list[dict]:
    from _record import target
    reads, synth = results["reads"], results["synthetic"]
    big = _at(reads, 1_000_000)
    resumed = [c for c in reads + synth + [results.get("resume") or {}]
               if c.get("killed_after_s") is not None]
    largest = max(reads, key=lambda c: c["n"]) if reads else None
    goals = [
        target("10^6 reads, k = 7, top 10: peak memory of the process tree",
               big and big["peak_rss"] / GIB, "<=", 8.0, "GiB"),
        target("10^6 reads: engine / bare popcount pairs/s", big and big["engine_vs_bare"],
               ">=", 0.5, "x"),
        target("a killed run resumes, exact", (all(c["exact"]["mismatches"] == 0
                                                  for c in resumed) if resumed else None),
               "==", True),
        target("exact against brute force, every case",
               sum(c["exact"]["mismatches"] for c in reads + synth), "==", 0),
    ]
    if largest:
        goals.append(target(f"per-tile overhead share, {largest['n']:,} reads",
                            largest["tile_costs"].get("overhead_share"), "<=", 0.10, "x"))
    big_synth = max(synth, key=lambda c: c["n"]) if synth else None
    if big_synth:
        goals.append(target(f"per-tile overhead share, {big_synth['n']:,} synthetic items",
                            big_synth["tile_costs"].get("overhead_share"), "<=", 0.10, "x"))
    drv = results.get("driver_at_1e6_tiles_gib")
    goals.append(target("driver memory at 10^6 tiles (benchmarks/tiles_at_scale.py)",
                        drv, "<=", 2.0, "GiB"))
    return goals


def driver_at_tiles() -> float | None:
    """The driver's memory at 10^6 tiles, as benchmarks/tiles_at_scale.py recorded it."""
    from _record import out_dir
    path = os.path.join(out_dir(), "tiles_at_scale.json")
    try:
        with open(path) as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        return None
    for key in ("driver_peak_gib", "driver_rss_gib", "peak_gib"):
        if isinstance(d.get(key), (int, float)):
            return float(d[key])
    return None


def main(argv: list[str] | None = None) -> int:
    from _record import out_path, write
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reads", type=int, nargs="*", default=[1000, 10_000, 100_000],
                    help="read counts (1000000: ~40 min of compute on 2 quiet cores)")
    ap.add_argument("--synthetic-n", type=int, nargs="*", default=[1000, 10_000, 100_000])
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--sample", type=int, default=200, help="reads checked at n > 1000")
    ap.add_argument("--bare-rows", type=int, default=30_000,
                    help="the reads' bare kernels run over all pairs of this many reads")
    ap.add_argument("--resume-n", type=int, default=None,
                    help="one more reads run of this n, killed --kill-after seconds in and "
                    "resumed (results['resume'])")
    ap.add_argument("--kill-after", type=float, default=None,
                    help="seconds into the --resume-n run (or, without it, the largest reads "
                    "run) when its process tree is killed")
    ap.add_argument("--probe-s", type=float, default=None,
                    help="runs of n >= --probe-from: only their first this many seconds, "
                    "then killed (memory and progress of a run too long to finish)")
    ap.add_argument("--probe-from", type=int, default=1_000_000)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per pairflow run")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None, help="inputs and runs (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep --work's runs")
    ap.add_argument("--quick", action="store_true", help="n = 1000 only")
    ap.add_argument("--merge", action="store_true",
                    help="keep the cases of the JSON there that this run does not redo")
    ap.add_argument("--out", default=None, help="the JSON (default benchmarks/out/scale.json)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reads, args.synthetic_n = [1000], [1000]
    if args.no_synthetic:
        args.synthetic_n = []
    started = time.time()
    work = args.work or tempfile.mkdtemp(prefix="pairflow-scale-")
    os.makedirs(work, exist_ok=True)
    results = {"k": K, "top": TOP, "read_length": 150, "error": 0.01, "seed": args.seed,
               "reads": [], "synthetic": [], "probes": [], "resume": None}
    if args.merge and os.path.exists(out_path("scale.json", args.out)):
        # the cases of an earlier run kept, those run now replacing theirs (same kind and n)
        with open(out_path("scale.json", args.out)) as fh:
            old = json.load(fh)
        rec = old.pop("_record", None) or {}
        results["earlier_runs"] = (old.get("earlier_runs") or []) + \
            [{"command": rec.get("command"), "date": rec.get("date")}]
        redo = {("reads", n) for n in args.reads} | {("synthetic", n) for n in args.synthetic_n}
        for key in ("reads", "synthetic", "probes"):
            results[key] = [c for c in old.get(key) or []
                            if (c.get("kind", key), c["n"]) not in redo]
        results["resume"] = None if args.resume_n else old.get("resume")
        # what was not run, said by hand: kept while its kind and n are not run now
        results["not_run"] = [x for x in old.get("not_run") or []
                              if not any(x.startswith(f"{k} n = {n:,}:") for k, n in redo)]
    results["driver_at_1e6_tiles_gib"] = driver_at_tiles()
    from tiles_at_scale import for_scale  # its killed-and-resumed 10^6-tile run, as recorded
    results["tiles_at_scale"] = for_scale()

    def save():  # after every case: a long run killed later keeps what it measured
        write(out_path("scale.json", args.out), results, "scale", targets=targets(results),
              quick=args.quick, started=started)
    try:
        for n in sorted(args.reads):
            kill = args.kill_after if args.resume_n is None and n == max(args.reads) else None
            c = case("reads", n, args, work, kill)
            results["probes" if "probe_s" in c else "reads"].append(dict(c, kind="reads"))
            results["reads"].sort(key=lambda c: c["n"])
            save()
        for n in sorted(args.synthetic_n):
            c = case("synthetic", n, args, work)
            results["probes" if "probe_s" in c else "synthetic"].append(dict(c, kind="synthetic"))
            results["synthetic"].sort(key=lambda c: c["n"])
            save()
        if args.resume_n and args.kill_after:
            results["resume"] = case("reads", args.resume_n, args, work, args.kill_after,
                                     "-resumed")
            save()
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
