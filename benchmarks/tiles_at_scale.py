"""The driver at 10^4..10^6 tiles (issue 58, part 3): its peak memory, planning and resume time.

    .venv/bin/python benchmarks/tiles_at_scale.py                 # 10^4, 10^5, 10^6 tiles
    .venv/bin/python benchmarks/tiles_at_scale.py --tiles 1e4 1e5 # some sizes
    .venv/bin/python benchmarks/tiles_at_scale.py --no-run        # plan and launch only

The synthetic app (``apps/synthetic.py``: compare costs nothing, one float an item) with a leaf
of 2 items, so a triangle of n items has ~(n/2)^2/2 tiles: 10^6 tiles at n = 2,828. The run is
in-process (the driver, the coordinator and the device actors are one process, so its peak is
the driver's with everything it holds per tile), dense sink. Each step runs in a process of its
own, and reports that process's peak resident memory (``VmHWM``). An actor may be silent for
10 minutes (``silent_after_s``): runs here go under ``nice -n 19`` beside others' benchmarks,
and a starved in-process actor is not a lost one.

* ``run``: the whole run; ``plan_s``: start-up up to the first tile (read, probe, plan, tiles.json,
  sinks opened, actors started: ``phases.startup_s``), ``finalize_s``, ``wall_s``, the journal's
  bytes;
* ``resume``: the finished run resumed (``resume=True``): the journal replayed and every tile
  verified against its CRC, nothing recomputed, the result finalized again: ``resume_s`` (the
  start-up of the resumed run, which holds the replay) and its peak.

``measure(tiles)`` is the entry point the scale benchmark (``benchmarks/scale.py``) can call; it
returns one dict per size. ``--no-run``: the start-up alone, then cancel (for sizes whose run
takes too long on the machine at hand; no resume figure then).

The recorded figure (RESULTS.md's scale section) is a killed and resumed 10^6-tile run, in
four steps that each write RUN_DIR.STEP.json beside the run directory:

    tiles_at_scale.py --tiles 1e6 --kill-at 0.4 --run-dir D   # SIGKILL once 40 % is journaled
    tiles_at_scale.py --resume-starts D --base B --reps 2     # resume start-ups of copies of D,
                                                              # this checkout's and B's in turn
    tiles_at_scale.py --resume-run D                          # resume D to the end, rows checked
    tiles_at_scale.py --record D                              # tiles_at_scale.json, scale.json

(and, optionally, ``--resume-starts`` of a finished run's copy saved as D.finished_starts.json:
the resume of a finished run, every tile verified from the chunks).

The driver's memory at 10^6 tiles is the larger peak of the killed run and of its resume to the
end (which holds the finalize). ``--merge-scale`` puts the recorded summary into scale.json
again after a scale.py run that started before it was recorded.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r"""
import json, os, sys, time
from pairflow.engine import allpairs
from pairflow.apps.synthetic import SyntheticApp

def peak_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

n, leaf, run_dir, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
host = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "0" else None
app = SyntheticApp(n, item_floats=1)
t0 = time.time()
h = allpairs(app=app, sink="dense", run_dir=run_dir, leaf_items=leaf, executor="inprocess",
             progress=False, resume=mode.startswith("resume"), num_cpus=2,
             host_cache_items=host, silent_after_s=600)
start_s = time.time() - t0
out = {"start_s": start_s, "tiles": len(h._run.tiles)}
report = h._run.resume_report
if mode in ("plan", "resume-start"):  # start-up only (a resume's replay included), then stop
    out.update(peak_mib=peak_mib(), resumed=report and
               {k: v for k, v in report.items() if k != "corrupt_tiles"})
    h.cancel()
else:
    res = h.result()
    out.update(wall_s=time.time() - t0, peak_mib=peak_mib(),
               phases=res.summary.get("phases", {}), resumed=report and
               {k: v for k, v in report.items() if k != "corrupt_tiles"})
