"""All-pairs peers, side by side in one run: pairflow as a user runs it against what a user would
otherwise write for the same job, on four cases.

    .venv/bin/python benchmarks/peers.py                  # 4 cases x 5 contenders x 3 repetitions
    .venv/bin/python benchmarks/peers.py --quick          # the loci case, once: proves it runs
    .venv/bin/python benchmarks/peers.py --cases reads,loci --reps 2

The cases and the peers' scripts are ``benchmarks/peer_jobs.py``'s (its docstring: the 16
genomes, the 162 Klebsiella loci as records, 10,000 reads with the bitset kernel and a top 10,
the 16 proteomes' composition vectors and their tree). The contenders, each timed from outside
as a fresh process, from its start (interpreter and imports included) to its exit with the
answer written:

* ``pairflow (CLI, cold)``: the ``pairflow`` command with the case's arguments, its defaults
  otherwise (``executor=auto``: it picks in-process or Ray itself);
* ``pairflow (session, warm)``: ``pairflow.session(num_cpus=2)`` in a process that stays up for
  the whole benchmark (Ray up, actors warm: each case ran once, untimed, before the first
  repetition); timed inside it from building the app to the outputs written;
* ``multiprocessing``, ``dask.array`` (blockwise), ``dask.bag`` (product): scripts a user would
  write (``peer_jobs.PEERS``), run as ``python benchmarks/peer_jobs.py CASE PEER OUT``.

Repetitions are interleaved (each repetition runs every case's contenders one after the other,
in an order rotated by one each repetition) and each contender's median is reported, with the
machine's load before each run. Every contender's answer is checked against pairflow's (dense:
max abs difference; top-k: every item's 10 best scores). A run past ``--limit`` seconds (or
``LIMIT_X`` times the case's fastest median so far, at least ``LIMIT_MIN_S``) is stopped: its
time counts as that limit, a lower bound (``censored``), so its row's ratio is one too. Results: benchmarks/out/peers.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from _record import ROOT, out_path, target, write

import peer_jobs as jobs

PY = sys.executable
PAIRFLOW = os.path.join(os.path.dirname(PY), "pairflow")
JOBS = os.path.join(ROOT, "benchmarks", "peer_jobs.py")
COLD, WARM = "pairflow (CLI, cold)", "pairflow (session, warm)"


def _run(cmd: list[str], limit: float, log) -> tuple[float | None, str]:
    """Wall seconds of ``cmd`` from start to exit (None: past ``limit``, stopped), stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, ""
    t = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode} (log: {log.name})")
    return t, out


def read_pairflow(case: str, outputs: dict) -> dict:
    """pairflow's answer as ``{"keys", "matrix" | "top"}`` (the peers' shape)."""
    if jobs.is_topk(case):
        import pandas as pd
        d = pd.read_parquet(outputs["topk"]).sort_values(["qi", "rank"])
        keys = list(dict.fromkeys(d["query"]))
        top = np.full((len(keys), jobs.TOP_K), np.nan)
        pos = {k: i for i, k in enumerate(keys)}
        for q, s in d.groupby("query", sort=False)["score"]:
            v = np.sort(s.to_numpy())[::-1][:jobs.TOP_K]
            top[pos[q], :len(v)] = v
        return {"keys": keys, "top": top}
    import zarr
    g = zarr.open_group(outputs["dense"], mode="r")
    m = np.array(g[jobs.FIELD[case]][...], float)
    np.fill_diagonal(m, 0.0)
    return {"keys": [str(k) for k in g.attrs["row_keys"]], "matrix": m}


def read_peer(path: str) -> dict:
    z = np.load(path, allow_pickle=True)
    out = {"keys": [str(k) for k in z["keys"]]}
    if "top" in z:
        out["top"] = z["top"]
    else:
        u = z["matrix"]
        out["matrix"] = u + u.T
    return out


def difference(a: dict, b: dict) -> float:
    """Max abs difference of two answers, items matched by key (inf: not the same items)."""
    if sorted(a["keys"]) != sorted(b["keys"]):
        return float("inf")
    ia = np.argsort(a["keys"])
    ib = np.argsort(b["keys"])
    if "top" in a:
        x, y = a["top"][ia], b["top"][ib]
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return float("inf")
        return float(np.nanmax(np.abs(x - y))) if x.size else 0.0
    return float(np.max(np.abs(a["matrix"][np.ix_(ia, ia)] - b["matrix"][np.ix_(ib, ib)])))


