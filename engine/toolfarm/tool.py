"""One unit through the unmodified tool: argv built from the spec's templates, run without a
shell, the unit on stdin or in a temporary file, each output stream collected as bytes.

Pure of Ray: the worker actor calls ``run_unit`` and the benchmark calls it in one process to
measure what the farm adds around the tool.

Each run also reports the CPU seconds the tool took (``cpu_s``: user + system of the child and
of the children it waited for, from ``os.wait4``). Unit sizing reads those, not the wall clock:
on a machine shared with other work the wall time of a unit says how busy the machine was, the
CPU time what the unit cost (a blastp unit of 128 queries: 1.64-1.69 s CPU in three runs at load
13, 6.6-7.5 s wall).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
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
    cpu_s: float = 0.0       # CPU seconds of the tool's processes, every volume's run
    error: str = ""          # what went wrong, in words (exit status, timeout, missing output)


def run_unit(spec: FarmSpec, data: bytes, volume_paths: list[dict[str, str]], scratch: str,
             values: dict[str, str]) -> ToolResult:
    """Run the tool on one unit's bytes once per volume and merge each stream's outputs."""
    t0 = time.perf_counter()
    cpu_s = 0.0
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
                proc = _run_measured(argv, data if spec.feed == "stdin" else None, tmp, env,
                                     spec.timeout_s)
            except subprocess.TimeoutExpired as exc:
                return ToolResult(False, returncode=None, stderr=_tail(exc.stderr),
                                  seconds=time.perf_counter() - t0, cpu_s=cpu_s,
                                  error=f"timed out after {spec.timeout_s} s")
            except OSError as exc:
                return ToolResult(False, returncode=None, stderr=str(exc),
                                  seconds=time.perf_counter() - t0, cpu_s=cpu_s,
                                  error=f"could not start {argv[0]}: {exc}")
            cpu_s += proc.cpu_s
            if proc.returncode != 0:
                return ToolResult(False, returncode=proc.returncode, stderr=_tail(proc.stderr),
                                  seconds=time.perf_counter() - t0, cpu_s=cpu_s,
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
                                      seconds=time.perf_counter() - t0, cpu_s=cpu_s,
                                      error=f"the tool exited 0 but wrote no {s} file")
            per_volume.append(outs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    names = record_names(data, spec.cut) if len(per_volume) > 1 else []
    merged = {s: merge(spec.merge.get(s), [o[s] for o in per_volume], names)
              for s in spec.streams}
    return ToolResult(True, merged, 0, "", time.perf_counter() - t0, cpu_s)


@dataclass
class _Finished:
    returncode: int
    stdout: bytes
    stderr: bytes
    cpu_s: float


def _run_measured(argv: list[str], stdin: bytes | None, cwd: str, env,
                  timeout: float | None) -> _Finished:
    """``subprocess.run(argv, input=stdin, capture_output=True, ...)`` that also returns the
    child's CPU seconds: the child is reaped here with ``os.wait4`` (its resource usage), after
    ``os.waitid(..., WNOWAIT)`` has seen it exit, so a timeout's kill can never reach another
    process that took its pid. A timeout kills it and raises ``TimeoutExpired``."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else
                            subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd, env=env)
    out: dict[str, bytes] = {}

    def read(name: str, pipe) -> None:
        with pipe:
            out[name] = pipe.read()

    def feed() -> None:
        try:
            with proc.stdin:
                proc.stdin.write(stdin)
        except (BrokenPipeError, OSError):  # the tool exited without reading it all
            pass
    pumps = [threading.Thread(target=read, args=("stdout", proc.stdout), daemon=True),
             threading.Thread(target=read, args=("stderr", proc.stderr), daemon=True)]
    if stdin is not None:
        pumps.append(threading.Thread(target=feed, daemon=True))
    for t in pumps:
        t.start()
    lock, state = threading.Lock(), {"exited": False, "killed": False}

    def kill() -> None:
        with lock:
            if not state["exited"]:
                state["killed"] = True
                proc.kill()
    timer = threading.Timer(timeout, kill) if timeout is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        while True:
            try:
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
                break
            except InterruptedError:
                continue
    except BaseException:  # interrupted: no tool left behind
        kill()
        raise
    finally:
        with lock:
            state["exited"] = True
        if timer is not None:
            timer.cancel()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait again
    for t in pumps:
        t.join()
    if state["killed"]:
        raise subprocess.TimeoutExpired(argv, timeout, out.get("stdout"), out.get("stderr"))
    return _Finished(proc.returncode, out.get("stdout", b""), out.get("stderr", b""),
                     usage.ru_utime + usage.ru_stime)


def _tail(stderr) -> str:
    if not stderr:
        return ""
    if isinstance(stderr, bytes):
        stderr = stderr.decode(errors="replace")
    return stderr[-STDERR_KEEP:]
