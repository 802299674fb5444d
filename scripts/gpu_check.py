"""The device check (issue 64): every GPU path of pairflow against its numpy oracle, the engine's
in-process executor with a CUDA device actor, and throughput against the CPU kernels and the
hardware's limits, in one command that fits one run on the GPU machine (<= 8 minutes).

    .venv/bin/python scripts/gpu_check.py --device cpu --quick --out /tmp/gc   # CI: torch-cpu
    python3 scripts/gpu_check.py --device cuda --out $OUT                      # the GPU machine

The GPU machine (the device tool, kind nvidia-h200: Python 3.12 with torch, CuPy, numba, numpy,
pandas, pyarrow, fsspec, scipy; no Ray, zarr, Hydra, pysam, parasail or array-api-compat) runs
it from a copy of the working tree. Here, first build the one pure-Python package it lacks:

    bash scripts/gpu_bundle.sh            # -> .gpu_bundle/ (ignored; array-api-compat)

then, in one call of the device tool:

    command    PYTHONUNBUFFERED=1 python3 scripts/gpu_check.py --device cuda --out $OUT
               --bundle .gpu_bundle --budget-s 420                  (as one line)
    carry      [".gpu_bundle"]
    timeout_s  540

and keep what came back: ``cp <files_at>/gpu.json benchmarks/out/gpu.json`` (the log beside it,
``gpu_check.log``, says what ran and any traceback). Give the machine back unless rerunning.
``python scripts/gpu_report.py benchmarks/out/gpu.json`` prints RESULTS.md's GPU section.

What it writes to ``--out``: ``gpu.json`` (rewritten after every part, so a run stopped at its
limit leaves what it had) and ``gpu_check.log``; nothing else there (run directories go to a
temporary folder: the device tool brings back at most 8 files).

Parts, each recorded with its seconds and any error (one failing part does not stop the others):
``env`` (device, driver, versions, where each package came from); ``limits`` (memory bandwidth;
bf16, int8 and float64 product rates, measured in the same run); ``checks`` (every kernel with a
GPU path, on torch and on CuPy when importable, against numpy on the same inputs, within the
tolerance its tests document); ``engine`` (an in-memory app run in-process on the CPU and on the
device under a device-memory budget small enough to evict: result, R and tier counters equal);
``reads`` and ``forensics`` (scripts/gpu_throughput.py). ``ok`` is true when every comparison is
equal and no part failed. ``--budget-s``: parts not started by then are skipped (recorded).

Modules the GPU machine lacks are refused here too (``--forbid``, by default ray, zarr, hydra,
omegaconf, pysam, parasail, dask), so the CPU run in CI imports what the GPU run can.
"""
from __future__ import annotations

import argparse
import importlib.abc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORBID = "ray,zarr,hydra,omegaconf,pysam,parasail,dask"


class _Refuse(importlib.abc.MetaPathFinder):
    """Imports of the named top-level packages fail as on a machine without them."""

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r} (refused: --forbid)", name=name)
        return None


class Report:
    """The JSON of figures and the log, both under ``out``; parts run through ``part``."""

    def __init__(self, out: str, budget_s: float, meta: dict):
        os.makedirs(out, exist_ok=True)
        self.path, self.log_path = os.path.join(out, "gpu.json"), os.path.join(out,
                                                                                "gpu_check.log")
        self.t0, self.budget_s = time.time(), budget_s
        self.data: dict = {"meta": meta, "parts": {}, "ok": False}
        open(self.log_path, "w").close()

    def log(self, msg: str) -> None:
        line = f"[{time.time() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        with open(self.log_path, "a") as fh:
            fh.write(line + "\n")

    def part(self, name: str, fn, *args):
        """Run one part; its result (or error) and seconds go into the JSON, saved at once."""
        if time.time() - self.t0 > self.budget_s:
            self.data["parts"][name] = {"skipped": f"budget of {self.budget_s:.0f} s spent"}
            self.log(f"{name}: skipped (budget)")
            self.save()
            return None
        self.log(f"{name}: start")
        t = time.time()
        try:
            out = fn(*args)
            self.data["parts"][name] = {"seconds": time.time() - t, "result": out}
            self.log(f"{name}: done in {time.time() - t:.1f} s")
        except Exception as exc:  # recorded, and the next part runs
            out = None
            self.data["parts"][name] = {"seconds": time.time() - t, "error": repr(exc),
                                        "traceback": traceback.format_exc()}
            self.log(f"{name}: FAILED {exc!r}\n{traceback.format_exc()}")
        self.save()
        return out

    def save(self) -> None:
        self.data["seconds"] = time.time() - self.t0
        self.data["ok"] = _all_ok(self.data["parts"])
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=1, default=_plain)
        os.replace(tmp, self.path)


def _plain(x):
    """numpy scalars and the like as JSON."""
    if hasattr(x, "item"):
        return x.item()
    return str(x)