print("RESULT " + json.dumps(out))
"""


def n_for_tiles(tiles: float, leaf: int = 2) -> int:
    """Items of a triangle whose leaf grid has about ``tiles`` tiles."""
    blocks = (math.sqrt(8 * tiles + 1) - 1) / 2  # b (b + 1) / 2 tiles
    return max(2, int(round(blocks * leaf)))


def _child(n: int, leaf: int, run_dir: str, mode: str, timeout: float,
           base: str | None = None, host: int | None = None) -> dict:
    """One step in a process of its own; ``base``: a directory holding a ``pairflow`` package
    of another checkout (a baseline), imported instead of this one (run outside this tree)."""
    path = base or (ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env = dict(os.environ, PYTHONPATH=path)
    code = _CHILD if not base else \
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in " \
        "repr(f).lower()]\n" + _CHILD
    proc = subprocess.run([sys.executable, "-c", code, str(n), str(leaf), run_dir, mode,
                           str(host or 0)],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=tempfile.gettempdir() if base else None)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{mode} at n={n} failed:\n{proc.stderr[-3000:]}")


def load() -> float:
    return os.getloadavg()[0]


def measure(tiles=(1e4, 1e5, 1e6), leaf: int = 2, run: bool = True,
            timeout: float = 3600.0, keep: bool = False, base: str | None = None,
            host_frac: float | None = None) -> list[dict]:
    """One row per size: tiles, n, the run's (or, ``run`` False, the start-up's) peak MiB,
    plan_s, wall_s, finalize_s, journal MiB, resume_s and the resume's peak MiB.
    ``host_frac``: a host tier of that share of the items (default: every item), so the
    planner simulates (or declines to) instead of taking any plan."""
    rows = []
    for want in tiles:
        n = n_for_tiles(float(want), leaf)
        run_dir = tempfile.mkdtemp(prefix=f"tiles_at_scale_{int(float(want))}_")
        host = max(1, int(n * host_frac)) if host_frac else None
        row = {"tiles_asked": int(float(want)), "n": n, "leaf": leaf, "host_items": host,
               "load_before": load()}
        if not run:
            got = _child(n, leaf, run_dir, "plan", timeout, base, host)
            row.update(tiles=got["tiles"], plan_s=got["start_s"], plan_peak_mib=got["peak_mib"])
        else:
            got = _child(n, leaf, run_dir, "run", timeout, base, host)
            ph = got["phases"]
            row.update(tiles=got["tiles"], peak_mib=got["peak_mib"], wall_s=got["wall_s"],
                       plan_s=ph.get("startup_s"), finalize_s=ph.get("finalize_s"),
                       journal_mib=os.path.getsize(os.path.join(run_dir, "journal.jsonl")) / 2**20)
            again = _child(n, leaf, run_dir, "resume", timeout, base, host)
            row.update(resume_s=again["start_s"], resume_wall_s=again["wall_s"],
                       resume_peak_mib=again["peak_mib"], resumed=again["resumed"])
        row["load_after"] = load()
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not keep:
            subprocess.run(["rm", "-rf", run_dir])
    return rows


def _vmhwm_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def killed_run(tiles: float, frac: float, run_dir: str, leaf: int = 2,
               timeout: float = 7200.0) -> dict:
    """A run of ``tiles`` tiles killed (SIGKILL, by its process id) once its journal names
    ``frac`` of them: its start-up (``meta.json: phases``), its peak resident memory up to the
    kill (``VmHWM``, sampled every second) and the tiles journaled. The directory is kept for
    ``resume_start`` and a resume to the end."""
    import signal
    n = n_for_tiles(tiles, leaf)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(n), str(leaf), run_dir, "run",
                             "0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    journal, lines, at, peak = os.path.join(run_dir, "journal.jsonl"), 0, 0, 0.0
    first = None  # seconds to the first journaled tile: the start-up, within a second
    want = frac * tiles
    while proc.poll() is None and time.time() - t0 < timeout:
        time.sleep(1.0)
        peak = max(peak, _vmhwm_mib(proc.pid) or 0.0)
        try:
            with open(journal, "rb") as fh:  # only what was appended since the last look
                fh.seek(at)
                new = fh.read()
        except OSError:
            continue
        at += len(new)
        if new and first is None:
            first = time.time() - t0
        lines += new.count(b"\n")
        if lines >= want:
            break
    peak = max(peak, _vmhwm_mib(proc.pid) or 0.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open(os.path.join(run_dir, "meta.json")) as fh:
        phases = json.load(fh).get("phases", {})
    return {"tiles_asked": int(tiles), "n": n, "leaf": leaf, "killed_after_s": time.time() - t0,
            "journal_lines": lines, "journal_mib": at / 2**20, "peak_mib_until_kill": peak,
            "first_tile_s": first, "phases": phases, "load": load()}


def resume_start(run_dir: str, n: int, leaf: int = 2, base: str | None = None,
                 timeout: float = 3600.0) -> dict:
    """The start-up of a resume of ``run_dir`` (a run killed part way: the journal replayed,
    its tiles verified from the staged logs), then stopped: seconds and peak MiB."""
    got = _child(n, leaf, run_dir, "resume-start", timeout, base)
    return {"n": n, "resume_s": got["start_s"], "resume_peak_mib": got["peak_mib"],
            "resumed": got["resumed"], "load": load()}


def resume_run(run_dir: str, leaf: int = 2, timeout: float = 7200.0) -> dict:
    """A killed run (``killed_run``) resumed to the end in a process of its own: the start-up
    (journal replayed, staged tiles verified, plan, actors: ``resume_s``), the wall time, the
    phases (``finalize_s``) and the process's peak resident memory (through the finalize)."""
    with open(run_dir + ".killed.json") as fh:
        n = json.load(fh)["n"]
    got = _child(n, leaf, run_dir, "resume", timeout)
    ph = got.get("phases") or {}
    return {"n": n, "tiles": got["tiles"], "resume_s": got["start_s"], "wall_s": got["wall_s"],
            "peak_mib": got["peak_mib"], "finalize_s": ph.get("finalize_s"),
            "phases": ph, "resumed": got["resumed"], "exact": exact_rows(run_dir, n),
            "load": load()}


