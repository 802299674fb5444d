"""Sinks: where a tile's result fields go.

A sink is created in the driver (``open``: make the output empty, under a ``.partial`` name),
shipped to the device actors, which call ``write_tile`` once per finished tile (idempotent by tile
id: writing the same tile twice gives the same bytes), and closed in the driver (``finalize``:
merge parts, rename ``.partial`` to the final name). ``write_tile`` returns journal entries
(location, length, CRC32 of what it wrote) so the journal, not the presence of files, says what is
done.

* ``DenseMatrix``: one zarr v3 array per field, chunks equal to leaf tiles, so a tile writes whole
  chunks only (and, for symmetric spaces, the mirrored chunk too). Readable with
  ``dask.array.from_zarr``.
* ``TopK(k)``: the k best columns per row (and per column for symmetric spaces); ties go to the
  lower column index. Each tile writes its candidates as a Parquet part; ``finalize`` merges.
* ``Threshold(t)``: an edge list of pairs with value >= t (or <= t), as Parquet.
"""
from __future__ import annotations

import os
import shutil
import zlib
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..run.journal import sink_entry
from ..run.registry import Registry
from .space import PairSpace, Tile


@dataclass
class SinkContext:
    """What a sink needs to know about the run, fixed before the first tile."""

    out_dir: str
    space: PairSpace
    leaf: int
    row_keys: Sequence[str]
    col_keys: Sequence[str]
    fields: dict  # name -> dtype string


def _atomic_replace_dir(src: str, dst: str) -> None:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.replace(src, dst)


class Sink:
    name = "sink"

    def open(self, ctx: SinkContext, resume: bool = False) -> None:
        self.ctx = ctx

    def write_tile(self, tile: Tile, fields: dict[str, np.ndarray], mask: np.ndarray) -> list[dict]:
        raise NotImplementedError

    def attach(self) -> None:
        """In the writing process, before its first tile: import and open what writing needs
        (importing zarr or pyarrow costs a device actor up to a second of CPU)."""
        return None

    def verify(self, entry: dict) -> bool:
        """Does what the journal says was written still read back with the same CRC?"""
        return True

    def before_finalize(self) -> None:
        """In the driver, before the compute clock starts: import what ``finalize`` needs
        (pyarrow and pandas cost the driver a noticeable start-up on first import)."""
        return None

    def finalize(self) -> Any:
        return None


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

    def write_tile(self, tile, fields, mask):
        arrays = self._open_arrays()
        entries = []
        for name in self._fields():
            values = np.asarray(fields[name])
            crc, length = 0, 0
            for (r0, r1, c0, c1), data in self._regions(tile, values, mask, name):
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


class _PartsSink(Sink):
    """A sink whose tiles each write one part, merged at the end.

    A part is one ``.npy`` file of a structured array (a header and the raw columns): a tile
    writes it far faster than a Parquet part, whose writer costs the actor's CPU on every tile.
    The CRC is taken of the bytes written, so nothing is read back."""

    filename = "parts.parquet"

    @property
    def parts_dir(self) -> str:
        return os.path.join(self.ctx.out_dir, self.filename + ".parts")

    @property
    def path(self) -> str:
        return os.path.join(self.ctx.out_dir, self.filename)

    def open(self, ctx, resume=False):
        self.ctx = ctx
        if not resume and os.path.exists(self.parts_dir):
            shutil.rmtree(self.parts_dir)
        os.makedirs(self.parts_dir, exist_ok=True)

    def attach(self):
        return None  # parts are numpy files: nothing to import

    def before_finalize(self):
        # importing pyarrow is not all: its first table from Python strings loads its pandas
        # shim, so make one small table the way finalize will
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"key": np.array(["a"], dtype=object), "i": np.arange(1)}),
                       io.BytesIO())

    def _write_part(self, tile: Tile, columns: dict) -> dict:
        import io
        n = len(next(iter(columns.values())))
        part = np.empty(n, dtype=[(k, np.asarray(v).dtype) for k, v in columns.items()])
        for k, v in columns.items():
            part[k] = v
        buf = io.BytesIO()
        np.save(buf, part, allow_pickle=False)
        raw = buf.getvalue()
        path = os.path.join(self.parts_dir, f"tile-{tile.id:08d}.npy")
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
        return sink_entry(self.name, os.path.relpath(path, self.ctx.out_dir), len(raw),
                          zlib.crc32(raw))

    def verify(self, entry):
        path = os.path.join(self.ctx.out_dir, entry["location"])
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            return False
        return len(raw) == entry["length"] and (zlib.crc32(raw) & 0xFFFFFFFF) == entry["crc32"]

    def _read_parts(self) -> np.ndarray | None:
        """Every part, concatenated (a structured array), or None when there is none."""
        files = sorted(f for f in os.listdir(self.parts_dir) if f.endswith(".npy"))
        parts = [np.load(os.path.join(self.parts_dir, f), allow_pickle=False) for f in files]
        return np.concatenate(parts) if parts else None


