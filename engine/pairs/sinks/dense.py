"""``DenseMatrix``: one zarr v3 array per field, in chunks sized for the reader, not for tiles.

A chunk is a block of whole leaf tiles of about ``chunk_bytes`` (8 MiB; the whole matrix when it
is smaller; one tile when a tile is larger), so a result has a file per chunk (its count grows
with n² / chunk², not with the tiles) and ``dask.array.from_zarr`` a task per chunk. Many tiles
share a chunk and are computed by different actors, so no tile writer touches a chunk: each
writing process appends its tiles to a log of its own (``tile_log.py``, under
``matrix.zarr.tiles.partial``) and the driver, in ``finalize``, is the one writer of every
chunk. Chunks are stored uncompressed: a flipped byte changes one cell, and a resume repairs
the one tile that holds it.

A tile's journal entries (one per field) name its region and the CRC32 of its values (and, for
a symmetric space's tile off the diagonal, of the mirrored region's); ``verify`` reads them back
from wherever the tile now is: a staged record while the run is under way, the chunk once it is
finished.
"""
from __future__ import annotations

import math
import os
import shutil
import zlib
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from ...errors import PairflowError
from ...run.journal import sink_entry
from .base import Sink, SinkContext, _atomic_replace_dir
from ..space import Tile
from .tile_log import LogWriter, StagedTiles, encode_record

#: a chunk holds about this many bytes: big enough that files and dask tasks are few, small
#: enough that a reader's slice reads little it does not want
CHUNK_BYTES = 8 << 20
#: chunks a resume's verification keeps decoded (the tiles of a chunk come close together)
CHUNKS_KEPT = 8


