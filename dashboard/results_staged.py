"""A live dense result's values: the staged tiles under ``result/matrix.zarr.tiles.partial/``.

While a run is under way ``matrix.zarr.partial`` holds no chunk; every writing process appends
its finished tiles to a log of its own, and the driver moves them into the chunks at the end
(docs/run-directory.md, "The dense matrix"). A log is a sequence of records: 8 bytes of magic
``PFTILE\\0\\1``, the header's length and its CRC32 (two little-endian u32), the header (JSON:
field, region [r0, r1, c0, c1], mirror, dtype, crc32 of the values), then the values in C
order. Written here from that text (nothing of pairflow imported): each log is scanned
incrementally (a record not yet whole is read on a later poll), only the records' places are
kept, and their values are read when a view needs them (checked against their CRC).
"""
from __future__ import annotations

import json
import os
import struct
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"PFTILE\x00\x01"
_LENGTHS = struct.Struct("<II")
_PREFIX = len(MAGIC) + _LENGTHS.size


@dataclass(frozen=True)
class Staged:
    path: str
    region: tuple  # (r0, r1, c0, c1)
    mirror: bool
    dtype: str
    start: int
    nbytes: int
    crc32: int


_COLS = ("path", "r0", "r1", "c0", "c1", "mirror", "dtype", "start", "nbytes", "crc32")


class _Field:
    """One field's records as columns of ints (a live run of 10^6 tiles: no object per
    record), appended while polling, as arrays once asked for."""

    def __init__(self):
        self.cols = {c: array("q") for c in _COLS}
        self._arrays: dict[str, np.ndarray] | None = None

    def append(self, *values) -> None:
        for c, v in zip(_COLS, values):
            self.cols[c].append(v)
        self._arrays = None

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            self._arrays = {c: np.frombuffer(v, np.int64).copy() if len(v) else
                            np.zeros(0, np.int64) for c, v in self.cols.items()}
        return self._arrays

    def __len__(self) -> int:
        return len(self.cols["r0"])


class StagedTiles:
    """The records of the logs in one directory, by field, read incrementally."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self._scanned: dict[str, int] = {}  # log -> bytes scanned (whole records only)
        self.fields: dict[str, _Field] = {}
        self.paths: list[str] = []
        self.dtypes: list[str] = []

    @property
    def records(self) -> dict[str, list[Staged]]:
        """Every record by field, as objects (for a look; the views use the columns)."""
        return {f: [self._record(rec.arrays(), i) for i in range(len(rec))]
                for f, rec in self.fields.items()}

    def _record(self, a: dict, i: int) -> Staged:
        return Staged(self.paths[a["path"][i]],
                      tuple(int(a[c][i]) for c in ("r0", "r1", "c0", "c1")),
                      bool(a["mirror"][i]), self.dtypes[a["dtype"][i]], int(a["start"][i]),
                      int(a["nbytes"][i]), int(a["crc32"][i]))

    def _id(self, table: list, value) -> int:
        if value not in table:
            table.append(value)
        return table.index(value)

    def poll(self) -> int:
        """Scan what the logs gained; returns how many records were new."""
        new = 0
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return 0
        for name in names:
            if not name.endswith(".log"):
                continue
            path = str(self.directory / name)
            at = self._scanned.get(path, 0)
            try:
                with open(path, "rb") as fh:
                    fh.seek(at)
                    data = fh.read()
            except OSError:
                continue
            pos = 0
            p = self._id(self.paths, path)
            while True:
                k = data.find(MAGIC, pos)
                if k < 0 or k + _PREFIX > len(data):
                    pos = max(pos, len(data) - len(MAGIC) + 1) if k < 0 else k
                    break
                hlen, hcrc = _LENGTHS.unpack(data[k + len(MAGIC):k + _PREFIX])
                start = k + _PREFIX + hlen
                if start > len(data):
                    pos = k  # the header is not whole yet
                    break
                try:
                    if zlib.crc32(data[k + _PREFIX:start]) != hcrc:
                        raise ValueError("header CRC")
                    h = json.loads(data[k + _PREFIX:start])
                    r0, r1, c0, c1 = (int(x) for x in h["region"])
                    nbytes = (r1 - r0) * (c1 - c0) * np.dtype(h["dtype"]).itemsize
                except (ValueError, KeyError, TypeError):
                    pos = k + 1  # damaged: the next record's magic
                    continue
                if start + nbytes > len(data):
                    pos = k  # the values are not whole yet
                    break
                field = self.fields.setdefault(str(h["field"]), _Field())
                field.append(p, r0, r1, c0, c1, int(bool(h.get("mirror"))),
                             self._id(self.dtypes, str(h["dtype"])), at + start, nbytes,
                             int(h["crc32"]))
                new += 1
                pos = start + nbytes
            self._scanned[path] = at + max(0, pos)
        return new

    def overlay(self, field: str, out: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> None:
        """Put the staged values of ``field`` that fall on rows x cols (item indices, ascending
        or not) into ``out``; a record whose values fail their CRC is left out. The records
        overlapping the window are found on the columns at once (a chunk's block means call
        this once per chunk: a loop over every record each time cost seconds at 10^6 tiles)."""
        if not len(rows) or not len(cols) or field not in self.fields:
            return
        a = self.fields[field].arrays()
        lo_r, hi_r, lo_c, hi_c = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        for transposed in (False, True):
            r0, r1, c0, c1 = (a[c] for c in (("c0", "c1", "r0", "r1") if transposed
                                              else ("r0", "r1", "c0", "c1")))
            hit = (r0 < hi_r) & (r1 > lo_r) & (c0 < hi_c) & (c1 > lo_c)
            if transposed:
                hit &= a["mirror"] > 0
            for i in np.flatnonzero(hit).tolist():
                a0, a1, b0, b1 = int(r0[i]), int(r1[i]), int(c0[i]), int(c1[i])
                ri = np.nonzero((rows >= a0) & (rows < a1))[0]
                ci = np.nonzero((cols >= b0) & (cols < b1))[0]
                if not len(ri) or not len(ci):
                    continue
                vals = self._values(self._record(a, i))
                if vals is None:
                    continue
                if transposed:
                    vals = vals.T
                out[np.ix_(ri, ci)] = vals[np.ix_(rows[ri] - a0, cols[ci] - b0)]

    def _values(self, rec: Staged) -> np.ndarray | None:
        try:
            with open(rec.path, "rb") as fh:
                raw = os.pread(fh.fileno(), rec.nbytes, rec.start)
        except OSError:
            return None
        if len(raw) != rec.nbytes or zlib.crc32(raw) != rec.crc32:
            return None
        r0, r1, c0, c1 = rec.region
        return np.frombuffer(raw, dtype=np.dtype(rec.dtype)).reshape(r1 - r0, c1 - c0).astype(np.float64)