def _pairs_of(tile: Tile, values: np.ndarray, mask: np.ndarray):
    ii, jj = np.nonzero(mask)
    return ii + tile.r0, jj + tile.c0, values[ii, jj]


class TopK(_PartsSink):
    """The k best targets per query (per row; per item on both sides for symmetric spaces).

    ``per="col"`` keeps the k best rows of every column instead (output ``topk_cols``, its
    ``query`` a column key and ``target`` a row key): with the per-row sink beside it, one pass
    over a rectangle gives best hits both ways (reciprocal best hits) without computing the
    transposed space again."""

    name = "topk"
    filename = "topk.parquet"

    def __init__(self, k: int, field: str = "value", largest: bool = True, per: str = "row"):
        if k < 1:
            raise ValueError(f"TopK needs k >= 1, got {k}")
        if per not in ("row", "col"):
            raise ValueError(f"TopK per must be 'row' or 'col', got {per!r}")
        self.k, self.field, self.largest, self.per = int(k), field, largest, per
        if per == "col":
            self.name, self.filename = "topk_cols", "topk_cols.parquet"

    def _select(self, q, t, v):
        """The k best per query, by value then by lower target index: (q, t, v, rank) arrays
        ordered by query then rank. numpy only: per tile, pandas' overhead outweighs the work."""
        q, t, v = np.asarray(q, np.int64), np.asarray(t, np.int64), np.asarray(v)
        key = v
        if self.largest:
            key = -(v.astype(np.int64) if v.dtype.kind in "ub" else v)
        order = np.lexsort((t, key, q))
        q, t, v = q[order], t[order], v[order]
        starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, int)
        rank = np.arange(len(q)) - np.repeat(starts, np.diff(np.r_[starts, len(q)]))
        keep = rank < self.k
        return q[keep], t[keep], v[keep], rank[keep] + 1

    def _row_candidates(self, values: np.ndarray, mask: np.ndarray):
        """(rows, cols) of a superset of every row's k best: the entries at least as good as
        the row's k-th best value (ties kept; ``_select`` orders them). Sorting only these
        instead of the whole tile saves a sort per tile. None when it does not apply (masked
        cells, NaN, few columns)."""
        if values.ndim != 2 or values.shape[1] <= self.k or not mask.all() or \
                (values.dtype.kind == "f" and np.isnan(values).any()):
            return None
        if self.largest:
            kth = np.partition(values, -self.k, axis=1)[:, -self.k]
            return np.nonzero(values >= kth[:, None])
        kth = np.partition(values, self.k - 1, axis=1)[:, self.k - 1]
        return np.nonzero(values <= kth[:, None])

    def write_tile(self, tile, fields, mask):
        values = np.asarray(fields[self.field])
        if self.per == "col" and not self.ctx.space.symmetric:
            cand = self._row_candidates(values.T, np.asarray(mask).T)
            if cand is not None:
                jj, ii = cand
                t, q, v = ii + tile.r0, jj + tile.c0, values[ii, jj]
            else:
                t, q, v = _pairs_of(tile, values, mask)
            q, t, v, _ = self._select(q, t, v)
            return [self._write_part(tile, {"qi": q, "ti": t, "score": v})]
        cand = None if self.ctx.space.symmetric else self._row_candidates(values, mask)
        if cand is not None:
            ii, jj = cand
            q, t, v = ii + tile.r0, jj + tile.c0, values[ii, jj]
        else:
            q, t, v = _pairs_of(tile, values, mask)
        if self.ctx.space.symmetric:
            q, t, v = np.concatenate([q, t]), np.concatenate([t, q]), np.concatenate([v, v])
        q, t, v, _ = self._select(q, t, v)
        return [self._write_part(tile, {"qi": q, "ti": t, "score": v})]

    def finalize(self):
        import pyarrow as pa
        import pyarrow.parquet as pq
        table = self._read_parts()
        if table is None:
            q, t, v, rank = self._select(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                         np.zeros(0))
        else:
            q, t, v, rank = self._select(table["qi"], table["ti"], table["score"])
        rows, cols = np.asarray(self.ctx.row_keys), np.asarray(self.ctx.col_keys)
        if self.per == "col" and not self.ctx.space.symmetric:
            rows, cols = cols, rows
        out = pa.table({"query": rows[q] if len(q) else np.zeros(0, dtype=object),
                        "target": cols[t] if len(t) else np.zeros(0, dtype=object),
                        "qi": q, "ti": t, "score": v, "rank": rank})
        tmp = self.path + ".tmp"
        pq.write_table(out, tmp)
        os.replace(tmp, self.path)
        return self.path


