"""What every benchmark's JSON carries besides its figures: the exact command, the date, the code
version, the machine (read from the machine itself) and its targets, each marked met or not.

Why one helper: the report (``benchmarks/report.py``) rebuilds RESULTS.md from the JSON alone, so
every file must say how and where it was made in the same shape; before this, each benchmark wrote
its own partial copy (a ``command`` here, a ``cpus`` there) or none.

    from _record import out_path, target, write
    write(out_path("align.json", args.out), results, "align",
          targets=[target("efficiency, balanced", b, ">=", 0.85)])

The output directory is ``benchmarks/out`` unless ``PAIRFLOW_BENCH_OUT`` names another (``pairflow
bench --out DIR`` sets it, so tests never overwrite the repository's files).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = {">=": lambda v, t: v >= t, "<=": lambda v, t: v <= t,
       ">": lambda v, t: v > t, "<": lambda v, t: v < t, "==": lambda v, t: v == t}


def out_dir() -> str:
    return os.environ.get("PAIRFLOW_BENCH_OUT") or os.path.join(ROOT, "benchmarks", "out")


def out_path(name: str, given: str | None = None) -> str:
    """``given`` (a benchmark's own ``--out``) when set, else ``name`` in the output directory."""
    return given or os.path.join(out_dir(), name)


def command() -> str:
    """This process's command line, as one would type it from the repository's root."""
    exe = sys.executable
    rel = os.path.relpath(exe, ROOT)
    exe = rel if not rel.startswith("..") else exe
    args = [os.path.relpath(a, ROOT) if os.path.isabs(a) and a.startswith(ROOT) else a
            for a in sys.argv]
    return shlex.join([exe, *args])


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def code_version() -> dict:
    return {"describe": _git("describe", "--always", "--dirty", "--tags"),
            "commit": _git("rev-parse", "HEAD"),
            "branch": _git("rev-parse", "--abbrev-ref", "HEAD")}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _vector_isa() -> str:
    """The widest vector instructions the CPU has (kernels compiled by numba use them: on
    the same VM image, sessions got CPUs with and without AVX-512, and a plain popcount loop
    ran 2x faster on one than on the other)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    for isa in ("avx512f", "avx2", "avx", "sse4_2"):
                        if isa in flags:
                            return isa.upper().replace("AVX512F", "AVX-512").replace("_", ".")
                    return "no AVX"
    except OSError:
        pass
    return "?"


def _mem_gib() -> float | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def machine() -> dict:
    """The machine as it describes itself (not as a benchmark assumes it)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {"cpu": _cpu_model(), "isa": _vector_isa(), "cores": cores,
            "cpus_total": os.cpu_count(),
            "memory_gib": _mem_gib(), "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "hostname": platform.node(),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


def describe_machine(m: dict) -> str:
    mem = f", {m['memory_gib']} GiB" if m.get("memory_gib") else ""
    isa = f" ({m['isa']})" if m.get("isa") else ""
    return (f"{m.get('cpu', '?')}{isa}, {m.get('cores', '?')} cores{mem}, {m.get('os', '?')}, "
            f"Python {m.get('python', '?')}")


def target(name: str, value, op: str, threshold, unit: str = "") -> dict:
    """One target: ``value op threshold`` (e.g. efficiency >= 0.9), met or not. A value of None
    (not measured in this run) is recorded as not met, with ``measured: false``."""
    measured = value is not None
    met = bool(OPS[op](value, threshold)) if measured else False
    return {"name": name, "value": value, "op": op, "threshold": threshold, "unit": unit,
            "met": met, "measured": measured}


def record(name: str, targets: list[dict] | None = None, quick: bool | None = None,
           started: float | None = None) -> dict:
    now = datetime.datetime.now(datetime.timezone.utc)
    rec = {"benchmark": name, "command": command(), "date": now.isoformat(timespec="seconds"),
           "code": code_version(), "machine": machine(), "targets": targets or []}
    if quick is not None:
        rec["quick"] = quick
    if started is not None:
        rec["elapsed_s"] = round(datetime.datetime.now().timestamp() - started, 1)
    return rec


def write(path: str, results: dict, name: str, targets: list[dict] | None = None,
          quick: bool | None = None, started: float | None = None) -> str:
    """``results`` with a ``_record`` block (see ``record``), written as JSON to ``path``."""
    results = dict(results)
    results["_record"] = record(name, targets, quick, started)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(results, fh, indent=1, default=_default)
    os.replace(tmp, path)
    print(f"wrote {path}", flush=True)
    return path


def _default(x):
    """numpy scalars and arrays, sets and tuples as JSON."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)
