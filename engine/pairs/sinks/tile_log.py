"""Staged tiles: the append-only logs a dense sink's writers put tiles in until the driver moves
them into the result's chunks (``sinks/dense.py``).

A chunk sized for the reader (megabytes) holds many tiles, computed by different actors in
different processes, maybe on different nodes. No two writers may ever touch one chunk, so no
tile writer writes chunks: each writing process appends its tiles to a log of its own (a file
no other process opens for writing), and the driver, the one writer of every chunk, moves them
into their chunks when the run ends. A result's file count grows with its chunks, a run's
staging with its writers, and neither with its tiles.

A record is one field of one tile:

    MAGIC (8 bytes) | header length (u32 LE) | CRC32 of the header (u32 LE) | header | payload

header: JSON ``{"field", "region": [r0, r1, c0, c1], "mirror", "dtype", "crc32"}``; payload: the
region's values in C order, ``dtype`` a plain number type (nothing here ever unpickles);
``mirror``: the transpose also belongs at [c0, c1) x [r0, r1) (a symmetric space's tile off the
diagonal); ``crc32``: the payload's. A reader finds records by their magic, so a damaged record
costs only itself: the record after it is found again.
"""
from __future__ import annotations

import functools
import json
import mmap
import os
import re
import struct
import threading
import uuid
import zlib
from array import array
from dataclasses import dataclass

import numpy as np

MAGIC = b"PFTILE\x00\x01"
_LENGTHS = struct.Struct("<II")
_PREFIX = len(MAGIC) + _LENGTHS.size
LOG_SUFFIX = ".log"


def plain_dtype(text: str) -> np.dtype:
    """A dtype a record may hold: booleans and numbers only (never Python objects, never
    structured types); ValueError otherwise."""
    dtype = np.dtype(text)
    if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"not a plain number type: {text!r}")
    return dtype


def encode_record(field: str, region, mirror: bool, data: np.ndarray) -> tuple[bytes, int]:
    """One record's bytes, and the CRC32 of its payload."""
    payload = np.ascontiguousarray(data).tobytes()
    crc = zlib.crc32(payload)
    header = json.dumps({"field": field, "region": [int(x) for x in region],
                         "mirror": bool(mirror), "dtype": data.dtype.str, "crc32": crc},
                        separators=(",", ":")).encode()
    return MAGIC + _LENGTHS.pack(len(header), zlib.crc32(header)) + header + payload, crc