class Warm:
    """The warm session's process: a case a line in, one JSON line out."""

    def __init__(self, runs_root: str, log):
        self.proc = subprocess.Popen([PY, JOBS, "--warm", runs_root], cwd=ROOT, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                     start_new_session=True)
        self._answer()

    def _answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        raise RuntimeError("the warm session's process ended")

    def run(self, case: str) -> dict:
        self.proc.stdin.write(case + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)


def contender(name: str, case: str, work: str, limit: float, warm: Warm | None, log):
    """One timed run: (seconds or None, the answer or None, extra facts)."""
    if name == WARM:
        got = warm.run(case)
        return got["wall_s"], read_pairflow(case, got["outputs"]), {
            "executor": got["executor"], "compute_s": got["compute_s"]}
    if name == COLD:
        root = tempfile.mkdtemp(prefix="runs-", dir=work)
        t, out = _run([PAIRFLOW, f"runs_root={root}", "progress=false",
                       *jobs.CASES[case]["args"]], limit, log)
        if t is None:
            return None, None, {}
        outputs = dict(re.findall(r"^(dense|topk): (\S+)$", out, re.M))
        summary = json.load(open(os.path.join(os.path.dirname(os.path.dirname(
            next(iter(outputs.values())))), "summary.json")))
        ans = read_pairflow(case, outputs)
        shutil.rmtree(root, ignore_errors=True)
        return t, ans, {"executor": summary.get("executor"),
                        "compute_s": summary.get("compute_s"), "run_wall_s": summary["wall_s"],
                        "startup_s": summary.get("phases", {}).get("startup_s")}
    path = os.path.join(work, f"{case}-{name}.npz")
    t, _ = _run([PY, JOBS, case, name, path], limit, log)
    if t is None:
        return None, None, {}
    ans = read_peer(path)
    os.remove(path)
    return t, ans, {}


LIMIT_X, LIMIT_MIN_S = 4.0, 60.0


def limit_for(rows_case: dict, cap: float) -> float:
    """A run's limit: ``LIMIT_X`` times the median of the case's contenders' medians so far
    (at least ``LIMIT_MIN_S``), never past ``cap``; ``cap`` before any run finished."""
    best = median([median(r["runs"]) for r in rows_case.values()])
    return min(cap, max(LIMIT_MIN_S, LIMIT_X * best)) if best else cap


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarise(case: str, rows: dict) -> dict:
    """Medians, the fastest peer, and per row the ratio (peer / pairflow: above 1, pairflow
    is faster) and wins or loses, for the cold CLI and the warm session."""
    out = {"what": jobs.CASES[case]["what"],
           "command": " ".join(["pairflow", *jobs.CASES[case]["args"]]), "contenders": rows}
    for r in rows.values():
        # a stopped run counts as its limit: a lower bound on its time
        bounded = [x if x is not None else lim
                   for x, lim in zip(r["runs"], r.get("limits") or [None] * len(r["runs"]))]
        r["median_s"] = median(bounded)
        r["timed_out"] = sum(x is None for x in r["runs"])
        r["censored"] = r["timed_out"] > 0
    peers = {k: r for k, r in rows.items() if k in jobs.PEERS}
    done = {k: r["median_s"] for k, r in peers.items() if r["median_s"] is not None}
    out["fastest_peer"] = min(done, key=done.get) if done else None
    for who, key in ((COLD, "cold"), (WARM, "warm")):
        ours = rows.get(who, {}).get("median_s")
        ratios = {}
        for k, r in peers.items():
            theirs = r["median_s"] if r["median_s"] is not None else float("inf")
            ratios[k] = theirs / ours if ours else None
        out[f"{key}_ratios"] = ratios
        best = ratios.get(out["fastest_peer"]) if out["fastest_peer"] else None
        out[f"{key}_vs_fastest"] = best
        out[f"{key}_wins"] = best is not None and best >= 1.0
    return out