def exact_rows(run_dir: str, n: int, rows: int = 24, seed: int = 0) -> dict:
    """Whole rows of the finished matrix against the synthetic app's formula, computed here:
    (i * 7919 + j) % 1000 for i < j, mirrored, NaN on the diagonal (the first and last rows
    and ``rows`` drawn)."""
    import numpy as np
    import zarr
    arr = zarr.open_group(os.path.join(run_dir, "result", "matrix.zarr"), mode="r")["value"]
    rng = np.random.default_rng(seed)
    picked = sorted({0, n - 1, *rng.choice(n, min(n, rows), replace=False).tolist()})
    j = np.arange(n)
    bad = 0
    for i in picked:
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        want = ((lo * 7919 + hi) % 1000).astype(np.float64)
        want[i] = np.nan
        got = np.asarray(arr[i, :])
        bad += int((~((got == want) | (np.isnan(got) & np.isnan(want)))).sum())
    return {"rows": len(picked), "cells": len(picked) * n, "mismatches": bad}


def resume_starts(run_dir: str, base: str | None, reps: int = 1, leaf: int = 2) -> list[dict]:
    """``resume_start`` of fresh copies of a killed run, this checkout's and ``base``'s
    interleaved (new, base, new, ...): the same journal and logs replayed by each."""
    with open(run_dir + ".killed.json") as fh:
        n = json.load(fh)["n"]
    rows = []
    for rep in range(reps):
        for who, b in [("new", None)] + ([("base", base)] if base else []):
            copy = run_dir + ".copy"
            subprocess.run(["rm", "-rf", copy])
            subprocess.run(["cp", "-r", run_dir, copy], check=True)
            row = dict(resume_start(copy, n, leaf, b), who=who, rep=rep)
            print(json.dumps(row), flush=True)
            rows.append(row)
            subprocess.run(["rm", "-rf", copy])
    return rows


