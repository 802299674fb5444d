"""Reading an item's bytes through fsspec, with errors that name the URL.

A process may be *provided* some URLs' bytes from elsewhere (``provide``): a worker on a node
that cannot see the driver's local files gets them through the object store instead
(``engine/run/shipping.py``); every reader of inputs goes through ``fetch``, so parsers and
catalogs need not know where bytes come from. ``fetch`` counts what it reads (``io_stats``),
per process: the engine reports GETs and bytes per node.
"""
from __future__ import annotations

import threading
from typing import Callable

from ..errors import InputError

_PROVIDED: dict[str, Callable[[], bytes]] = {}
_STATS_LOCK = threading.Lock()
_STATS: dict[str, dict[str, int]] = {}  # scheme -> {"gets", "bytes"}


def provide(url: str, source: Callable[[], bytes]) -> None:
    """From now on ``fetch(url)`` in this process returns ``source()`` instead of reading."""
    _PROVIDED[url] = source


def scheme(url: str) -> str:
    """The fsspec protocol of a URL ("file" for a plain path)."""
    head, sep, _ = url.partition("://")
    return head.split("::")[-1] if sep else "file"


def _count(kind: str, nbytes: int) -> None:
    with _STATS_LOCK:
        s = _STATS.setdefault(kind, {"gets": 0, "bytes": 0})
        s["gets"] += 1
        s["bytes"] += nbytes


def io_stats(reset: bool = False) -> dict[str, dict[str, int]]:
    """GETs (whole reads) and bytes read by ``fetch`` in this process, by scheme ("shipped":
    from the driver through the object store)."""
    with _STATS_LOCK:
        out = {k: dict(v) for k, v in _STATS.items()}
        if reset:
            _STATS.clear()
    return out


def fetch(url: str) -> bytes:
    """The raw bytes at an fsspec URL (no decompression: parsers decide)."""
    source = _PROVIDED.get(url)
    if source is not None:
        raw = source()
        _count("shipped", len(raw))
        return raw
    import fsspec
    try:
        with fsspec.open(url, "rb", compression=None) as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(url, "file not found") from None
    except IsADirectoryError:
        raise InputError(url, "is a directory, not a file") from None
    except PermissionError:
        raise InputError(url, "permission denied") from None
    except ImportError as exc:  # s3://, gs://... need their fsspec backend installed
        raise InputError(url, f"cannot read: {exc}") from None
    except OSError as exc:
        raise InputError(url, f"cannot read: {exc}") from None
    _count(scheme(url), len(raw))
    return raw


def _store(url: str):
    """(filesystem, root path) of a result store URL, or a PairflowError naming it."""
    import fsspec
    from ..errors import PairflowError
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise PairflowError(f"result store {url}: {exc}") from None


def check_store(url: str) -> None:
    """Fail before any compute when the result store cannot be written: its scheme has no
    fsspec backend, or its root cannot be made."""
    from ..errors import PairflowError
    fs, root = _store(url)
    try:
        fs.makedirs(root, exist_ok=True)
    except Exception as exc:
        raise PairflowError(f"result store {url}: cannot create it: "
                            f"{type(exc).__name__}: {exc}") from None


def publish(outputs: dict, result_dir: str, url: str) -> dict:
    """Copy a run's finished outputs (files or directory trees under ``result_dir``) to the
    result store ``url``, keeping their paths relative to ``result_dir``; an output already
    there (a resumed run published again) is replaced whole. Returns sink name -> URL. Only
    the driver calls this, after the sinks finalized: workers never write to the store."""
    import os

    from ..errors import PairflowError
    fs, root = _store(url)
    out = {}
    for name, path in outputs.items():
        if not isinstance(path, str) or not os.path.exists(path):
            continue
        rel = os.path.relpath(path, result_dir).replace(os.sep, "/")
        target = f"{root.rstrip('/')}/{rel}"
        try:
            if fs.exists(target):
                fs.rm(target, recursive=True)
            if os.path.isdir(path):
                fs.put(path.rstrip(os.sep) + "/", target + "/", recursive=True)
            else:
                fs.put_file(path, target)
        except Exception as exc:
            raise PairflowError(f"result store {url}: writing {rel} failed: "
                                f"{type(exc).__name__}: {exc}") from None
        out[name] = url.rstrip("/") + "/" + rel
    return out
