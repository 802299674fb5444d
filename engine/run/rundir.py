"""The run directory: the one interface between a run and whatever watches or resumes it.

See docs/run-directory.md for the format. Files are written whole under a temporary name and
renamed, or appended one JSON object per line and flushed, so a reader never mistakes a
half-written file for a complete one.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Any, Callable, Iterable

import numpy as np

# The run directory's files (docs/run-directory.md). The dashboard reads them by these names
# without importing the engine: a name changes here and there together, or not at all.
CONFIG = "config.yaml"        # the resolved configuration, written at start
"""A run's resolved configuration (Hydra's or the keyword arguments'), written at start."""
META = "meta.json"            # what the run is, written at start (and once the actors are up)
"""What a run is (kind, app, pair space, actors ...), written at start; docs/run-directory.md."""
STATUS = "status.json"        # state and heartbeat, replaced on every change
SUMMARY = "summary.json"      # written once at the end
TILE_PLAN = "tiles.json"      # all-pairs: the leaves in planned order
TILES = "tiles.jsonl"         # all-pairs: one line per finished tile
METRICS = "metrics.jsonl"     # cumulative snapshots
TRACE = "trace.jsonl"         # stage spans
TRACE_PARQUET = "trace.parquet"  # the spans again, at the end of the run
JOURNAL = "journal.jsonl"     # what was safely written (engine/run/journal.py)
PIPELINE = "pipeline.jsonl"   # pipelines: one line per re-plan
LOG = "run.log"               # Ray's own messages and the workers' output (engine/run/runtime.py)
RESULT = "result"             # the sinks' outputs
FARM_UNITS = "units.json"     # farms: the inputs cut into units (resume reuses the cut)
FARM_LOG = "farm.jsonl"       # farms: one line per tool run of a unit (worker, time, outcome)


def _default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def dumps(obj: Any) -> str:
    return json.dumps(obj, default=_default, separators=(",", ":"))


