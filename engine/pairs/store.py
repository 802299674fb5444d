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
payload) and the pickled item. It is written under a temporary name and renamed into place (on
object stores, where a single PUT is atomic, written in one PUT), so nothing half-written
carries an entry's name; a reader checks length and checksum, and an entry that fails them is
counted as corrupt and parsed (and written) again. Entries are pickles: a store is trusted like
the code that reads it.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import struct
import uuid
from dataclasses import dataclass, field

MAGIC = b"PFL4\x01"
_HEADER = struct.Struct(">5sQ32s")  # magic, payload length, SHA-256 of the payload


def default_parse_params(app) -> dict:
    """What an app's parse may depend on, when it does not say: its class and every public
    attribute that is a plain scalar (k, canonical, fmt, ...). Lists (the inputs) are left out,
    so a run over more inputs still finds the items of the earlier ones; an app whose parse
    depends on anything else overrides ``parse_params``."""
    out = {"app": f"{type(app).__module__}.{type(app).__qualname__}"}
    for name, value in sorted(vars(app).items()):
        if not name.startswith("_") and isinstance(value, (bool, int, float, str, type(None))):
            out[name] = value
    return out


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
    params_digest: str = field(init=False)

    def __post_init__(self):
        text = json.dumps(self.params, sort_keys=True, default=repr)
        self.params_digest = hashlib.sha256(text.encode()).hexdigest()
        self._fs = None

    def __getstate__(self):
        return {"url": self.url, "params": self.params, "params_digest": self.params_digest}

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
        self._open()
        return f"{self._root.rstrip('/')}/{digest[:2]}/{digest}.item"

    def get(self, digest: str, stats: StoreStats):
        """``(True, item)`` for a sound entry, ``(False, None)`` when absent or corrupt."""
        fs, path = self._open(), self.path(digest)
        try:
            blob = fs.cat_file(path)
        except FileNotFoundError:
            stats.misses += 1
            return False, None
        stats.bytes_read += len(blob)
        item = _decode(blob)
        if item is _BAD:
            stats.corrupt += 1
            return False, None
        stats.hits += 1
        return True, item

    def put(self, digest: str, item, stats: StoreStats) -> None:
        """Write an entry so that no reader ever sees part of it under its name."""
        fs, path = self._open(), self.path(digest)
        payload = pickle.dumps(item, protocol=5)
        blob = _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
        try:
            if self._local:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.tmp-{uuid.uuid4().hex}"
                with open(tmp, "wb") as fh:
                    fh.write(blob)
                os.replace(tmp, path)  # atomic within one directory
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
    from ..run.io import _PROVIDED, fetch
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


def _decode(blob: bytes):
    if len(blob) < _HEADER.size:
        return _BAD
    magic, length, checksum = _HEADER.unpack_from(blob)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or \
            hashlib.sha256(payload).digest() != checksum:
        return _BAD
    try:
        return pickle.loads(payload)
    except Exception:
        return _BAD


def open_store(url: str | None, app) -> ItemStore | None:
    """The run's store (``cache.store``), or None when it is off."""
    if not url:
        return None
    return ItemStore(str(url), parse_params(app))


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