def chunk_shape(n_rows: int, n_cols: int, leaf: int, itemsize: int,
                chunk_bytes: int = CHUNK_BYTES) -> tuple[int, int]:
    """Sides that are multiples of ``leaf`` (whole tiles inside) with about ``chunk_bytes``
    per chunk, at most the matrix; a side the matrix cuts short widens the other."""
    leaf = max(1, leaf)
    cells = max(1, chunk_bytes // max(1, itemsize))
    side = max(leaf, math.isqrt(cells) // leaf * leaf)
    rows, cols = min(side, max(1, n_rows)), min(side, max(1, n_cols))
    if rows < side:
        cols = min(max(1, n_cols), max(cols, cells // rows // leaf * leaf))
    elif cols < side:
        rows = min(max(1, n_rows), max(rows, cells // cols // leaf * leaf))
    return rows, cols


class DenseMatrix(Sink):
    """Full matrices in zarr v3, one array per field; non-pairs hold ``fill``."""

    name = "dense"

    def __init__(self, fields: Sequence[str] | None = None, fill: float = float("nan"),
                 diagonal: dict | float | None = None, filename: str = "matrix.zarr",
                 chunk_bytes: int = CHUNK_BYTES):
        self.fields = list(fields) if fields else None
        self.fill = fill
        self.diagonal = diagonal
        self.filename = filename
        self.chunk_bytes = chunk_bytes

    def __getstate__(self):
        # a copy shipped to a device actor opens its own log, and reads afresh
        state = dict(self.__dict__)
        for key in ("_log", "_staged", "_arrays", "_written", "_chunks"):
            state.pop(key, None)
        return state

    @property
    def path(self) -> str:
        return os.path.join(self.ctx.out_dir, self.filename)

    @property
    def partial(self) -> str:
        return self.path + ".partial"

    @property
    def staging(self) -> str:
        """The writers' logs while the run is under way (gone once it is finished)."""
        return self.path + ".tiles.partial"

    def _fields(self) -> list[str]:
        return self.fields or list(self.ctx.fields)

    def _dtype(self, name: str) -> np.dtype:
        return np.dtype(self.ctx.fields.get(name, "float64"))

    def _fill(self, dtype: np.dtype):
        return self.fill if dtype.kind == "f" else 0

    def preload(self) -> None:
        from ...run.runtime import import_in_background
        import_in_background("zarr")

    def open(self, ctx: SinkContext, resume: bool = False) -> None:
        import zarr
        self.ctx = ctx
        self._close_log()  # this instance may have written an earlier run (shipped results)
        self._reset()
        if resume and not os.path.exists(self.partial) and os.path.exists(self.path):
            os.replace(self.path, self.partial)  # a finished run reopened: verify, then repair
        if resume and os.path.exists(self.partial):
            return
        for stale in (self.partial, self.staging):
            if os.path.exists(stale):
                shutil.rmtree(stale)
        group = zarr.open_group(self.partial, mode="w", zarr_format=3)
        shape = (ctx.space.n_rows, ctx.space.n_cols)
        for name in self._fields():
            dtype = self._dtype(name)
            chunks = chunk_shape(*shape, ctx.leaf, dtype.itemsize, self.chunk_bytes)
            group.create_array(name, shape=shape, chunks=chunks, dtype=dtype,
                               fill_value=self._fill(dtype), compressors=None)
        group.attrs.update({"row_keys": list(ctx.row_keys), "col_keys": list(ctx.col_keys),
                            "space": ctx.space.describe(), "leaf": ctx.leaf})

    def _reset(self) -> None:
        """Forget what this process read or opened (when reopened, or before finalize)."""
        self._forget_staged()
        self._arrays = None

    def _forget_staged(self) -> None:
        """Unmap the logs as last read: the next verify reads them again."""
        staged = getattr(self, "_staged", None)
        if staged is not None:
            staged.close()
        self._staged = None

    def _close_log(self) -> None:
        log = getattr(self, "_log", None)
        if log is not None:
            log.close()
        self._log = None
        self._written = {}  # _written_key(field, region) -> CRC32 of what this log holds

    def _diag_value(self, name: str):
        if isinstance(self.diagonal, dict):
            return self.diagonal.get(name)
        return self.diagonal

    # -- writing a tile (device actors; the driver when results are shipped) -----------------

    def _region(self, tile: Tile, values: np.ndarray, mask: np.ndarray, name: str):
        """What a tile puts in the matrix: its region's values and whether the transpose also
        goes to the mirrored region."""
        dtype = self._dtype(name)
        arr = np.where(mask, values, self._fill(values.dtype)).astype(dtype, copy=False)
        if not self.ctx.space.symmetric:
            return arr, False
        if tile.r0 == tile.c0:  # diagonal tile: both halves of the block come from this tile
            full = np.where(mask, arr, arr.T) if arr.shape[0] == arr.shape[1] else arr.copy()
            diag = self._diag_value(name)
            if diag is not None:
                np.fill_diagonal(full, diag)
            return full, False
        return arr, True

    def encode_tile(self, tile, fields, mask):
        """The tile's records (one blob, appended in one write) and its journal entries."""
        region = (tile.r0, tile.r1, tile.c0, tile.c1)
        blobs, entries, keys = [], [], []
        for name in self._fields():
            data, mirror = self._region(tile, np.asarray(fields[name]), mask, name)
            blob, crc = encode_record(name, region, mirror, data)
            length = data.nbytes
            if mirror:  # the journal's CRC covers both regions, as a reader reads them
                crc = zlib.crc32(np.ascontiguousarray(data.T).tobytes(), crc)
                length *= 2
            blobs.append(blob)
            keys.append((name, region, crc))
            entries.append(sink_entry(self.name, f"{self.filename}/{name}", length, crc,
                                      region=list(region)))
        return {"blob": b"".join(blobs), "keys": keys, "entries": entries}

    def _written_key(self, name: str, region) -> int:
        """(field, region) as one exact int: what a writer remembers of its log is an int and
        a CRC a tile (as tuples, ~0.3 KiB a tile: 0.3 GiB a writer at 10^6 tiles)."""
        n = max(self.ctx.space.n_rows, self.ctx.space.n_cols) + 1
        r0, r1, c0, c1 = (int(x) for x in region)
        return (((self._fields().index(name) * n + r0) * n + r1) * n + c0) * n + c1

    def store_tile(self, tile, payload):
        written = self.__dict__.setdefault("_written", {})
        keys = payload["keys"]
        # the same tile again from this writer (a retry): its record is in this log already
        if not all(written.get(self._written_key(*k[:2])) == k[2] for k in keys):
            log = getattr(self, "_log", None)
            if log is None or os.path.dirname(log.path) != self.staging:
                log = self._log = LogWriter(self.staging)
            log.append(payload["blob"])
            for name, region, crc in keys:
                written[self._written_key(name, region)] = crc
            self._forget_staged()  # a verify in this process reads the logs again
        return [dict(e) for e in payload["entries"]]

    # -- reading back (the driver: resume and finalize) ----------------------------------------

    def _open_arrays(self):
        import zarr
        if getattr(self, "_arrays", None) is None:
            group = zarr.open_group(self.partial, mode="r+")
            self._arrays = {name: group[name] for name in self._fields()}
            # each array's chunk shape and dtype, read once (zarr derives them on every access:
            # a resume verifying 10^6 tiles spent a third of its time there)
            self._shapes = {name: (a.chunks, a.dtype) for name, a in self._arrays.items()}
            self._forget_staged()
            self._chunks = OrderedDict()
        return self._arrays

    def _read(self, name: str, a0: int, a1: int, b0: int, b1: int) -> np.ndarray:
        """A region of a finished array, through the last chunks read: a resume verifies a
        chunk's tiles one after another, and reading the whole chunk again for each (zarr
        decodes whole chunks) would read it once per tile."""
        arr = self._open_arrays()[name]
        (rows, cols), dtype = self._shapes[name]
        out = np.empty((a1 - a0, b1 - b0), dtype=dtype)
        for i in range(a0 // rows, (a1 - 1) // rows + 1):
            for j in range(b0 // cols, (b1 - 1) // cols + 1):
                key = (name, i, j)
                block = self._chunks.get(key)
                if block is None:
                    block = arr[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
                    self._chunks[key] = block
                    if len(self._chunks) > CHUNKS_KEPT:
                        self._chunks.popitem(last=False)
                else:
                    self._chunks.move_to_end(key)
                r0, r1 = max(a0, i * rows), min(a1, (i + 1) * rows)
                c0, c1 = max(b0, j * cols), min(b1, (j + 1) * cols)
                out[r0 - a0:r1 - a0, c0 - b0:c1 - b0] = \
                    block[r0 - i * rows:r1 - i * rows, c0 - j * cols:c1 - j * cols]
        return out

    def _staged_tiles(self) -> StagedTiles:
        if getattr(self, "_staged", None) is None:
            self._staged = StagedTiles(self.staging)
        return self._staged

    def verify(self, entry):
        """Does the tile's region read back with the journaled CRC, from one of its staged
        records or else from the array?"""
        self._open_arrays()
        name = entry["location"].split("/", 1)[1]
        r0, r1, c0, c1 = entry["region"]
        staged = self._staged_tiles()
        for rec in staged.get(name, (r0, r1, c0, c1)):
            data = staged.values(rec)  # None unless its bytes match the record's CRC
            if data is None:
                continue
            crc = rec.crc32
            if rec.mirror:
                crc = zlib.crc32(np.ascontiguousarray(data.T).tobytes(), crc)
            if crc == entry["crc32"]:
                return True
        regions = [(r0, r1, c0, c1)]
        if self.ctx.space.symmetric and r0 != c0:
            regions.append((c0, c1, r0, r1))
        crc = 0
        try:
            for a0, a1, b0, b1 in regions:
                crc = zlib.crc32(self._read(name, a0, a1, b0, b1).tobytes(), crc)
        except Exception:  # a chunk that no longer decodes is as corrupt as a wrong one
            return False
        return (crc & 0xFFFFFFFF) == entry["crc32"]

    def verify_many(self, entries) -> np.ndarray:
        """``verify`` of many journal entries (``journal.Entries``) at once: an entry whose
        field, region and CRC a staged record with an intact payload has is verified as
        arrays (``StagedTiles.journal_crcs``: a resume of 10^6 tiles in seconds); the others
        one by one, from the array (a finished run reopened) or not at all."""
        self._open_arrays()
        staged = self._staged_tiles()
        if not len(staged):  # a finished run reopened: every tile is in the chunks
            self._forget_staged()
            ok = self._verify_in_chunks(entries, np.ones(len(entries), bool))
            for i in np.flatnonzero(~ok).tolist():
                ok[i] = self.verify(entries.entry(i))
            return ok
        crcs = staged.journal_crcs()
        kept = crcs >= 0
        c = staged.cols
        mine = np.stack([c["field"][kept], c["r0"][kept], c["r1"][kept], c["c0"][kept],
                         c["c1"][kept], crcs[kept]], axis=1)
        field_of = {}
        for loc in set(entries.location):
            name = loc.split("/", 1)[1] if isinstance(loc, str) and "/" in loc else None
            field_of[loc] = staged.fields.get(name, -1)
        theirs = np.concatenate([np.array([field_of[x] for x in entries.location],
                                          np.int64).reshape(-1, 1),
                                 np.asarray(entries.region, np.int64).reshape(-1, 4),
                                 np.asarray(entries.crc32, np.int64).reshape(-1, 1)], axis=1)
        both = np.concatenate([mine, theirs])
        order = np.lexsort(both.T[::-1])
        rows = both[order]
        new = np.ones(len(rows), bool)
        new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
        starts = np.flatnonzero(new)
        is_staged = np.r_[np.ones(len(mine), bool), np.zeros(len(theirs), bool)][order]
        found = np.empty(len(rows), bool)
        if len(rows):  # an entry is verified when its group holds a staged record
            found[order] = np.maximum.reduceat(is_staged, starts)[np.cumsum(new) - 1]
        ok = found[len(mine):]
        theirs_ok = theirs[:, 0] >= 0
        ok &= theirs_ok
        del mine, theirs, both, rows, order, crcs
        self._forget_staged()  # the index and the logs' maps let go (the rest reads them again)
        ok |= self._verify_in_chunks(entries, ~ok)  # (chunk_verify.py: an entry's CRC, or -1)
        for i in np.flatnonzero(~ok).tolist():
            ok[i] = self.verify(entries.entry(i))
        self._forget_staged()  # finalize reads the logs as they will be then
        return ok

    def _verify_in_chunks(self, entries, rest: np.ndarray) -> np.ndarray:
        """Entries of ``rest`` whose region reads back from the array with their CRC."""
        from .chunk_verify import tile_crcs
        ok = np.zeros(len(rest), bool)
        if not rest.any():
            return ok
        region = np.asarray(entries.region, np.int64).reshape(-1, 4)
        crc = np.asarray(entries.crc32, np.int64)
        name_of = {x: x.split("/", 1)[1] if isinstance(x, str) and "/" in x else ""
                   for x in set(entries.location)}
        names = np.array([name_of[x] for x in entries.location], dtype=object)
        for name, arr in self._open_arrays().items():
            e = np.flatnonzero(rest & (names == name) & (region[:, 0] >= 0))
            mirrored = self.ctx.space.symmetric & (region[e, 0] != region[e, 2])
            got = tile_crcs(arr, region[e], mirrored)
            ok[e] = got == crc[e]
            rest = rest.copy()
            rest[e[got != -1]] = False  # decided: the rest go one by one
        return ok & ~rest

    def finalize(self):
        """Move every staged tile into its chunk (each chunk written once, by this process),
        drop the logs, and rename the array to its final name."""
        self._close_log()
        self._reset()  # the actors wrote since a resume's verify read the logs
        arrays = self._open_arrays()
        staged = self._staged_tiles()
        try:
            for name in self._fields():
                self._write_chunks(name, arrays[name], staged)
        finally:
            self._reset()
        if os.path.exists(self.staging):
            shutil.rmtree(self.staging)
        _atomic_replace_dir(self.partial, self.path)
        return self.path

    def _write_chunks(self, name: str, arr, staged: StagedTiles) -> None:
        rows, cols = arr.chunks
        n_rows, n_cols = arr.shape
        # what each chunk takes, as arrays (10^6 tiles: no tuple per tile): a region, its
        # staged records' group (-1: a diagonal block no tile holds) and whether transposed
        regions, groups, mirror = staged.groups(name)
        keep = (regions[:, 0] < regions[:, 1]) & (regions[:, 2] < regions[:, 3])
        regions, groups, mirror = regions[keep], groups[keep], mirror[keep]
        parts = [(regions, groups, np.zeros(len(groups), bool)),
                 (regions[mirror][:, [2, 3, 0, 1]], groups[mirror], np.ones(int(mirror.sum()),
                                                                             bool))]
        diag = self._diag_value(name)
        blocks = np.array(self._tileless_diagonal() if diag is not None else [],
                          dtype=np.int64).reshape(-1, 2)
        parts.append((blocks[:, [0, 1, 0, 1]], np.full(len(blocks), -1, np.int64),
                      np.zeros(len(blocks), bool)))
        reg = np.concatenate([p[0] for p in parts]).reshape(-1, 4)
        grp = np.concatenate([p[1] for p in parts])
        trans = np.concatenate([p[2] for p in parts])
        # a region inside one chunk (whole tiles: the rule) goes to it; one spanning several
        # (a tile larger than a chunk) to each
        i0, i1 = reg[:, 0] // rows, (reg[:, 1] - 1) // rows
        j0, j1 = reg[:, 2] // cols, (reg[:, 3] - 1) // cols
        n_cj = -(-n_cols // cols)
        one = (i0 == i1) & (j0 == j1)
        entry = [np.flatnonzero(one)]
        chunk = [(i0 * n_cj + j0)[one]]
        for e in np.flatnonzero(~one).tolist():
            for i in range(int(i0[e]), int(i1[e]) + 1):
                for j in range(int(j0[e]), int(j1[e]) + 1):
                    entry.append(np.array([e]))
                    chunk.append(np.array([i * n_cj + j]))
        entry_a, chunk_a = np.concatenate(entry), np.concatenate(chunk)
        by_chunk = np.argsort(chunk_a, kind="stable")
        entry_a, chunk_a = entry_a[by_chunk], chunk_a[by_chunk]
        cuts = np.flatnonzero(np.r_[True, chunk_a[1:] != chunk_a[:-1]]) if len(chunk_a) else \
            np.zeros(0, np.int64)
        spans = list(zip(cuts.tolist(), np.r_[cuts[1:], len(chunk_a)].astype(int).tolist()))

        def write(span):
            lo, hi = span
            i, j = divmod(int(chunk_a[lo]), n_cj)
            a0, a1 = i * rows, min((i + 1) * rows, n_rows)
            b0, b1 = j * cols, min((j + 1) * cols, n_cols)
            try:  # what an earlier finalize put here (a finished run resumed)
                buf = np.array(arr[a0:a1, b0:b1])
            except Exception:  # no longer decodes: every tile in it was recomputed
                buf = np.full((a1 - a0, b1 - b0), arr.fill_value, dtype=arr.dtype)
            for e in entry_a[lo:hi].tolist():
                r0, r1, c0, c1 = reg[e].tolist()
                if grp[e] < 0:  # a diagonal block no tile holds
                    block = buf[r0 - a0:r1 - a0, c0 - b0:c1 - b0]
                    np.fill_diagonal(block, diag)
                    continue
                data = staged.first_intact(int(grp[e]))
                if data is None:
                    _not_intact(staged, int(grp[e]), name)
                if trans[e]:
                    data = data.T
                # the part of the region inside this chunk
                lo_r, hi_r, lo_c, hi_c = max(r0, a0), min(r1, a1), max(c0, b0), min(c1, b1)
                buf[lo_r - a0:hi_r - a0, lo_c - b0:hi_c - b0] = \
                    data[lo_r - r0:hi_r - r0, lo_c - c0:hi_c - c0]
            arr[a0:a1, b0:b1] = buf

        if len(spans) > 1:
            with ThreadPoolExecutor(min(4, len(spans))) as pool:
                list(pool.map(write, spans))
        else:
            for span in spans:
                write(span)

    def _tileless_diagonal(self) -> list[tuple[int, int]]:
        """Diagonal leaf blocks holding no pair (a 1x1 block of a Triangle): no tile writes
        their diagonal value, so finalize does."""
        space, leaf = self.ctx.space, self.ctx.leaf
        if not space.symmetric:
            return []
        return [(b0, min(b0 + leaf, space.n_rows)) for b0 in range(0, space.n_rows, leaf)
                if space.count(b0, min(b0 + leaf, space.n_rows), b0,
                               min(b0 + leaf, space.n_rows)) == 0]


def _not_intact(staged: StagedTiles, g: int, name: str) -> None:
    rec = staged.group(g)[0]
    raise PairflowError(
        f"dense sink: the staged tile {list(rec.region)} of field {name!r} no longer matches "
        f"its CRC in {rec.path} (offset {rec.offset}): the disk changed it after it was "
        "written; resume the run (resume=True) to recompute that tile")