def _load_json(path: str, default=None):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def record(run_dir: str, out: str | None = None) -> dict:
    """The killed-and-resumed figures of ``run_dir`` (``*.killed.json``, ``*.resumed.json``,
    ``*.starts.json``) as benchmarks/out/tiles_at_scale.json, and their summary in
    scale.json's tiles part (``driver_at_1e6_tiles_gib``, ``tiles_at_scale``: what
    sections/scale.py shows; ``scale.py`` reads the same from this file when it runs)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _record import out_path, target, write
    import numpy as np
    killed = _load_json(run_dir + ".killed.json")
    resumed = _load_json(run_dir + ".resumed.json")
    starts = _load_json(run_dir + ".starts.json", [])
    peak = max(killed["peak_mib_until_kill"], (resumed or {}).get("peak_mib") or 0.0)
    finished = _load_json(run_dir + ".finished_starts.json", [])  # a finished run reopened
    new = [r["resume_s"] for r in starts if r["who"] == "new"]
    base = [r["resume_s"] for r in starts if r["who"] == "base"]
    summary = {
        "tiles": (resumed or {}).get("tiles") or killed["tiles_asked"], "n": killed["n"],
        "leaf": killed["leaf"], "killed_at_tiles": killed["journal_lines"],
        "killed_after_s": killed["killed_after_s"], "first_tile_s": killed["first_tile_s"],
        "peak_gib_until_kill": killed["peak_mib_until_kill"] / 1024,
        "resume_s": (resumed or {}).get("resume_s"),
        "resume_start_s": {"new": new, "base": base},
        "resume_start_peak_gib": max((r["resume_peak_mib"] for r in starts if r["who"] == "new"),
                                     default=None),
        "finished_resume_start_s": {w: [r["resume_s"] for r in finished if r["who"] == w]
                                    for w in ("new", "base")},
        "finished_tiles": max((r["resumed"]["reused"] for r in finished), default=None),
        "resumed_wall_s": (resumed or {}).get("wall_s"),
        "finalize_s": (resumed or {}).get("finalize_s"),
        "resumed_peak_gib": (resumed or {}).get("peak_mib") and resumed["peak_mib"] / 1024,
        "reused": ((resumed or {}).get("resumed") or {}).get("reused"),
        "exact": (resumed or {}).get("exact"),
        "driver_peak_gib": peak / 1024, "finished": resumed is not None,
        "note": _load_json(run_dir + ".note.json"),  # what the steps' figures need said
        "load": [killed.get("load"), (resumed or {}).get("load")] +
                [r.get("load") for r in starts + finished]}
    if summary["resume_start_peak_gib"] is not None:
        summary["resume_start_peak_gib"] /= 1024
    results = {"driver_peak_gib": peak / 1024 if resumed and summary["tiles"] >= 900_000
               else None, "summary": summary, "killed": killed,
               "resumed": resumed, "starts": starts}
    goals = [target(f"driver memory at {summary['tiles']:,} tiles (killed, resumed to the end)",
                    peak / 1024 if resumed else None, "<=", 2.0, "GiB"),
             target("a resume's start-up, journal replayed and tiles verified (median of "
                    "--resume-starts, else the resume to the end's)",
                    float(np.median(new)) if new else summary["resume_s"], "<=", 30.0, "s"),
             target("the resumed result is exact (whole rows against the formula)",
                    (summary["exact"] or {}).get("mismatches"), "==", 0)]
    write(out_path("tiles_at_scale.json", out), results, "tiles_at_scale", targets=goals)
    merge_into_scale(summary, results["driver_peak_gib"])
    return summary


def merge_into_scale(summary: dict | None = None, driver_gib: float | None = None) -> None:
    """scale.json's tiles part (``driver_at_1e6_tiles_gib``, ``tiles_at_scale`` and its
    target) from ``summary`` (default: what tiles_at_scale.json holds): after a scale.py run
    that started before this benchmark recorded, ``--merge-scale`` puts it back."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _record import out_path, target
    if summary is None:
        mine = _load_json(out_path("tiles_at_scale.json")) or {}
        summary, driver_gib = mine.get("summary"), mine.get("driver_peak_gib")
    scale = out_path("scale.json")
    d = _load_json(scale)
    if d is None or summary is None:
        return
    d["driver_at_1e6_tiles_gib"] = driver_gib
    d["tiles_at_scale"] = summary
    for g in (d.get("_record") or {}).get("targets") or []:
        if g.get("name", "").startswith("driver memory at 10^6 tiles"):
            g.update(target(g["name"], driver_gib, "<=", 2.0, "GiB"))
    tmp = scale + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(d, fh, indent=1)
    os.replace(tmp, scale)