def record(rows: dict, args, reps_done: int, started: float) -> None:
    """The JSON of the repetitions done so far (written after each: a run stopped early keeps
    its complete repetitions)."""
    results, goals = build(rows, args, reps_done)
    write(out_path("peers.json", args.out), results, "peers", targets=goals, quick=args.quick,
          started=started)


def build(rows: dict, args, reps_done: int) -> tuple[dict, list]:
    """The results and targets of ``rows`` (contender -> runs, limits, loads, differences)."""
    import copy
    rows = copy.deepcopy(rows)
    cases = list(rows)
    results = {"quick": args.quick, "reps": reps_done, "cases": {}, "workers": jobs.WORKERS}
    for case in cases:
        for r in rows[case].values():
            r["max_abs_diff_vs_pairflow"] = max(r.pop("diff"), default=None)
            r["load_mean"] = round(float(np.mean(r["load"])), 2) if r["load"] else None
        results["cases"][case] = s = summarise(case, rows[case])
        print(f"{case:9s} fastest peer {s['fastest_peer']}: cold x{s['cold_vs_fastest']}, "
              f"warm x{s.get('warm_vs_fastest')}", flush=True)
    loads = [x for c in rows.values() for r in c.values() for x in r["load"]]
    results["load_mean"] = round(float(np.mean(loads)), 2) if loads else None
    goals = [target(f"cold CLI at least as fast as the fastest peer: {c}",
                    s["cold_vs_fastest"], ">=", 1.0) for c, s in results["cases"].items()]
    if not args.no_warm:
        goals.append(target("warm session at least as fast as the fastest peer: cases won",
                            sum(s["warm_wins"] for s in results["cases"].values()), ">=",
                            min(3, len(cases))))
    goals += [target(f"same answer as pairflow: {c}, {n}", r["max_abs_diff_vs_pairflow"], "<=",
                     1e-9) for c, s in results["cases"].items()
              for n, r in s["contenders"].items() if n not in (COLD,)]
    return results, goals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the loci case, one repetition")
    ap.add_argument("--cases", default=None, help=f"comma-separated, of {', '.join(jobs.CASES)}")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    ap.add_argument("--limit", type=float, default=600.0, help="seconds a run may take")
    ap.add_argument("--no-warm", action="store_true", help="leave out the warm session")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/peers.json")
    args = ap.parse_args(argv)
    started = time.time()
    # a SIGTERM unwinds (the warm session's Ray is stopped in ``finally``)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cases = (args.cases.split(",") if args.cases else
             ["loci"] if args.quick else list(jobs.CASES))
    reps = args.reps or (1 if args.quick else 3)
    names = [COLD] + ([] if args.no_warm else [WARM]) + list(jobs.PEERS)
    rows = {c: {n: {"runs": [], "limits": [], "load": [], "diff": []} for n in names} for c in cases}
    with tempfile.TemporaryDirectory(prefix="pairflow-peers-") as work:
        log = open(os.path.join(work, "log.txt"), "w")
        warm = None
        if not args.no_warm:
            warm = Warm(os.path.join(work, "warm-runs"), log)
            for case in cases:  # each case once, untimed: Ray up, actors warm
                warm.run(case)
        try:
            for rep in range(reps):
                for ci, case in enumerate(cases):
                    order = names[(rep + ci) % len(names):] + names[:(rep + ci) % len(names)]
                    answers, ref = {}, None
                    for name in order:
                        limit = limit_for(rows[case], args.limit)
                        row = rows[case][name]
                        row["limits"].append(limit)
                        row["load"].append(round(os.getloadavg()[0], 2))
                        t, ans, info = contender(name, case, work, limit, warm, log)
                        row["runs"].append(t)
                        row.update(info)
                        answers[name] = ans
                        print(f"rep {rep + 1} {case:9s} {name:26s} "
                              f"{'stopped' if t is None else f'{t:7.2f} s'} "
                              f"(load {row['load'][-1]})", flush=True)
                    ref = answers.get(COLD) or answers.get(WARM)
                    for name, ans in answers.items():
                        if ans is not None and ref is not None:
                            rows[case][name]["diff"].append(difference(ans, ref))
                record(rows, args, rep + 1, started)
        finally:
            if warm is not None:
                warm.close()
            log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
