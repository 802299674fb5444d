"""Align against what users run instead, end to end: ``pairflow app=align`` as the CLI runs it
by default, against pyopal and parasail with their own threads (``benchmarks/align_users.py``),
each side a fresh process on the same whole input, timed side by side, interleaved.

Why: the efficiency figures of ``benchmarks/align.py`` compare the engine with its own kernel
in one process, which no user runs; a user who wants the top hits of many proteins against a
database runs pyopal or parasail on two threads. End to end is the user's clock: start-up,
reading the FASTA, scoring, writing the top hits.

Per case (``cases``), repetition after repetition, the sides run one after the other in an
order that rotates each repetition; each side's figure is its best wall time (and the CPU
seconds of that run: this process's children, read from /proc, Ray's daemons included). An
alternative that took more than ``SKIP_AFTER`` times the fastest alternative's wall in the
first repetition is not repeated (it cannot be the best; its one run stays in the JSON). Every
side's top-k scores per query are checked equal to pairflow's (the ties may name other
targets, the scores may not differ).

``ratio`` = the best alternative's wall / pairflow's wall: pairflow's speed as a fraction of the
faster alternative; the target is >= 0.95 (issue 59).
"""
from __future__ import annotations

import glob
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
PAIRFLOW = os.path.join(os.path.dirname(PY), "pairflow")
SIDES = ("pairflow", "pyopal", "parasail")
SKIP_AFTER = 1.5
TARGET = 0.95
# the proteome case of issue 59: the first 100 proteins of S. aureus N315 against 20,000 of
# E. coli MG1655, four V. cholerae and H. pylori ELS37 (in that order)
DB_FILES = ("E.Coli/MG1655-K12.faa", "V.Cholerae/H1.faa", "V.Cholerae/O1_Inaba.faa",
            "V.Cholerae/O1_biovar.faa", "V.Cholerae/O395.faa", "H.Pylori/ELS37.faa")


def _records(path):
    from align_users import read_fasta
    return read_fasta(path)


def proteome_case(work: str, n_queries: int = 100, n_targets: int = 20_000):
    """(queries.fa, targets.fa) of the proteome case in ``work``; None without the proteomes
    (``pairflow data install``)."""
    from pairflow.apps.data import data_dir
    base = os.path.join(data_dir(), "proteomes")
    if not os.path.exists(os.path.join(base, "S.Aureus", "N315.faa")):
        return None
    _, qs = _records(os.path.join(base, "S.Aureus", "N315.faa"))
    targets = []
    for f in DB_FILES:
        stem = os.path.basename(f)[:-4]
        targets += [(f"{stem}_{i}", s) for i, s in enumerate(_records(os.path.join(base, f))[1])]
    qf, tf = os.path.join(work, "proteome_q.fa"), os.path.join(work, "proteome_t.fa")
    with open(qf, "w") as fh:
        fh.writelines(f">q{i}\n{s}\n" for i, s in enumerate(qs[:n_queries]))
    with open(tf, "w") as fh:
        fh.writelines(f">{n}\n{s}\n" for n, s in targets[:n_targets])
    return qf, tf


def _command(side, qf, tf, out_dir, top_k, gap_open, gap_extend):
    if side == "pairflow":  # the CLI as a user types it, its defaults otherwise
        return [PAIRFLOW, "app=align", f"data.queries={qf}", f"data.targets={tf}",
                f"align.top_k={top_k}", f"align.gap_open={gap_open}",
                f"align.gap_extend={gap_extend}"]
    return [PY, os.path.join(HERE, "align_users.py"), side, qf, tf,
            os.path.join(out_dir, "hits.tsv"), "--threads", "2", "--top-k", str(top_k),
            "--gap-open", str(gap_open), "--gap-extend", str(gap_extend)]


def _top_scores(side, out_dir) -> dict[str, list[int]]:
    """Each query's top-k scores, best first, from the side's output."""
    if side == "pairflow":
        (path,) = glob.glob(os.path.join(out_dir, "runs", "align", "*", "result", "hits.tsv"))
        with open(path) as fh:
            head = fh.readline().rstrip("\n").split("\t")
            qi, si = head.index("qseqid"), head.index("score")
            rows = [(r[qi], int(r[si])) for r in (x.rstrip("\n").split("\t") for x in fh)]
    else:
        with open(os.path.join(out_dir, "hits.tsv")) as fh:
            rows = [(r[0], int(r[2])) for r in (x.rstrip("\n").split("\t") for x in fh)]
    out: dict[str, list[int]] = {}
    for q, s in rows:
        out.setdefault(q, []).append(s)
    return {q: sorted(v, reverse=True) for q, v in out.items()}


