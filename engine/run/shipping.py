"""Runs where nothing is shared: inputs go out through the object store, results come back.

On a cluster whose nodes do not share a filesystem with the driver (``shared_fs=False``), a
worker must neither read the driver's local files nor write to its run directory:

* **inputs**: a local file (a plain path or ``file://``) is read by the driver once and put in
  the object store (``Shipment``); a worker installs the shipment (``install``), after which
  ``engine.run.io.fetch`` answers those URLs from the object store (Ray moves each object to a
  node once). URLs every node can reach (``s3://``, ``gs://``, ``http(s)://``) are read where
  they are needed. ``memory://`` lives in one process and reaches no worker: refused up front.
* **results**: ``Outbox`` keeps, in a worker, the run directory's JSON Lines records until the
  driver drains and appends them; for all-pairs, ``engine/pairs/sinks/shipped.py`` does the same
  with the tiles' encoded sink payloads and the journal, so the driver is the only process touching
  the run directory.

Ray is imported only inside the functions that need it (this module is imported without Ray).
"""
from __future__ import annotations

import os
from typing import Iterable

from .io import provide, scheme
from ..errors import InputError

# URLs that exist in one process only: no worker can ever read them
PROCESS_LOCAL = ("memory",)


def local_path(url: str) -> str | None:
    """The path of a URL on the driver's own filesystem, or None for a remote one."""
    kind = scheme(url)
    if kind == "file":
        return url.split("://", 1)[1] if "://" in url else url
    if kind == "local":
        return url.split("://", 1)[1]
    return None


def check_reachable(urls: Iterable[str]) -> None:
    """Refuse inputs no worker process can read, naming the first."""
    for url in urls:
        if scheme(url) in PROCESS_LOCAL:
            raise InputError(url, f"{scheme(url)}:// lives in the driver's process only: Ray "
                             "workers cannot read it; use a local file (shipped to the workers "
                             "through the object store), s3://, gs:// or http(s)://")


class Shipment:
    """Local input files put in the object store once by the driver; picklable (ObjectRefs)."""

    def __init__(self, refs: dict, nbytes: int, files: int):
        self.refs, self.nbytes, self.files = refs, nbytes, files

    @classmethod
    def of(cls, urls: Iterable[str]) -> "Shipment":
        """Read each local file of ``urls`` in the driver and put its bytes in the object
        store (remote URLs are left to the workers)."""
        import ray
        refs, total, files = {}, 0, 0
        for url in dict.fromkeys(urls):
            path = local_path(url)
            if path is None:
                continue
            try:
                with open(path, "rb") as fh:
                    raw = fh.read()
            except FileNotFoundError:
                raise InputError(url, "file not found") from None
            except OSError as exc:
                raise InputError(url, f"cannot read: {exc}") from None
            ref = ray.put(raw)
            total += len(raw)
            files += 1
            refs[url] = ref
            absolute = os.path.abspath(path)  # a worker may be handed either spelling
            refs.setdefault(absolute, ref)
        return cls(refs, total, files)

    def install(self) -> None:
        """Answer this shipment's URLs from the object store in this process (idempotent)."""
        for url, ref in self.refs.items():
            provide(url, _Getter(ref))

    def __len__(self) -> int:
        return len(self.refs)


class _Getter:
    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref

    def __call__(self) -> bytes:
        import ray
        return ray.get(self.ref)


def install(shipment: "Shipment | None") -> None:
    if shipment is not None:
        shipment.install()


def input_urls(app, keys) -> list[str]:
    """Every URL an app reads its items from: ``app.inputs()`` when it says (apps whose items
    are records of files read the files themselves), else ``app.url(key)`` of every key."""
    inputs = getattr(app, "inputs", None)
    urls = list(inputs()) if inputs is not None else []
    urls += [u for u in (app.url(k) for k in keys) if u]
    return list(dict.fromkeys(urls))


class Outbox:
    """JSON Lines files of the run directory written from a worker: records wait here by file
    name until the driver drains them. ``writer(name)`` has ``JsonlWriter``'s interface."""

    def __init__(self):
        self.pending: dict[str, list] = {}

    def writer(self, name: str) -> "_OutboxWriter":
        return _OutboxWriter(self, name)

    def drain(self) -> dict[str, list]:
        out, self.pending = self.pending, {}
        return out


class _OutboxWriter:
    def __init__(self, box: Outbox, name: str):
        self.box, self.name = box, name

    def write(self, records) -> None:
        if records:
            self.box.pending.setdefault(self.name, []).extend(records)

    def close(self) -> None:
        return None