def _all_ok(parts: dict) -> bool:
    """Every part ran without error and every ``equal`` in it is true (skipped: not ok)."""
    def equal_flags(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k == "equal":
                    yield bool(v)
                else:
                    yield from equal_flags(v)
        elif isinstance(x, list):
            for v in x:
                yield from equal_flags(v)
    if not parts:
        return False
    for p in parts.values():
        if "error" in p or "skipped" in p:
            return False
    return all(equal_flags(parts))


# -- env ----------------------------------------------------------------------------------

def env(device: str, bundle: str | None) -> dict:
    import numpy
    out = {"python": sys.version.split()[0], "platform": platform.platform(),
           "cpus": _threads(), "numpy": numpy.__version__, "bundle": bundle, "modules": {}}
    for name in ("torch", "cupy", "numba", "scipy", "pandas", "pyarrow", "fsspec",
                 "array_api_compat"):
        try:
            mod = __import__(name)
            out["modules"][name] = {"version": getattr(mod, "__version__", "?"),
                                    "file": getattr(mod, "__file__", None)}
        except Exception as exc:
            out["modules"][name] = {"missing": repr(exc)[:200]}
    import torch
    out["torch_cuda"] = torch.version.cuda
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        out["gpu"] = {"name": props.name, "memory_GiB": props.total_memory / 2**30,
                      "multiprocessors": props.multi_processor_count,
                      "capability": f"{props.major}.{props.minor}"}
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                                "clocks.max.sm,clocks.max.mem", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=30)
            out["nvidia_smi"] = q.stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            out["nvidia_smi"] = f"not run: {exc!r}"
    return out


def _threads() -> int:
    from scripts.gpu_throughput import cpu_threads
    return cpu_threads()


def backends(device: str) -> list[str]:
    """The device backends the checks run: torch's (cuda or torch-cpu), and cupy on a GPU
    machine where it imports."""
    out = [device if device == "cuda" else "torch-cpu"]
    if device == "cuda":
        try:
            import cupy  # noqa: F401
            out.append("cupy")
        except Exception:
            pass
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for gpu.json and gpu_check.log")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda: torch on the GPU (and CuPy); cpu: torch on the CPU (CI)")
    ap.add_argument("--quick", action="store_true", help="small sizes (CI)")
    ap.add_argument("--bundle", default=os.path.join(ROOT, ".gpu_bundle"),
                    help="a folder of pure-Python packages put first on sys.path, if it exists")
    ap.add_argument("--forbid", default=FORBID, help="packages refused (comma-separated)")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="parts not started after this many seconds are skipped")
    ap.add_argument("--parts", default="env,limits,checks,engine,reads,forensics")
    args = ap.parse_args(argv)
    bundle = args.bundle if os.path.isdir(args.bundle) else None
    if bundle:
        sys.path.insert(0, os.path.abspath(bundle))
    sys.path.insert(0, ROOT)
    forbid = [x for x in args.forbid.split(",") if x]
    sys.meta_path.insert(0, _Refuse(forbid))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from scripts import gpu_parts as P
    from scripts import gpu_throughput as T
    device = args.device
    rep = Report(args.out, args.budget_s, {"device": device, "quick": args.quick,
                                           "forbid": forbid, "argv": sys.argv[1:]})
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            rep.data["parts"]["env"] = {"error": "torch.cuda.is_available() is False"}
            rep.save()
            rep.log("no CUDA device: nothing to check")
            return 2
    wanted = args.parts.split(",")
    q = args.quick
    threads = T.cpu_threads()
    backend = "cuda" if device == "cuda" else "torch-cpu"  # the device's torch
    lim = {}
    if "env" in wanted:
        rep.part("env", env, device, bundle)
    if "limits" in wanted:
        lim = rep.part("limits", T.limits, device, q) or {}
    if "checks" in wanted:
        rep.part("checks", P.checks, backends(device), q, rep.log)
    if "engine" in wanted:
        with tempfile.TemporaryDirectory(prefix="pf-gpu-") as runs:
            rep.part("engine", P.engine, device, q, runs)
    for name in ("reads", "forensics"):
        if name in wanted and not lim:  # their shares of the limits need the limits
            rep.data["parts"][name] = {"skipped": "no hardware limits measured"}
    if "reads" in wanted and lim:
        sizes = (2_000,) if q else (10_000, 100_000)
        rep.part("reads", lambda: [T.reads(backend, n, lim, threads, old_path=n <= 10_000)
                                   for n in sizes])
    if "forensics" in wanted and lim:
        n, side, leaf = (12, 64, 4) if q else (192, 512, 24)
        rep.part("forensics", T.forensics, backend, n, side, lim, threads, leaf)
    std = set(getattr(sys, "stdlib_module_names", ()))
    rep.data["imported"] = sorted({m.split(".")[0] for m in list(sys.modules)} - std)
    rep.save()
    rep.log(f"ok: {rep.data['ok']} ({rep.path})")
    return 0 if rep.data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