def run_side(side, qf, tf, work, tag, top_k=5, gap_open=11, gap_extend=1) -> dict:
    """One fresh process of ``side`` on the whole input: wall seconds, CPU seconds of it and
    everything it started, the load around it, and its top scores."""
    from cpu_meter import CpuMeter
    out_dir = os.path.join(work, f"{side}-{tag}")
    os.makedirs(out_dir)
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load0 = round(os.getloadavg()[0], 2)
    meter = CpuMeter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    try:
        proc = subprocess.run(_command(side, qf, tf, out_dir, top_k, gap_open, gap_extend),
                              cwd=out_dir, env=env, capture_output=True, text=True)
        t1 = time.time()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        # children reaped (the whole of an in-process run) by rusage; processes that outlive
        # their parent's wait (Ray's daemons) only by the /proc samples
        cpu = max(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                  meter.at(t1) - meter.at(t0))
    finally:
        meter.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{side} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {"wall_s": t1 - t0, "cpu_s": cpu, "load_before": load0,
            "load_after": round(os.getloadavg()[0], 2), "top": _top_scores(side, out_dir),
            "stdout_tail": proc.stdout[-600:]}


def compare(name, qf, tf, work, reps: int, sides=SIDES) -> dict:
    """Every side on one case, ``reps`` interleaved repetitions; see the module docstring."""
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    active = list(sides)
    for rep in range(reps):
        order = active[rep % len(active):] + active[:rep % len(active)]
        for side in order:
            r = run_side(side, qf, tf, work, f"{name}-{rep}")
            runs[side].append(r)
            print(f"  {name} rep {rep + 1}: {side} {r['wall_s']:.2f} s wall, {r['cpu_s']:.1f} "
                  f"CPU s (load {r['load_before']}->{r['load_after']})", flush=True)
        if rep == 0:  # an alternative far behind the fastest one is not repeated
            alts = [s for s in active if s != "pairflow"]
            fastest = min(runs[s][0]["wall_s"] for s in alts)
            active = [s for s in active
                      if s == "pairflow" or runs[s][0]["wall_s"] <= SKIP_AFTER * fastest]
    ref = runs["pairflow"][0]["top"]
    out = {"queries_file": os.path.basename(qf), "targets_file": os.path.basename(tf),
           "sides": {}}
    for side, rs in runs.items():
        for r in rs:
            if r["top"] != ref:
                bad = [q for q in ref if r["top"].get(q) != ref[q]][:3]
                raise AssertionError(f"{name}: {side}'s top scores differ from pairflow's "
                                     f"(queries {bad})")
        best = min(rs, key=lambda r: r["wall_s"])
        out["sides"][side] = {"wall_s": best["wall_s"], "cpu_s": best["cpu_s"],
                              "runs_wall_s": [r["wall_s"] for r in rs],
                              "runs_cpu_s": [r["cpu_s"] for r in rs],
                              "loads": [[r["load_before"], r["load_after"]] for r in rs],
                              "stdout_tail": best["stdout_tail"]}
    out["queries"] = len(ref)
    with open(tf) as fh:
        out["targets"] = sum(line.startswith(">") for line in fh)
    out["scores_equal"] = True
    alts = {s: v for s, v in out["sides"].items() if s != "pairflow"}
    best_alt = min(alts, key=lambda s: alts[s]["wall_s"])
    pf = out["sides"]["pairflow"]
    out["best_alternative"] = best_alt
    out["ratio"] = alts[best_alt]["wall_s"] / pf["wall_s"]
    out["cpu_ratio"] = alts[best_alt]["cpu_s"] / pf["cpu_s"]
    # repetition by repetition, pairflow against the best alternative's run of the same rep
    out["runs_ratio"] = [a / p for a, p in zip(alts[best_alt]["runs_wall_s"], pf["runs_wall_s"])]
    out["wins"] = out["ratio"] >= 1.0
    out["meets_target"] = out["ratio"] >= TARGET
    print(f"{name}: pairflow {pf['wall_s']:.2f} s, {best_alt} {alts[best_alt]['wall_s']:.2f} s: "
          f"ratio {out['ratio']:.3f} ({'wins' if out['wins'] else 'loses'}; CPU ratio "
          f"{out['cpu_ratio']:.3f})", flush=True)
    return out
