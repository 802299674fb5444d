"""L4: parsed items kept across runs, in a local directory or at any fsspec URL.

A second run over overlapping inputs should parse nothing it already has. An entry is keyed by
a content digest, never by a cheap identity (size + mtime + URL say nothing about the bytes on a
remote store): SHA-256 of the raw bytes the load task fetched, of the item's key (one file's
bytes hold many records' items) and of the *parse parameters* (``app.parse_params()``: the
settings that change what ``parse`` returns, e.g. k for k-mer sets) and the host device the
item was preprocessed for (where the engine preprocesses in the load task, the preprocessed item
is what is stored). A record item (``url(key)`` is None: the app reads its file through a cache
of its own) is digested by its file's bytes (``app.store_source(key)``); an item with no source
at all (``FunctionApp``'s ``load(key)``) has no content to digest and bypasses the store.

An entry is one file ``ROOT/ab/abcdef....item``: a header (magic, payload length, SHA-256 of the
payload) and the item as typed data (``codec.py``: a JSON manifest and ``.npy`` arrays, object
dtypes refused), never a pickle: a shared store is written by others, and reading an entry must
not run what they wrote. An item the app's codec cannot write is parsed on every run, never
stored, and counted (``unstorable``). An entry is written under a temporary name and renamed
into place (on object stores, where a single PUT is atomic, written in one PUT), so nothing
half-written carries an entry's name; a reader checks length, checksum and the payload's
structure, and an entry that fails them is counted as corrupt and parsed (and written) again.

On a local store the entry's name is a hex digest under the root, never a caller's text (no
``..``, no absolute path), files and directories take the user's umask, and an entry or shard
directory that is a symbolic link is neither read through nor written through (an entry link is
counted corrupt and replaced by a real file).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import uuid
from dataclasses import dataclass, field

from ..app import default_parse_params
from ..codec import ItemCodec, Unencodable, item_codec

MAGIC = b"PFL4\x02"  # \x01: the pickled entries of before; read as corrupt, parsed again
_HEADER = struct.Struct(">5sQ32s")  # magic, payload length, SHA-256 of the payload


def parse_params(app) -> dict:
    """``app.parse_params()`` if the app has it, else ``default_parse_params``."""
    hook = getattr(app, "parse_params", None)
    params = hook() if callable(hook) else default_parse_params(app)
    return {"app": f"{type(app).__module__}.{type(app).__qualname__}", **params}


@dataclass
class StoreStats:
    """Per process (a load task's share travels back in its info)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0       # entries that failed their check: parsed again and rewritten
    bypassed: int = 0      # items without bytes to digest
    unstorable: int = 0    # items the codec cannot write: parsed again by every run
    bytes_read: int = 0
    bytes_written: int = 0
    write_errors: int = 0  # a failed write costs the next run a parse, never this run

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def add_stats(total: dict, part: dict) -> dict:
    for k, v in part.items():
        total[k] = total.get(k, 0) + v
    return total


@dataclass
class ItemStore:
    """The store at ``url`` for one app's parse parameters; cheap to pickle (the file system is
    opened on first use in each process)."""

    url: str
    params: dict
    codec: ItemCodec = field(default_factory=ItemCodec)
    params_digest: str = field(init=False)

    def __post_init__(self):
        text = json.dumps(self.params, sort_keys=True, default=repr)
        self.params_digest = hashlib.sha256(text.encode()).hexdigest()
        self._fs = None

    def __getstate__(self):
        return {"url": self.url, "params": self.params, "codec": self.codec,
                "params_digest": self.params_digest}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._fs = None

    def _open(self):
        if self._fs is None:
            import fsspec
            self._fs, self._root = fsspec.core.url_to_fs(self.url)
            self._local = "file" in (self._fs.protocol if isinstance(self._fs.protocol, tuple)
                                     else (self._fs.protocol,))
        return self._fs

    def digest(self, key: str, content: bytes, preprocess_on: str | None) -> str:
        """The entry's name: SHA-256 over the parse parameters, the device, the key and
        ``content`` (the SHA-256 digest of the bytes the item is parsed from)."""
        h = hashlib.sha256()
        h.update(self.params_digest.encode())
        h.update(b"\0" + str(preprocess_on).encode() + b"\0" + key.encode() + b"\0")
        h.update(content)
        return h.hexdigest()

    def path(self, digest: str) -> str:
        """The entry's path under the root: ``digest`` must be a SHA-256 hex digest, so no
        entry is named outside the root."""
        if type(digest) is not str or not _DIGEST.fullmatch(digest):
            raise ValueError(f"an L4 store entry is named by a SHA-256 hex digest, not {digest!r}")
        self._open()
        return f"{self._root.rstrip('/')}/{digest[:2]}/{digest}.item"

    def get(self, digest: str, stats: StoreStats):
        """``(True, item)`` for a sound entry, ``(False, None)`` when absent or corrupt."""
        fs, path = self._open(), self.path(digest)
        try:
            blob = _read_local(path) if self._local else fs.cat_file(path)
        except FileNotFoundError:
            stats.misses += 1
            return False, None
        except _NotAFile:
            stats.corrupt += 1
            return False, None
        stats.bytes_read += len(blob)
        item = _decode(blob, self.codec)
        if item is _BAD:
            stats.corrupt += 1
            return False, None
        stats.hits += 1
        return True, item

    def put(self, digest: str, item, stats: StoreStats) -> None:
        """Write an entry so that no reader ever sees part of it under its name."""
        fs, path = self._open(), self.path(digest)
        try:
            payload = self.codec.encode(item)
        except Unencodable:
            stats.unstorable += 1
            return
        blob = _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
        try:
            if self._local:
                _write_local(path, blob)
            else:
                fs.pipe_file(path, blob)  # one PUT: all or nothing on object stores
        except OSError:
            stats.write_errors += 1
            return
        stats.bytes_written += len(blob)

    def entries(self) -> list[str]:
        """Every complete entry's path (tests and tools)."""
        fs = self._open()
        try:
            return sorted(p for p in fs.find(self._root) if p.endswith(".item"))
        except FileNotFoundError:
            return []


_BAD = object()
_DIGEST = re.compile(r"[0-9a-f]{64}")


class _NotAFile(OSError):
    """A local entry that is a symbolic link, or not a regular file."""


def _read_local(path: str) -> bytes:
    """A local entry's bytes, never through a symbolic link (the entry's or its shard
    directory's): ``_NotAFile`` for one, or for anything but a regular file."""
    if os.path.islink(os.path.dirname(path)):
        raise _NotAFile(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _NotAFile(path) from None  # ELOOP: a link; or unreadable
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _NotAFile(path)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _write_local(path: str, blob: bytes) -> None:
    """Write under a temporary name and rename it over the entry (which replaces a link, never
    its target); files and directories get the process's umask, as any file it writes."""
    shard = os.path.dirname(path)
    os.makedirs(shard, exist_ok=True)
    if not stat.S_ISDIR(os.lstat(shard).st_mode):
        raise _NotAFile(shard)  # a linked shard directory would put the entry elsewhere
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        with os.fdopen(fd, "wb", closefd=False) as fh:
            fh.write(blob)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)  # atomic within one directory
    except OSError:
        os.unlink(tmp)
        raise
_SOURCES: dict = {}  # per process: (url, size, mtime_ns) of a local file -> SHA-256 digest
_SOURCES_KEPT = 64


def content_digest(raw: bytes) -> bytes:
    return hashlib.sha256(raw).digest()


def source_digest(url: str) -> bytes:
    """SHA-256 of the file a record item is read from (``app.store_source(key)``): the app
    reads records through its own per-process cache, so the bytes are fetched here once per
    file and process. A local file's digest is reused while its size and mtime stay the same
    within this process (as the record cache itself does), a shipped file's for the run;
    anything else is read again."""
    from ...run.io import _PROVIDED, fetch
    ident = None
    if url in _PROVIDED:
        ident = ("shipped", url)
    elif "://" not in url or url.startswith("file://"):
        try:
            st = os.stat(url[7:] if url.startswith("file://") else url)
            ident = (url, st.st_size, st.st_mtime_ns)
        except OSError:
            ident = None
    if ident is not None and ident in _SOURCES:
        return _SOURCES[ident]
    digest = content_digest(fetch(url))
    if ident is not None:
        if len(_SOURCES) >= _SOURCES_KEPT:
            _SOURCES.pop(next(iter(_SOURCES)))
        _SOURCES[ident] = digest
    return digest


def _decode(blob: bytes, codec: ItemCodec):
    if len(blob) < _HEADER.size:
        return _BAD
    magic, length, checksum = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or \
            hashlib.sha256(payload).digest() != checksum:
        return _BAD
    try:
        return codec.decode(payload)
    except Exception:  # Undecodable, or a named dataclass that refuses its fields
        return _BAD


def open_store(url: str | None, app) -> ItemStore | None:
    """The run's store (``cache.store``), or None when it is off."""
    if not url:
        return None
    return ItemStore(str(url), parse_params(app), item_codec(app))


def store_summary(store: ItemStore | None, cache_stats: list[dict],
                  probe: dict | None = None) -> dict | None:
    """``summary.json``'s ``store``: the URL, the parse parameters, the counters summed over the
    nodes and per node, the driver's probe as one more ("driver"); ``parses`` = items parsed
    (misses, corrupt entries and items without bytes)."""
    if store is None:
        return None
    per_node = {s["node"]: s.get("store") or {} for s in cache_stats if "node" in s}
    if probe:
        per_node["driver"] = probe
    total: dict = {}
    for part in per_node.values():
        add_stats(total, part)
    total["parses"] = total.get("misses", 0) + total.get("corrupt", 0) + total.get("bypassed", 0)
    return {"url": store.url, "params": store.params, **total, "nodes": per_node}