class Threshold(_PartsSink):
    """Pairs whose ``field`` is >= t (``above=True``) or <= t, as a Parquet edge list."""

    name = "threshold"
    filename = "edges.parquet"

    def __init__(self, t: float, field: str = "value", above: bool = True):
        self.t, self.field, self.above = float(t), field, above

    def write_tile(self, tile, fields, mask):
        q, t, v = _pairs_of(tile, np.asarray(fields[self.field]), mask)
        keep = v >= self.t if self.above else v <= self.t
        return [self._write_part(tile, {"i": q[keep].astype(np.int64),
                                        "j": t[keep].astype(np.int64), "value": v[keep]})]

    def before_finalize(self):
        import pandas  # noqa: F401
        super().before_finalize()

    def finalize(self):
        import pyarrow as pa
        import pyarrow.parquet as pq
        import pandas as pd
        table = self._read_parts()
        df = (pd.DataFrame({k: table[k] for k in table.dtype.names}) if table is not None
              else pd.DataFrame({"i": np.zeros(0, np.int64), "j": np.zeros(0, np.int64),
                                 "value": np.zeros(0)}))
        df = df.sort_values(["i", "j"], kind="mergesort").reset_index(drop=True)
        rows, cols = np.asarray(self.ctx.row_keys), np.asarray(self.ctx.col_keys)
        df.insert(0, "a", rows[df.i.to_numpy()] if len(df) else [])
        df.insert(1, "b", cols[df.j.to_numpy()] if len(df) else [])
        tmp = self.path + ".tmp"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
        os.replace(tmp, self.path)
        return self.path


SINKS = Registry("sink", {"dense": DenseMatrix, "topk": TopK, "threshold": Threshold})


def make_sink(spec) -> Sink:
    """A sink from a config entry: 'dense', {'type': 'topk', 'k': 5}, or a Sink instance."""
    if isinstance(spec, Sink):
        return spec
    if isinstance(spec, str):
        spec = {"type": spec}
    spec = dict(spec)
    return SINKS.make(spec.pop("type"), **spec)
