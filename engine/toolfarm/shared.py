"""Shared files on a node: materialised once into node scratch with a digest check, cut into
volumes when segmented, and prepared once (``makeblastdb``, ``hmmpress``), under a per-node
lock, so every tool process on the node reuses one copy.

The first worker of a node to arrive takes the lock (``fcntl.flock`` on a file in the scratch
directory) and does the work; the others wait on the lock and find the stamp. The stamp names
the digest of everything that decided the prepared files, so a changed database or preparation
is never mistaken for a ready one, and a half-written copy (a worker killed mid-write) is
redone: files are written under a temporary name, checked and renamed.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import time
from typing import Callable

from ..errors import PairflowError
from .spec import expand

STAMP = "ready.json"


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def scratch_dir(root: str, farm_digest: str, node_id: str) -> str:
    """A node's scratch directory of one farm: one per farm (spec and inputs) and Ray node, so
    two nodes sharing a file system (or one machine) still prepare their own copy."""
    return os.path.join(root, f"pairflow-farm-{farm_digest[:16]}-{node_id[:12]}")


def shared_paths(scratch: str, shared: dict[str, str], volumes: int,
                 segment: str | None) -> list[dict[str, str]]:
    """Per volume: shared name -> the node-local path the tool is given."""
    base = {name: os.path.join(scratch, "shared", name + _suffix(path))
            for name, path in shared.items()}
    if volumes <= 1:
        return [base]
    return [{**base, segment: f"{base[segment]}.v{v}{_suffix(shared[segment])}"}
            for v in range(volumes)]


def _suffix(path: str) -> str:
    ext = os.path.splitext(path)[1]
    return ext if ext and len(ext) <= 8 else ""


def prepare_node(scratch: str, shared: dict[str, dict], prepare: list[list[str]],
                 volumes: list[tuple[int, int]] | None, segment: str | None,
                 fetch: Callable[[object], bytes], values: dict[str, str]) -> dict:
    """Materialise and prepare a node's shared files once; returns what this call did.

    ``shared``: name -> {"path": the user's path (for its suffix), "digest", "ref"}; ``fetch``
    turns a ref into the file's bytes (``ray.get`` on a worker); ``volumes``: byte ranges of
    the segmented file. Every caller on the node returns the same paths; only the first
    fetches, writes and prepares (``fetched_bytes`` > 0 on that call only)."""
    os.makedirs(os.path.join(scratch, "shared"), exist_ok=True)
    key = hashlib.sha256(json.dumps([{n: s["digest"] for n, s in sorted(shared.items())},
                                     prepare, volumes, segment], sort_keys=True).encode())
    key = key.hexdigest()
    n_vol = len(volumes) if volumes else 1
    paths = shared_paths(scratch, {n: s["path"] for n, s in shared.items()}, n_vol, segment)
    report = {"fetched_bytes": 0, "prepared": False, "seconds": 0.0, "waited_s": 0.0}
    t0 = time.perf_counter()
    with open(os.path.join(scratch, ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        report["waited_s"] = time.perf_counter() - t0
        try:
            stamp = _read_stamp(scratch)
            if stamp.get("key") == key:
                return {**report, **stamp, "paths": paths}
            for name, s in sorted(shared.items()):
                data = fetch(s["ref"])
                if bytes_digest(data) != s["digest"]:
                    raise PairflowError(f"farm: shared file {name} ({s['path']}) arrived with "
                                        f"another digest than it was sent with")
                _write(paths[0][name], data)
                report["fetched_bytes"] += len(data)
                if volumes and name == segment:
                    for v, (a, b) in enumerate(volumes):
                        _write(paths[v][name], data[a:b])
            for v, vol_paths in enumerate(paths):
                vals = {**values, **{f"shared:{n}": p for n, p in vol_paths.items()}}
                for tpl in prepare:
                    argv = expand(tpl, vals)
                    proc = subprocess.run(argv, cwd=scratch, stdin=subprocess.DEVNULL,
                                          capture_output=True)
                    if proc.returncode != 0:
                        raise PairflowError(
                            f"farm: node preparation {' '.join(argv)} exited with "
                            f"{proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}")
            report["prepared"] = True
            report["seconds"] = time.perf_counter() - t0
            stamp = {"key": key, "node_bytes": report["fetched_bytes"],
                     "prepare_s": report["seconds"]}
            _write(os.path.join(scratch, STAMP), json.dumps(stamp).encode())
            return {**report, **stamp, "paths": paths}
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read_stamp(scratch: str) -> dict:
    try:
        with open(os.path.join(scratch, STAMP)) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def _write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