def for_scale() -> dict | None:
    """The summary ``record`` wrote (benchmarks/out/tiles_at_scale.json), for scale.py."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _record import out_path
    return (_load_json(out_path("tiles_at_scale.json")) or {}).get("summary")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", nargs="+", type=float, default=[1e4, 1e5, 1e6])
    ap.add_argument("--leaf", type=int, default=2)
    ap.add_argument("--no-run", action="store_true", help="start-up only, then cancel")
    ap.add_argument("--host-frac", type=float, help="host tier: this share of the items")
    ap.add_argument("--resume-start", metavar="RUN_DIR",
                    help="only the start-up of a resume of RUN_DIR (n from --tiles), then stop")
    ap.add_argument("--kill-at", type=float, metavar="FRAC",
                    help="kill the run (of --tiles' first size) once FRAC of its tiles are "
                    "journaled, then time a resume's start-up (--keep: then resume to the end)")
    ap.add_argument("--run-dir", help="where --kill-at runs (default: a temporary directory)")
    ap.add_argument("--resume-run", metavar="RUN_DIR",
                    help="resume a --kill-at run to the end (RUN_DIR.resumed.json)")
    ap.add_argument("--resume-starts", metavar="RUN_DIR", help="resume start-ups of copies of "
                    "a --kill-at run, this checkout's and --base's (RUN_DIR.starts.json)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--record", metavar="RUN_DIR", help="write the figures of a killed and "
                    "resumed RUN_DIR to benchmarks/out (tiles_at_scale.json, scale.json)")
    ap.add_argument("--merge-scale", action="store_true", help="put tiles_at_scale.json's "
                    "summary into scale.json again (after a scale.py run that started first)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    ap.add_argument("--base", help="a directory with another checkout's pairflow package "
                    "(symlinks: pairflow/{__init__.py,engine,apps,kernels,...}): the baseline")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out",
                                                  "tiles_at_scale.json"))
    a = ap.parse_args(argv)
    if a.resume_start:
        print(json.dumps(resume_start(a.resume_start, n_for_tiles(a.tiles[0], a.leaf), a.leaf,
                                      a.base)))
        return
    if a.kill_at:
        run_dir = a.run_dir or tempfile.mkdtemp(prefix="tiles_at_scale_killed_")
        os.makedirs(run_dir, exist_ok=True)
        row = killed_run(a.tiles[0], a.kill_at, run_dir, a.leaf)
        print(json.dumps(row), flush=True)
        with open(run_dir.rstrip("/") + ".killed.json", "w") as fh:
            json.dump(row, fh, indent=1)
        return
    if a.resume_starts:
        rows = resume_starts(a.resume_starts.rstrip("/"), a.base, a.reps, a.leaf)
        with open(a.resume_starts.rstrip("/") + ".starts.json", "w") as fh:
            json.dump(rows, fh, indent=1)
        return
    if a.resume_run:
        row = resume_run(a.resume_run.rstrip("/"), a.leaf)
        print(json.dumps(row), flush=True)
        with open(a.resume_run.rstrip("/") + ".resumed.json", "w") as fh:
            json.dump(row, fh, indent=1)
        return
    if a.record:
        print(json.dumps(record(a.record.rstrip("/"))), flush=True)
        return
    if a.merge_scale:
        merge_into_scale()
        return
    rows = measure(a.tiles, a.leaf, run=not a.no_run, keep=a.keep, base=a.base,
                   host_frac=a.host_frac)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump({"rows": rows, "when": time.strftime("%Y-%m-%d %H:%M:%S")}, fh, indent=1)


if __name__ == "__main__":
    main()