class LogWriter:
    """A process's own log in ``directory``: appended by one writer (locked: a device actor
    writes tiles from several threads), each append one ``os.write`` that reaches the OS before
    the call returns, so what the journal then records is in the file even if the process
    dies. Not picklable state: a copy shipped elsewhere opens its own log."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}{LOG_SUFFIX}"
        self.path = os.path.join(directory, name)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self.lock = threading.Lock()

    def append(self, blob: bytes) -> None:
        with self.lock:
            view = memoryview(blob)
            while view:
                view = view[os.write(self.fd, view):]

    def close(self) -> None:
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


@dataclass(frozen=True)
class Record:
    path: str
    offset: int       # where its magic starts
    field: str
    region: tuple     # (r0, r1, c0, c1)
    mirror: bool
    dtype: np.dtype
    crc32: int        # of the payload
    start: int        # where the payload starts
    nbytes: int


class StagedTiles:
    """Every record of the logs in ``directory`` whose header reads back (payloads are checked
    when read: ``values``), found by (field, region); the logs stay mapped until ``close``.

    The index is columns of ints (path, offsets, field, region, dtype, CRC), sorted by (field,
    region), not a ``Record`` per record: a run of 10^6 tiles held ~10^6 of those and a dict of
    their keys (most of a GiB in the driver at finalize). A ``Record`` is made when asked for."""

    _COLS = ("path", "offset", "start", "nbytes", "r0", "r1", "c0", "c1", "crc32", "field",
             "dtype", "mirror")

    def __init__(self, directory: str):
        self.maps: dict[str, mmap.mmap] = {}
        self.paths: list[str] = []
        self.fields: dict[str, int] = {}
        self.dtypes: list[np.dtype] = []
        blocks: list[np.ndarray] = []  # (records, 12) tables, a log (or part of one) each
        if os.path.isdir(directory):
            dtype_ids: dict[str, int] = {}
            for name in sorted(os.listdir(directory)):
                if not name.endswith(LOG_SUFFIX):
                    continue
                path = os.path.join(directory, name)
                with open(path, "rb") as fh:
                    if os.fstat(fh.fileno()).st_size == 0:
                        continue
                    self.maps[path] = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                self.paths.append(path)
                p = len(self.paths) - 1
                # the records written whole one after another, without a JSON parse each;
                # from the first that is not (damage, a torn last record), one at a time
                table, pos = _scan_fast(self.maps[path], p, self.fields, dtype_ids, self.dtypes)
                blocks.extend(table)
                cols = {c: array("q") for c in self._COLS}
                for rec in _scan(path, self.maps[path], pos):
                    d = dtype_ids.setdefault(rec.dtype.str, len(dtype_ids))
                    if d == len(self.dtypes):
                        self.dtypes.append(rec.dtype)
                    for c, v in zip(self._COLS, (
                            p, rec.offset, rec.start, rec.nbytes, *rec.region, rec.crc32,
                            self.fields.setdefault(rec.field, len(self.fields)), d,
                            int(rec.mirror))):
                        cols[c].append(v)
                if len(cols["r0"]):
                    blocks.append(np.stack([np.frombuffer(cols[x], np.int64)
                                            for x in self._COLS], axis=1))
                del cols
        # one (records, 12) table; the columns are views of it (the logs' builders let go)
        self.table = np.concatenate(blocks) if blocks else \
            np.zeros((0, len(self._COLS)), np.int64)
        del blocks
        self.cols = {x: self.table[:, i] for i, x in enumerate(self._COLS)}
        c = self.cols
        # sorted by (field, r0, c0, r1, c1), records of one key in the order they were found
        self.order = np.lexsort((c["c1"], c["r1"], c["c0"], c["r0"], c["field"]))
        k = [c[x][self.order] for x in ("field", "r0", "r1", "c0", "c1")]
        new = np.ones(len(self.order), bool)
        if len(self.order):
            new[1:] = np.any([x[1:] != x[:-1] for x in k], axis=0)
        self.group_starts = np.flatnonzero(new)
        # each key column at the groups' starts, contiguous: ``indices`` searches them
        self._group_keys = [np.ascontiguousarray(x[self.group_starts]) for x in k] if \
            len(self.order) else [np.zeros(0, np.int64)] * 5
        # one int per group, ascending with the sort: (field, r0, c0) in mixed radix, so a
        # lookup is one binary search (then r1, c1 checked among the few of one corner)
        g = self._group_keys
        self._radix = (int(g[1].max()) + 1, int(g[3].max()) + 1) if len(self.order) else (1, 1)
        self._corner = (g[0] * self._radix[0] + g[1]) * self._radix[1] + g[3]
        self.field_names = list(self.fields)

    def __len__(self) -> int:
        return len(self.order)

    def record(self, i: int) -> Record:
        """Record ``i`` (in the order the logs were read)."""
        row = dict(zip(self._COLS, self.table[i].tolist()))
        return Record(self.paths[row["path"]], row["offset"],
                      self.field_names[row["field"]],
                      (row["r0"], row["r1"], row["c0"], row["c1"]), bool(row["mirror"]),
                      self.dtypes[row["dtype"]], row["crc32"], row["start"], row["nbytes"])

    def groups(self, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every region staged for ``field``: (regions (g, 4) as r0, r1, c0, c1; their groups'
        numbers, for ``group``; whether any record of the region is mirrored)."""
        fid = self.fields.get(field)
        if fid is None or not len(self.order):
            return np.zeros((0, 4), np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
        g = np.flatnonzero(self._group_keys[0] == fid)
        regions = np.stack([self._group_keys[c][g] for c in range(1, 5)], axis=1)
        mirror = np.maximum.reduceat(self.cols["mirror"][self.order], self.group_starts)[g] > 0
        return regions, g, mirror

    def first_intact(self, g: int) -> np.ndarray | None:
        """The values of group ``g``'s first record whose payload matches its CRC (None: none
        does), read from the columns (finalize does this once per tile: no ``Record``)."""
        end = self.group_starts[g + 1] if g + 1 < len(self.group_starts) else len(self.order)
        for i in self.order[self.group_starts[g]:end].tolist():
            p, _, start, nbytes, r0, r1, c0, c1, crc, _, d, _ = self.table[i].tolist()
            raw = self.maps[self.paths[p]][start:start + nbytes]
            if zlib.crc32(raw) == crc:
                return np.frombuffer(raw, dtype=self.dtypes[d]).reshape(r1 - r0, c1 - c0)
        return None

    def group(self, g: int) -> list[Record]:
        """The records of group ``g`` (one field and region), in the order they were found."""
        end = self.group_starts[g + 1] if g + 1 < len(self.group_starts) else len(self.order)
        return [self.record(i) for i in self.order[self.group_starts[g]:end].tolist()]

    def indices(self, field: str, region) -> list[int]:
        fid = self.fields.get(field)
        if fid is None or not len(self.order):
            return []
        r0, r1, c0, c1 = (int(x) for x in region)
        if not (0 <= r0 < self._radix[0] and 0 <= c0 < self._radix[1]):
            return []
        key = (fid * self._radix[0] + r0) * self._radix[1] + c0
        g = int(np.searchsorted(self._corner, key))
        gk = self._group_keys
        while g < len(self._corner) and self._corner[g] == key:
            if gk[2][g] == r1 and gk[4][g] == c1:
                end = self.group_starts[g + 1] if g + 1 < len(self.group_starts) else \
                    len(self.order)
                return self.order[self.group_starts[g]:end].tolist()
            g += 1
        return []

    def get(self, field: str, region) -> list[Record]:
        return [self.record(i) for i in self.indices(field, region)]

    def values(self, rec: Record) -> np.ndarray | None:
        """The record's region values, or None when its payload no longer matches its CRC."""
        raw = self.maps[rec.path][rec.start:rec.start + rec.nbytes]
        if zlib.crc32(raw) != rec.crc32:
            return None
        r0, r1, c0, c1 = rec.region
        return np.frombuffer(raw, dtype=rec.dtype).reshape(r1 - r0, c1 - c0)

    def journal_crcs(self) -> np.ndarray:
        """Per record (in the order read): the CRC32 a journal entry names for it (its
        payload's; a mirrored record's chained with its transpose's, as a reader reads both
        regions), or -1 where the payload no longer matches the record's CRC. Records of one
        log and shape are read and checked together (10^6 tiles: a second, not a ``Record``,
        a slice and a transpose each)."""
        c, out = self.cols, np.full(len(self.table), -1, np.int64)
        if not len(out):
            return out
        shape = np.stack([c["path"], c["r1"] - c["r0"], c["c1"] - c["c0"], c["dtype"],
                          c["mirror"]], axis=1)
        by_key = np.lexsort(shape.T[::-1])  # records of one log and shape together
        sorted_shape = shape[by_key]
        cuts = np.r_[np.flatnonzero(np.r_[True, np.any(sorted_shape[1:] != sorted_shape[:-1],
                                                        axis=1)]), len(by_key)]
        keys = sorted_shape[cuts[:-1]]
        for g, (p, h, w, d, mirror) in enumerate(keys.tolist()):
            item = self.dtypes[d].itemsize
            nb = h * w * item
            group = by_key[cuts[g]:cuts[g + 1]]
            step = max(1, (64 << 20) // max(1, nb))  # at most ~64 MiB gathered at a time
            for lo in range(0, len(group), step):
                idx = group[lo:lo + step]
                buf = np.frombuffer(self.maps[self.paths[p]], np.uint8)
                data = buf[c["start"][idx, None] + np.arange(nb)]  # a copy: the map stays free
                del buf
                want = c["crc32"][idx]
                got = _crcs(data.tobytes(), nb, np.zeros(len(idx), np.int64))
                crc = want
                if mirror:
                    flip = data.reshape(len(idx), h, w, item).transpose(0, 2, 1, 3)
                    crc = _crcs(np.ascontiguousarray(flip).tobytes(), nb, want)
                out[idx] = np.where(got == want, crc, -1)
        return out

    def close(self) -> None:
        for m in self.maps.values():
            m.close()
        self.maps = {}


#: a header as ``encode_record`` writes it (``json.dumps``, compact, keys in this order, a
#: field name with no character JSON escapes): read by one regular expression, not ``json``
_HEADER = re.compile(
    re.escape(MAGIC) + rb'(.{8})(\{"field":"([^"\\]*)","region":\[(\d+),(\d+),(\d+),(\d+)\],'
    rb'"mirror":(true|false),"dtype":"([^"\\]+)","crc32":(\d+)\})', re.DOTALL)
#: bytes of a log read at a time by ``_scan_fast``
WINDOW = 4 << 20


def _scan_fast(m: mmap.mmap, p: int, fields: dict, dtype_ids: dict,
               dtypes: list) -> tuple[list[np.ndarray], int]:
    """The log's records from its start as long as each follows the last whole, as ``_scan``
    finds them (header CRC and lengths checked), as (records, 12) tables of
    ``StagedTiles._COLS`` (log ``p``); and where that stops (a damaged or torn record, a header
    written otherwise): ``_scan`` goes on from there. A few us a record, most of it the regular
    expression's match, where a JSON parse and a ``Record`` each cost ~30 (10^6 tiles: half a
    minute of a resume's start)."""
    size, pos, out = len(m), 0, []
    while pos < size:
        window = m[pos:pos + WINDOW]
        found = [(x.start(), *x.groups()) for x in _HEADER.finditer(window)]
        if not found:
            break
        cols = list(zip(*found))  # a tuple a group, each read as one array
        del found
        at = np.array(cols[0], np.int64)
        lens = np.frombuffer(b"".join(cols[1]), "<u4").reshape(-1, 2)
        hlen = np.fromiter(map(len, cols[2]), np.int64, len(at))
        hcrc_ok = np.fromiter(map(zlib.crc32, cols[2]), np.int64, len(at)) == lens[:, 1]
        reg = np.stack([np.array(cols[i]).astype(np.int64) for i in range(4, 8)], axis=1)
        crc = np.array(cols[10]).astype(np.int64)
        mirror = (np.array(cols[8]) == b"true").astype(np.int64)
        names, which = np.unique(np.array(cols[9]), return_inverse=True)
        dt = np.array([_dtype_id(x, dtype_ids, dtypes) for x in names.tolist()],
                      np.int64)[which.reshape(-1)]
        item = np.array([dtypes[d].itemsize if d >= 0 else 0 for d in range(-1, len(dtypes))],
                        np.int64)[dt + 1]
        start = at + _PREFIX + hlen
        nbytes = (reg[:, 1] - reg[:, 0]) * (reg[:, 3] - reg[:, 2]) * item
        end = start + nbytes
        # record k is sound and starts where record k - 1 ends (the first at 0) ...
        sound = hcrc_ok & (lens[:, 0] == hlen) & (reg[:, 1] >= reg[:, 0]) & \
            (reg[:, 3] >= reg[:, 2]) & (at == np.r_[0, end[:-1]])
        # ... and whole in this window
        good = sound & (end <= len(window)) & (dt >= 0)
        k = len(at) if good.all() else int(np.argmin(good))
        names, which = np.unique(np.array(cols[3][:k]), return_inverse=True)
        which = which.reshape(-1)
        ids = []
        for u, name in enumerate(names.tolist()):
            try:
                ids.append(name.decode())
            except UnicodeDecodeError:  # not UTF-8: the slow scan skips it, from its first
                ids.append(None)
                k = min(k, int(np.argmax(which == u)))
        number = np.array([fields.setdefault(x, len(fields)) if x is not None else -1
                           for x in ids], np.int64)
        fid = number[which[:k]] if k else np.zeros(0, np.int64)
        if k:
            out.append(np.stack([np.full(k, p, np.int64), pos + at[:k], pos + start[:k],
                                 nbytes[:k], *reg[:k].T, crc[:k], fid[:k], dt[:k],
                                 mirror[:k]], axis=1))
            pos += int(end[k - 1])
        cut = k < len(at) and sound[k] and len(window) == WINDOW  # the next window has it
        if k == 0 or (k < len(at) and not cut):
            break
    return out, pos


def _dtype_id(text: bytes, dtype_ids: dict, dtypes: list) -> int:
    """The number of a record's dtype as ``StagedTiles`` numbers them (by ``dtype.str``), -1
    when it is not a plain number type."""
    dtype = _parse_dtype(text)
    if dtype is None:
        return -1
    d = dtype_ids.setdefault(dtype.str, len(dtype_ids))
    if d == len(dtypes):
        dtypes.append(dtype)
    return d


@functools.lru_cache(maxsize=64)
def _parse_dtype(text: bytes) -> np.dtype | None:
    try:  # text of a header not checked yet (its CRC): numpy may raise anything on it
        return plain_dtype(text.decode())
    except Exception:  # noqa: BLE001
        return None


def _crc_table() -> np.ndarray:
    """CRC-32's (zlib's: reflected, polynomial 0xEDB88320) byte table."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1).astype(np.uint32)
    return t


_CRC_TABLE = _crc_table()
#: rows up to this many bytes get their CRC32s a byte column at a time, all rows at once
#: (numpy: ~0.3 us a row at 32 bytes, where a ``zlib.crc32`` call each costs ~1 us)
CRC_COLUMNS_MAX = 512


def _crcs(raw: bytes, nb: int, seeds: np.ndarray) -> np.ndarray:
    """The CRC32 of each ``nb`` bytes of ``raw`` in turn, each continuing from its seed (as
    ``zlib.crc32(row, seed)``)."""
    k = len(seeds)
    if 0 < nb <= CRC_COLUMNS_MAX and k:
        cols = np.ascontiguousarray(np.frombuffer(raw, np.uint8, k * nb).reshape(k, nb).T)
        crc = seeds.astype(np.uint32) ^ np.uint32(0xFFFFFFFF)
        for j in range(nb):
            crc = _CRC_TABLE[(crc ^ cols[j]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        return (crc ^ np.uint32(0xFFFFFFFF)).astype(np.int64)
    view = memoryview(raw)
    return np.fromiter((zlib.crc32(view[i * nb:(i + 1) * nb], s)
                        for i, s in enumerate(seeds.tolist())), np.int64, k)


def _scan(path: str, m: mmap.mmap, pos: int = 0):
    size = len(m)
    while True:
        pos = m.find(MAGIC, pos)
        if pos < 0:
            return
        rec = _record_at(path, m, pos, size)
        if rec is None:  # damaged: look for the next record's magic
            pos += 1
            continue
        yield rec
        pos = rec.start + rec.nbytes


def _record_at(path: str, m: mmap.mmap, pos: int, size: int) -> Record | None:
    if pos + _PREFIX > size:
        return None
    hlen, hcrc = _LENGTHS.unpack(m[pos + len(MAGIC):pos + _PREFIX])
    start = pos + _PREFIX + hlen
    if start > size:
        return None
    header = m[pos + _PREFIX:start]
    if zlib.crc32(header) != hcrc:
        return None
    try:
        h = json.loads(header)
        dtype = plain_dtype(h["dtype"])
        r0, r1, c0, c1 = (int(x) for x in h["region"])
        nbytes = (r1 - r0) * (c1 - c0) * dtype.itemsize
        rec = Record(path, pos, str(h["field"]), (r0, r1, c0, c1), bool(h["mirror"]), dtype,
                     int(h["crc32"]), start, nbytes)
    except (ValueError, KeyError, TypeError):
        return None
    if r1 < r0 or c1 < c0 or start + nbytes > size:
        return None
    return rec
