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
