"""``DenseMatrix``: one zarr v3 array per field, chunks equal to leaf tiles, so a tile writes whole
chunks only (and, for symmetric spaces, the mirrored chunk too). Readable with
``dask.array.from_zarr``.
"""
from __future__ import annotations

import os
import shutil
import zlib
from typing import Sequence

import numpy as np

from ..run.journal import sink_entry
from .sink_base import Sink, SinkContext, _atomic_replace_dir
from .space import Tile


class DenseMatrix(Sink):
    """Full matrices in zarr v3, one array per field; non-pairs hold ``fill``."""

    name = "dense"

    def __init__(self, fields: Sequence[str] | None = None, fill: float = float("nan"),
                 diagonal: dict | float | None = None, filename: str = "matrix.zarr"):
        self.fields = list(fields) if fields else None
        self.fill = fill
        self.diagonal = diagonal
        self.filename = filename

    @property
    def path(self) -> str:
        return os.path.join(self.ctx.out_dir, self.filename)

    @property
    def partial(self) -> str:
        return self.path + ".partial"

    def _fields(self) -> list[str]:
        return self.fields or list(self.ctx.fields)

    def preload(self) -> None:
        from ..run.runtime import import_in_background
        import_in_background("zarr")

    def open(self, ctx: SinkContext, resume: bool = False) -> None:
        import zarr
        self.ctx = ctx
        self._arrays = None
        if resume and not os.path.exists(self.partial) and os.path.exists(self.path):
            os.replace(self.path, self.partial)  # a finished run reopened: verify, then repair
        if resume and os.path.exists(self.partial):
            return
        if os.path.exists(self.partial):
            shutil.rmtree(self.partial)
        group = zarr.open_group(self.partial, mode="w", zarr_format=3)
        shape = (ctx.space.n_rows, ctx.space.n_cols)
        chunks = (max(1, min(ctx.leaf, shape[0] or 1)), max(1, min(ctx.leaf, shape[1] or 1)))
        for name in self._fields():
            dtype = np.dtype(ctx.fields.get(name, "float64"))
            fill = self.fill if dtype.kind == "f" else 0
            group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill)
        group.attrs.update({"row_keys": list(ctx.row_keys), "col_keys": list(ctx.col_keys),
                            "space": ctx.space.describe(), "leaf": ctx.leaf})
        self._arrays = None
        self._fill_tileless_diagonal(group)

    def _fill_tileless_diagonal(self, group) -> None:
        """A diagonal block holding no pair (a 1x1 block of a Triangle) has no tile to write its
        diagonal value: write it now, before any tile runs (so no write can race with it)."""
        space = self.ctx.space
        if not space.symmetric or self.diagonal is None:
            return
        leaf = self.ctx.leaf
        for b0 in range(0, space.n_rows, leaf):
            b1 = min(b0 + leaf, space.n_rows)
            if space.count(b0, b1, b0, b1) > 0:
                continue
            for name in self._fields():
                diag = self._diag_value(name)
                if diag is None:
                    continue
                arr = group[name]
                block = np.full((b1 - b0, b1 - b0), self.fill if arr.dtype.kind == "f" else 0,
                                dtype=arr.dtype)
                np.fill_diagonal(block, diag)
                arr[b0:b1, b0:b1] = block

    def attach(self):
        self._open_arrays()

    def _open_arrays(self):
        import zarr
        if getattr(self, "_arrays", None) is None:
            group = zarr.open_group(self.partial, mode="r+")
            self._arrays = {name: group[name] for name in self._fields()}
        return self._arrays

    def _diag_value(self, name: str):
        if isinstance(self.diagonal, dict):
            return self.diagonal.get(name)
        return self.diagonal

    def _regions(self, tile: Tile, values: np.ndarray, mask: np.ndarray, name: str):
        """The chunk-aligned regions a tile owns, with the data to put there."""
        arr = np.where(mask, values, self.fill if values.dtype.kind == "f" else 0).astype(values.dtype)
        if not self.ctx.space.symmetric:
            return [((tile.r0, tile.r1, tile.c0, tile.c1), arr)]
        if tile.r0 == tile.c0:  # diagonal tile: both halves of the chunk come from this tile
            full = np.where(mask, arr, arr.T) if arr.shape[0] == arr.shape[1] else arr
            diag = self._diag_value(name)
            if diag is not None:
                np.fill_diagonal(full, diag)
            return [((tile.r0, tile.r1, tile.c0, tile.c1), full)]
        return [((tile.r0, tile.r1, tile.c0, tile.c1), arr),
                ((tile.c0, tile.c1, tile.r0, tile.r1), np.ascontiguousarray(arr.T))]

    def encode_tile(self, tile, fields, mask):
        return {name: self._regions(tile, np.asarray(fields[name]), mask, name)
                for name in self._fields()}

    def store_tile(self, tile, payload):
        arrays = self._open_arrays()
        entries = []
        for name in self._fields():
            crc, length = 0, 0
            for (r0, r1, c0, c1), data in payload[name]:
                target = arrays[name]
                data = data.astype(target.dtype, copy=False)
                target[r0:r1, c0:c1] = data
                crc = zlib.crc32(np.ascontiguousarray(data).tobytes(), crc)
                length += data.nbytes
            entries.append(sink_entry(self.name, f"{self.filename}/{name}", length, crc,
                                      region=[tile.r0, tile.r1, tile.c0, tile.c1]))
        return entries

    def verify(self, entry):
        arrays = self._open_arrays()
        name = entry["location"].split("/", 1)[1]
        r0, r1, c0, c1 = entry["region"]
        regions = [(r0, r1, c0, c1)]
        if self.ctx.space.symmetric and r0 != c0:
            regions.append((c0, c1, r0, r1))
        crc = 0
        try:
            for a0, a1, b0, b1 in regions:
                crc = zlib.crc32(np.ascontiguousarray(arrays[name][a0:a1, b0:b1]).tobytes(), crc)
        except Exception:  # a chunk that no longer decodes is as corrupt as a wrong one
            return False
        return (crc & 0xFFFFFFFF) == entry["crc32"]

    def finalize(self):
        self._arrays = None
        _atomic_replace_dir(self.partial, self.path)
        return self.path
