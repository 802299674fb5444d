"""Tool-farm benchmark: pairflow's farm against what a user runs instead, the tool itself with
its own threads on the whole input, side by side in one run, the hits checked identical.

    .venv/bin/python benchmarks/farm.py            # the acceptance sizes (~35 min on 2 busy cores)
    .venv/bin/python benchmarks/farm.py --quick    # small: proves the benchmark runs

Rows (p = 2, the machine's cores):
  blastp        S. aureus N315's proteins (2,563) against E. coli MG1655's (4,314):
                ``makeblastdb`` + ``blastp -num_threads p`` on the whole input, against the farm
                (makeblastdb once per node, unit_records=auto); also its first 50 proteins
  hmmsearch     N315's proteins as single-sequence profiles (``hmmbuild --singlemx``, built
                once, outside the clock) against MG1655's proteins: ``hmmsearch --cpu p`` on
                the whole profile file, against the farm cutting the profiles (a record starts
                at ``HMMER3``); also the first 50 profiles
  clustalo      the BAliBASE sets of dialign-tx-data of at most 20 proteins (10 of 13), one
                alignment per file: a loop of
                ``clustalo --threads p`` over the files, against the farm (one unit a file)

Both sides are timed end to end: the alternative as its commands (subprocesses), the farm as
``engine.farm(...)`` + ``engine.gather(...)`` to one file, called from this Python process
(the interpreter's start and imports are not counted; ``python_import_s`` says what they cost
here). The farm runs as the CLI would: executor auto (in-process for small work, Ray started
by the run otherwise), a fresh node scratch each run (so makeblastdb is on its clock too).
Repetitions are interleaved, alternating which side goes first; medians and the median of
each repetition's ratio are reported. Results go to benchmarks/out/farm.json.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from pairflow.engine import farm, gather  # noqa: E402
from pairflow.engine.toolfarm.units import scan_records  # noqa: E402
from _record import out_path, target, write  # noqa: E402

from pairflow.apps.data import data_dir  # noqa: E402  (PAIRFLOW_DATA, else the user data dir)
PROTEOMES = os.path.join(data_dir(), "proteomes")
SHARE = os.path.join(data_dir(), "root", "usr", "share")
CACHE = os.path.join(data_dir(), "bench")        # the built profiles, kept between runs
P = 2                                            # the user's threads: this machine's cores
BLAST_ARGS = ["-outfmt", "6", "-evalue", "1e-5"]


def first_records(path: str, n: int | None, out: str, cut: str = "fasta",
                  pattern: str | None = None) -> str:
    offsets = scan_records(path, cut, pattern)
    n = len(offsets) - 1 if n is None else min(n, len(offsets) - 1)
    with open(path, "rb") as fh, open(out, "wb") as dst:
        dst.write(fh.read(offsets[n]))
    return out


def singlemx_profiles(faa: str) -> str:
    """One profile per protein of ``faa`` (``hmmbuild --singlemx``), built once and cached."""
    with open(faa, "rb") as fh:
        tag = hashlib.sha256(fh.read()).hexdigest()[:12]
    out = os.path.join(CACHE, f"{os.path.basename(faa)}.{tag}.singlemx.hmm")
    if os.path.exists(out):
        return out
    os.makedirs(CACHE, exist_ok=True)
    sto = out + ".sto"
    with open(faa) as fh, open(sto, "w") as dst:
        for rec in fh.read().split(">")[1:]:
            head, *seq = rec.split("\n")
            name = head.split()[0]
            dst.write(f"# STOCKHOLM 1.0\n#=GF ID {name}\n{name} {''.join(seq)}\n//\n")
    subprocess.run(["hmmbuild", "--singlemx", "--amino", "--cpu", str(P), out + ".partial",
                    sto], check=True, stdout=subprocess.DEVNULL)
    os.replace(out + ".partial", out)
    os.remove(sto)
    return out


def hits(path: str, kind: str) -> list[bytes]:
    """Hit lines, sorted (comment lines of HMMER's tables carry the command and the date)."""
    with open(path, "rb") as fh:
        lines = fh.read().splitlines()
    return sorted(x for x in lines if x.strip() and not (kind == "tbl" and x.startswith(b"#")))


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# -- the user's alternative: the tool on the whole input, its own threads ----------------------

def alt_blastp(q: str, db: str, work: str, out: str) -> None:
    d = tempfile.mkdtemp(dir=work, prefix="alt-")
    local = shutil.copy(db, d)
    subprocess.run(["makeblastdb", "-in", local, "-dbtype", "prot"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["blastp", "-query", q, "-db", local, *BLAST_ARGS, "-num_threads", str(P),
                    "-out", out], check=True)
    shutil.rmtree(d)


def alt_hmmsearch(hmm: str, db: str, work: str, out: str) -> None:
    subprocess.run(["hmmsearch", "--cpu", str(P), "--tblout", out, "-o", os.devnull, hmm, db],
                   check=True)


def alt_clustalo(files: list[str], work: str, out: str) -> None:
    with open(out, "wb") as fh:
        for f in files:
            fh.write(subprocess.run(["clustalo", "-i", f, "--threads", str(P)], check=True,
                                    capture_output=True).stdout)


# -- pairflow's farm --------------------------------------------------------------------------

def farm_run(kind: str, inputs: list[str], db: str | None, work: str, out: str) -> dict:
    common = dict(runs_root=os.path.join(work, "runs"), progress=False, num_cpus=P,
                  scratch=tempfile.mkdtemp(dir=work, prefix="scratch-"))
    if kind == "blastp":
        r = farm(program=["blastp", "-query", "{input}", "-db", "{shared:db}", *BLAST_ARGS,
                          "-num_threads", "{threads}"], inputs=inputs, shared={"db": db},
                 prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
                 unit_records="auto", **common)
        stream = "stdout"
    elif kind == "hmmsearch":
        r = farm(program=["hmmsearch", "--cpu", "{threads}", "--tblout", "{out:tblout}", "-o",
                          os.devnull, "{input}", "{shared:db}"], inputs=inputs,
                 shared={"db": db}, cut="pattern", pattern="^HMMER3", input_suffix=".hmm",
                 streams=["tblout"], unit_records="auto", **common)
        stream = "tblout"
    else:
        r = farm(program=["clustalo", "-i", "{input}", "--threads", "{threads}"],
                 inputs=inputs, cut="file", unit_records=1, **common)
        stream = "stdout"
    gather(r.run_dir, stream, out)
    s = r.summary
    shutil.rmtree(r.run_dir, ignore_errors=True)
    return {"executor": s.get("executor"), "units": s["units_total"],
            "unit_records": s["unit_records"], "threads": s.get("threads"),
            "probe_s": s["phases"].get("probe_s"), "run_s": s["run_s"], "tool_s": s["tool_s"],
            "tool_cpu_s": s.get("tool_cpu_s"), "phases": s["phases"],
            "all_cores_last": (s.get("unit_choice") or {}).get("all_cores_last", 0),
            "wall_s": s["wall_s"], "curve": (s.get("unit_choice") or {}).get("curve")}


ALL_CASES = ("blastp_all", "blastp_50", "hmmsearch_all", "hmmsearch_50", "clustalo")


def carried_rows(path: str, rerun: dict) -> dict:
    """With ``--only``: the rows of the last recorded run that this run did not repeat, each
    marked with the run that measured it (date, code, command, load), so the report never
    passes an old figure off as new."""
    try:
        with open(path) as fh:
            old = json.load(fh)
    except (OSError, ValueError):
        return {}
    rec = old.get("_record") or {}
    origin = {"date": rec.get("date", "?"), "code": (rec.get("code") or {}).get("describe"),
              "command": rec.get("command"), "load_avg_1min": old.get("load_avg_1min")}
    return {k: {**r, "carried_from": r.get("carried_from") or origin}
            for k, r in (old.get("rows") or {}).items() if k not in rerun}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None, help="repetitions of the small cases "
                                                           "(default 5; 1 with --quick)")
    ap.add_argument("--full-reps", type=int, default=None,
                    help="repetitions of the whole-proteome cases (default 3)")
    ap.add_argument("--only", nargs="*", default=None, help="case names (default: all)")
    ap.add_argument("--out", default=None, help="default: benchmarks/out/farm.json")
    args = ap.parse_args()
    started = time.time()
    reps = args.reps or (1 if args.quick else 5)
    full_reps = args.full_reps or (1 if args.quick else 3)
    q_src = os.path.join(PROTEOMES, "S.Aureus", "N315.faa")
    db_src = os.path.join(PROTEOMES, "E.Coli", "MG1655-K12.faa")
    # the BAliBASE sets of at most 20 proteins: the three of 56-89 took minutes each under
    # clustalo --threads 2 while the machine was loaded (OpenMP threads waiting on each other)
    bb = [f for f in sorted(glob.glob(os.path.join(SHARE, "dialign-tx", "BB*.tfa")))
          if open(f).read().count(">") <= 20]
    for p in (q_src, db_src):
        if not os.path.exists(p):
            sys.exit(f"missing {p}: run scripts/setup.sh")
    work = tempfile.mkdtemp(prefix="pairflow-bench-farm-")
    db = shutil.copy(db_src, os.path.join(work, "db.faa"))
    n_full = 200 if args.quick else None  # --quick: 200 queries stand for the whole proteome
    t0 = time.perf_counter()
    profiles_all = singlemx_profiles(q_src)
    build_s = time.perf_counter() - t0
    cases = {  # name -> (kind, inputs, db, reps, what)
        "blastp_all": ("blastp", [first_records(q_src, n_full, os.path.join(work, "q.faa"))],
                       db, full_reps, "blastp"),
        "blastp_50": ("blastp", [first_records(q_src, 50, os.path.join(work, "q50.faa"))],
                      db, reps, "blastp"),
        "hmmsearch_all": ("hmmsearch", [first_records(profiles_all, n_full,
                                                      os.path.join(work, "p.hmm"), "pattern",
                                                      "^HMMER3")], db, full_reps, "hmmsearch"),
        "hmmsearch_50": ("hmmsearch", [first_records(profiles_all, 50,
                                                     os.path.join(work, "p50.hmm"), "pattern",
                                                     "^HMMER3")], db, reps, "hmmsearch"),
        "clustalo": ("clustalo", bb, None, reps, "clustalo"),
    }
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only}
    imp = subprocess.run([sys.executable, "-c", "import time; t = time.perf_counter(); "
                          "from pairflow.engine import farm, gather; print(time.perf_counter() - t)"],
                         capture_output=True, text=True, cwd=ROOT)
    python_import_s = float(imp.stdout.strip() or "nan")
    raw: dict[str, dict] = {k: {"alt": [], "farm": [], "runs": [], "same": []} for k in cases}
    load = []
    for rep in range(max(c[3] for c in cases.values())):
        for name, (kind, inputs, dbf, n_reps, _) in cases.items():
            if rep >= n_reps:
                continue
            alt_out, farm_out = os.path.join(work, "alt.out"), os.path.join(work, "farm.out")

            def alt():
                if kind == "blastp":
                    alt_blastp(inputs[0], dbf, work, alt_out)
                elif kind == "hmmsearch":
                    alt_hmmsearch(inputs[0], dbf, work, alt_out)
                else:
                    alt_clustalo(inputs, work, alt_out)
            info = {}

            def pf():
                info.update(farm_run(kind, inputs, dbf, work, farm_out))
            load.append(os.getloadavg()[0])
            order = [("alt", alt), ("farm", pf)]
            for side, fn in (order if rep % 2 == 0 else order[::-1]):
                raw[name][side].append(timed(fn))
            fmt = "tbl" if kind == "hmmsearch" else "lines"
            with open(alt_out, "rb") as a, open(farm_out, "rb") as b:
                same_bytes = a.read() == b.read()
            raw[name]["same"].append({"hits": hits(alt_out, fmt) == hits(farm_out, fmt),
                                      "bytes": same_bytes,
                                      "n_hits": len(hits(alt_out, fmt))})
            raw[name]["runs"].append(info)
            print(f"{name} rep {rep}: alternative {raw[name]['alt'][-1]:.2f} s, pairflow "
                  f"{raw[name]['farm'][-1]:.2f} s ({info['executor']}, units of "
                  f"{info['unit_records']}), same hits {raw[name]['same'][-1]['hits']}",
                  flush=True)
    med = statistics.median
    limits = {"blastp_all": 1.10, "blastp_50": 1.5, "hmmsearch_all": 1.10,
              "hmmsearch_50": 1.5, "clustalo": None}
    alternatives = {
        "blastp_all": f"makeblastdb + blastp -num_threads {P}",
        "blastp_50": f"makeblastdb + blastp -num_threads {P}",
        "hmmsearch_all": f"hmmsearch --cpu {P}", "hmmsearch_50": f"hmmsearch --cpu {P}",
        "clustalo": f"clustalo --threads {P}, one file after another"}
    rows = {}
    for name, r in raw.items():
        kind, inputs, _, n_reps, _ = cases[name]
        a, f = med(r["alt"]), med(r["farm"])
        rows[name] = {
            "alternative": alternatives[name], "alternative_s": a, "pairflow_s": f,
            "ratio": f / a, "ratio_paired": med(x / y for x, y in zip(r["farm"], r["alt"])),
            "limit": limits[name], "reps": n_reps,
            "identical_hits": all(s["hits"] for s in r["same"]),
            "identical_bytes": all(s["bytes"] for s in r["same"]),
            "n_hits": r["same"][0]["n_hits"],
            "records": sum(len(scan_records(p, "file" if kind == "clustalo" else
                                            "pattern" if kind == "hmmsearch" else "fasta",
                                            "^HMMER3" if kind == "hmmsearch" else None)) - 1
                           for p in inputs),
            "executor": [x["executor"] for x in r["runs"]],
            "unit_records": [x["unit_records"] for x in r["runs"]],
            "units": [x["units"] for x in r["runs"]],
            "probe_s": [x["probe_s"] for x in r["runs"]],
            "tool_cpu_s": [x.get("tool_cpu_s") for x in r["runs"]],
            "all_cores_last": [x.get("all_cores_last", 0) for x in r["runs"]],
            "threads": r["runs"][0]["threads"], "curve": r["runs"][0]["curve"]}
    out = {"quick": args.quick, "reps": reps, "full_reps": full_reps, "p": P,
           "queries": os.path.basename(q_src), "db": os.path.basename(db_src),
           "python_import_s": python_import_s, "profiles_build_s": build_s,
           "load_avg_1min": {"min": min(load), "median": med(load), "max": max(load)},
           "rows": rows, "raw": raw}
    if args.only:  # the rows not rerun stay, each saying which run measured it
        rows.update(carried_rows(out_path("farm.json", args.out), rows))
        out["rows"] = {k: rows[k] for k in ALL_CASES if k in rows}
        rows = out["rows"]

    def tag(name, r):
        c = r.get("carried_from")
        return f" (run of {c['date'][:10]}, not rerun)" if c else ""
    tg = [target(f"{name}: pairflow / {r['alternative']}{tag(name, r)}", r["ratio"], "<=",
                 r["limit"], "x") for name, r in rows.items() if r["limit"] is not None]
    tg += [target(f"{name}: identical hits{tag(name, r)}", r["identical_hits"], "==", True)
           for name, r in rows.items()]
    write(out_path("farm.json", args.out), out, "farm", quick=args.quick, started=started,
          targets=tg)
    print(json.dumps({k: v for k, v in out.items() if k != "raw"}, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
