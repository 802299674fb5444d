"""One unit through the unmodified tool: argv built from the spec's templates, run without a
shell, the unit on stdin or in a temporary file, each output stream collected as bytes.

Pure of Ray: the worker actor calls ``run_unit`` and the benchmark calls it in one process to
measure what the farm adds around the tool.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from .segment import merge
from .spec import STDOUT, FarmSpec, expand
from .units import record_names

STDERR_KEEP = 4000  # bytes of a failing tool's stderr kept for the report


@dataclass
class ToolResult:
    ok: bool
    outputs: dict[str, bytes] = field(default_factory=dict)
    returncode: int | None = 0
    stderr: str = ""
    seconds: float = 0.0
    error: str = ""          # what went wrong, in words (exit status, timeout, missing output)


def run_unit(spec: FarmSpec, data: bytes, volume_paths: list[dict[str, str]], scratch: str,
             values: dict[str, str]) -> ToolResult:
    """Run the tool on one unit's bytes once per volume and merge each stream's outputs."""
    t0 = time.perf_counter()
    per_volume: list[dict[str, bytes]] = []
    tmp_root = os.path.join(scratch, "tmp")
    os.makedirs(tmp_root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="unit-", dir=tmp_root)
    try:
        input_path = os.path.join(tmp, "unit" + spec.input_suffix)
        if spec.feed == "file":
            with open(input_path, "wb") as fh:
                fh.write(data)
        for v, paths in enumerate(volume_paths):
            vals = {**values, "input": input_path, "scratch": scratch, "tmp": tmp,
                    **{f"shared:{n}": p for n, p in paths.items()},
                    **{f"out:{s}": os.path.join(tmp, f"out.{s}.{v}") for s in spec.streams
                       if s != STDOUT}}
            argv = expand(spec.program, vals)
            if len(volume_paths) > 1:
                argv += expand(spec.volume_args, vals)
            env = {**os.environ, **spec.env} if spec.env else None
            try:
                proc = subprocess.run(argv, input=data if spec.feed == "stdin" else None,
                                      stdin=None if spec.feed == "stdin" else subprocess.DEVNULL,
                                      capture_output=True, cwd=tmp, env=env,
                                      timeout=spec.timeout_s)
            except subprocess.TimeoutExpired as exc:
                return ToolResult(False, returncode=None, stderr=_tail(exc.stderr),
                                  seconds=time.perf_counter() - t0,
                                  error=f"timed out after {spec.timeout_s} s")
            except OSError as exc:
                return ToolResult(False, returncode=None, stderr=str(exc),
                                  seconds=time.perf_counter() - t0,
                                  error=f"could not start {argv[0]}: {exc}")
            if proc.returncode != 0:
                return ToolResult(False, returncode=proc.returncode, stderr=_tail(proc.stderr),
                                  seconds=time.perf_counter() - t0,
                                  error=f"exit status {proc.returncode}")
            outs = {}
            for s in spec.streams:
                if s == STDOUT:
                    outs[s] = proc.stdout
                    continue
                try:
                    with open(vals[f"out:{s}"], "rb") as fh:
                        outs[s] = fh.read()
                except OSError:
                    return ToolResult(False, returncode=0, stderr=_tail(proc.stderr),
                                      seconds=time.perf_counter() - t0,
                                      error=f"the tool exited 0 but wrote no {s} file")
            per_volume.append(outs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = record_names(data, spec.cut) if len(per_volume) > 1 else []
    merged = {s: merge(spec.merge.get(s), [o[s] for o in per_volume], names)
              for s in spec.streams}
    return ToolResult(True, merged, 0, "", time.perf_counter() - t0)


def _tail(stderr) -> str:
    if not stderr:
        return ""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    return stderr[-STDERR_KEEP:]