def _replace_atomically(path: str, write: Callable[[Any], None], sync: bool) -> None:
    """Write through a temporary file of this process *and thread*, then rename: readers see
    the old file or the new one, never half of one; two threads writing one file (the progress
    thread and the driver, both writing status.json) no longer share a temporary file, which
    left one of them renaming a file the other had already moved; a failed write removes its
    temporary file."""
    tmp = f"{path}.tmp{os.getpid()}.{threading.get_ident()}"
    try:
        with open(tmp, "w") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` whole: under a temporary name, synced, then renamed."""
    _replace_atomically(path, lambda fh: json.dump(obj, fh, default=_default, indent=1), True)


def write_json_rows(path: str, rows: Iterable[dict], chunk: int = 4096) -> None:
    """Write a JSON list of flat dicts (one per line; a row may come as its JSON text already)
    as ``write_json`` does, from an iterator:
    a tile plan of 10^6 rows never exists as one list, and goes through the C encoder a chunk
    at a time (``indent`` takes the pure-Python one, ~10x slower)."""
    def write(fh):
        fh.write("[")
        first = True
        batch: list = []

        def flush():
            nonlocal first
            if batch:
                fh.write(("\n" if first else ",\n") + ",\n".join(
                    r if isinstance(r, str) else _plain_dumps(r) for r in batch))
                first = False
                batch.clear()
        for row in rows:
            batch.append(row)
            if len(batch) >= chunk:
                flush()
        flush()
        fh.write("\n]\n")
    _replace_atomically(path, write, True)


_plain_dumps = json.JSONEncoder(separators=(",", ":"), default=_default).encode


def write_text(path: str, text: str) -> None:
    _replace_atomically(path, lambda fh: fh.write(text), False)


def read_json(path: str, default=None):
    """The JSON object in ``path``, or ``default`` when it is missing or not (yet) valid JSON."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def read_jsonl(path: str) -> list[dict]:
    """Every complete line; a partial last line (a writer mid-append) is ignored."""
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return out


class JsonlWriter:
    """Append-only JSON Lines, flushed per batch."""

    def __init__(self, path: str):
        self.path = path
        self.fh = open(path, "a", buffering=1 << 16)

    def write(self, records) -> None:
        if not records:
            return
        self.fh.write("".join(dumps(r) + "\n" for r in records))
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


ENDED = ("finished", "failed", "interrupted")  # the states a run stops in


class RunDir:
    """A run directory by its path: its files by name, ``result/``, and ``status.json``."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def result_dir(self) -> str:
        return self.file(RESULT)

    def create(self) -> "RunDir":
        os.makedirs(self.result_dir, exist_ok=True)
        return self

    def set_status(self, state: str, error: str | None = None, **extra) -> None:
        now = time.time()
        status = {"state": state, "error": error, "updated": now,
                  "finished": now if state in ENDED else None, **extra}
        write_json(self.file(STATUS), status)


def new_run_dir(root: str, app: str) -> RunDir:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(root, app, stamp)
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return RunDir(path).create()


class RunRecorder:
    """The life of a run as its directory shows it: config, meta, heartbeat, summary, and how
    it ended. Every engine records through one, so a watcher reads every kind of run alike.

    ``starting()`` -> ``write_meta()`` -> ``running()`` and ``heartbeat()`` while it runs ->
    ``write_summary()`` and ``finished()``, or ``failed(error)`` or ``interrupted()`` (Ctrl-C:
    not an error, and resumable) at any point.
    """

    HEARTBEAT_S = 2.0  # status.json's "updated" is at most this old while a run is alive

    def __init__(self, rundir: RunDir):
        self.rundir = rundir
        self._last_beat = time.time()

    @classmethod
    def open(cls, run_dir: str | None, runs_root: str, name: str,
             resume: bool = False) -> "RunRecorder":
        """``run_dir`` (created if new), or a new directory under ``runs_root/name``; a resume
        needs the directory of a run that started (it has meta.json)."""
        from ..errors import PairflowError
        if resume and not run_dir:
            raise PairflowError("resume needs the run directory to resume (run_dir=...)")
        if run_dir and resume and not os.path.exists(os.path.join(run_dir, META)):
            raise PairflowError(f"nothing to resume in {run_dir}: it has no {META}")
        return cls(RunDir(run_dir).create() if run_dir else new_run_dir(runs_root, name))

    @property
    def path(self) -> str:
        return self.rundir.path

    def file(self, name: str) -> str:
        return self.rundir.file(name)

    def write_config(self, dump: dict) -> None:
        """The resolved configuration as YAML (JSON, which YAML reads, when OmegaConf cannot
        hold it)."""
        try:
            from omegaconf import OmegaConf
            text = OmegaConf.to_yaml(OmegaConf.create(dump))
        except Exception:  # a config that OmegaConf cannot hold still gets written
            text = dumps(dump)
        write_text(self.file(CONFIG), text)

    def write_meta(self, meta: dict) -> None:
        write_json(self.file(META), meta)

    def read_meta(self) -> dict | None:
        return read_json(self.file(META))

    def has_meta(self) -> bool:
        return os.path.exists(self.file(META))

    def write_summary(self, summary: dict) -> None:
        write_json(self.file(SUMMARY), summary)

    def starting(self) -> None:
        self.rundir.set_status("starting")

    def running(self) -> None:
        self._last_beat = time.time()
        self.rundir.set_status("running")

    def heartbeat(self) -> bool:
        """Mark the run alive when the last mark is ``HEARTBEAT_S`` old; True if it wrote."""
        if time.time() - self._last_beat <= self.HEARTBEAT_S:
            return False
        self.running()
        return True

    def finished(self) -> None:
        self.rundir.set_status("finished")

    def failed(self, error: str, **extra) -> None:
        self.rundir.set_status("failed", error=error, **extra)

    def interrupted(self, reason: str = "interrupted") -> None:
        """Stopped before the end, not failed (Ctrl-C, or ``cancel()``: the reason): the
        journal holds what was done and a resume continues from it."""
        self.rundir.set_status("interrupted", error=None, reason=reason)
