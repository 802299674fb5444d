"""The run directory: the one interface between a run and whatever watches or resumes it.

See docs/run-directory.md for the format. Files are written whole under a temporary name and
renamed, or appended one JSON object per line and flushed, so a reader never mistakes a
half-written file for a complete one.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import numpy as np


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


def write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, default=_default, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_text(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def read_json(path: str, default=None):
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

    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self.fh = open(path, "a", buffering=1 << 16)
        self.fsync = fsync

    def write(self, records) -> None:
        if not records:
            return
        self.fh.write("".join(dumps(r) + "\n" for r in records))
        self.fh.flush()
        if self.fsync:
            os.fsync(self.fh.fileno())

    def close(self) -> None:
        self.fh.close()


class RunDir:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def result_dir(self) -> str:
        return self.file("result")

    def create(self) -> "RunDir":
        os.makedirs(self.result_dir, exist_ok=True)
        return self

    def set_status(self, state: str, error: str | None = None, **extra) -> None:
        now = time.time()
        status = {"state": state, "error": error, "updated": now,
                  "finished": now if state in ("finished", "failed") else None, **extra}
        write_json(self.file("status.json"), status)

    def status(self) -> dict:
        return read_json(self.file("status.json"), {"state": "unknown"})


def new_run_dir(root: str, app: str) -> RunDir:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(root, app, stamp)
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return RunDir(path).create()
