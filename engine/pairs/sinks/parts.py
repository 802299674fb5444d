"""Sinks whose tiles each write one part, merged at the end: ``TopK(k)`` (the k best columns per
row, and per column for symmetric spaces; ties go to the lower column index) and
``Threshold(t)`` (an edge list of the pairs with value >= t, or <= t), both as Parquet.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import weakref
import zlib

import numpy as np

from ...run.journal import sink_entry
from .base import Sink, ThresholdReduction, TopKReduction
from ..space import Tile
from .topk_passes import (compiled, query_order, topk_cells, topk_merge_runs, topk_state_merge,
                          topk_state_rows)


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

    @staticmethod
    def _encode_part(columns: dict) -> bytes:
        """The ``.npy`` bytes of the columns as one structured array, its fields filled in
        place after the header (np.save into a buffer copied the part twice more)."""
        import io

        from numpy.lib import format as npy
        n = len(next(iter(columns.values())))
        dtype = np.dtype([(k, np.asarray(v).dtype) for k, v in columns.items()])
        head = io.BytesIO()
        npy.write_array_header_1_0(head, {"descr": npy.dtype_to_descr(dtype),
                                          "fortran_order": False, "shape": (n,)})
        head = head.getvalue()
        buf = bytearray(len(head) + n * dtype.itemsize)
        buf[:len(head)] = head
        part = np.frombuffer(buf, dtype, count=n, offset=len(head))
        for k, v in columns.items():
            part[k] = v
        return bytes(buf)

    def store_tile(self, tile: Tile, payload: bytes) -> list[dict]:
        path = os.path.join(self.parts_dir, f"tile-{tile.id:08d}.npy")
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
        return [sink_entry(self.name, os.path.relpath(path, self.ctx.out_dir), len(payload),
                           zlib.crc32(payload))]

    def verify(self, entry):
        path = os.path.join(self.ctx.out_dir, entry["location"])
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            return False
        return len(raw) == entry["length"] and (zlib.crc32(raw) & 0xFFFFFFFF) == entry["crc32"]

    def _read_parts(self) -> np.ndarray | None:
        """Every part, concatenated (a structured array), or None when there is none. Parts
        of one dtype are read straight into one array, not loaded each and concatenated (a
        copy more of every part, on the finalize the run waits for)."""
        paths = [os.path.join(self.parts_dir, f)
                 for f in sorted(os.listdir(self.parts_dir)) if f.endswith(".npy")]
        if not paths:
            return None
        heads = [_npy_head(p) for p in paths]
        if len({dtype for _, _, dtype in heads}) > 1 or any(len(s) != 1 for _, s, _ in heads):
            parts = [np.load(p, allow_pickle=False) for p in paths]
            # (fields of one name, narrower in some parts: top-k indices are int32 or int64)
            common = np.result_type(*[p.dtype for p in parts]) if all(
                p.dtype.names == parts[0].dtype.names for p in parts) else None
            return np.concatenate([p.astype(common) if common is not None else p
                                   for p in parts])
        out = np.empty(sum(s[0] for _, s, _ in heads), heads[0][2])
        at = 0
        for path, (offset, (n,), _) in zip(paths, heads):
            view = out[at:at + n].view(np.uint8)
            with open(path, "rb") as fh:
                fh.seek(offset)
                if fh.readinto(view) != view.nbytes:
                    raise OSError(f"{path}: shorter than its header says")
            at += n
        return out


def _npy_head(path: str) -> tuple[int, tuple, np.dtype]:
    """(offset of the data, shape, dtype) of a ``.npy`` file written by ``np.save``."""
    from numpy.lib import format as npy
    with open(path, "rb") as fh:
        version = npy.read_magic(fh)
        read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
        shape, fortran, dtype = read(fh)
        if dtype.hasobject:  # a pickle inside: never read (np.load's allow_pickle=False too)
            raise ValueError(f"{path}: a part of dtype {dtype}, which holds Python objects")
        if fortran and len(shape) > 1:
            raise ValueError(f"{path}: a Fortran-ordered part")
        return fh.tell(), shape, dtype


def _all_true(mask: np.ndarray) -> bool:
    """Does the mask allow every cell? Answered at once for a full block seen through one True
    (strides 0: ``space.block_mask`` of a large tile), whose ``all()`` reads every cell."""
    if mask.ndim == 2 and mask.size and mask.strides == (0, 0):
        return bool(mask.flat[0])
    return bool(mask.all())


def _pairs_of(tile: Tile, values: np.ndarray, mask: np.ndarray):
    ii, jj = np.nonzero(mask)
    return ii + tile.r0, jj + tile.c0, values[ii, jj]


def _named(dictionary, index: np.ndarray):
    """The keys of ``index`` as an Arrow column, dictionary-encoded over ``dictionary`` (the
    keys as one Arrow string array): one Arrow string per key, not per row (a Python string
    object per row was half of a top-k's finalize; Arrow's take would register
    pyarrow.compute, a fixed CPU cost once per process). Written with
    ``store_schema=False`` it reads back as a plain string column."""
    import pyarrow as pa
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(index, np.int64)), dictionary)


def _write_parquet(table, path: str) -> None:
    """``table`` under ``path``, whole or not at all; dictionary columns are stored as
    Parquet's own dictionary encoding and read back as the plain type they encode.

    Only those columns (the keys) are dictionary-encoded, and only the numeric columns carry
    min / max statistics: dictionaries of distinct floats and indices and the min / max of
    every key string were half of a top-k's write, and a reader filters a top-k by its
    indices or scores, not by the order of its key strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    keys = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
    numeric = [f.name for f in table.schema
               if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    tmp = path + ".tmp"
    pq.write_table(table, tmp, store_schema=False, use_dictionary=keys or False,
                   write_statistics=numeric or False)
    os.replace(tmp, path)

# Each process's TopK floors, by the sink's output (the copies of one sink that the device
# actors of one process hold share them; they go when the last copy does)
_FLOORS: "weakref.WeakValueDictionary[str, np.ndarray]" = weakref.WeakValueDictionary()
_FLOORS_LOCK = threading.Lock()


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

    MERGE_RUNS_MAX = 64  # more runs ordered by query than this: grouped by query first

    def _select(self, q, t, v):
        """The k best per query, by value then by lower target index: (q, t, v, rank) arrays
        ordered by query then rank. numpy only: per tile, pandas' overhead outweighs the work.

        Candidates mostly come in a few runs ordered by query (a tile's rows then its columns;
        the parts, one after another): those are merged run by run, reading each in order, not
        grouped by query first (a counting sort, then reads at random: slower)."""
        q, t, v = np.asarray(q, np.int64), np.asarray(t, np.int64), np.asarray(v)
        if len(q) and v.dtype == np.float64 and q.min() >= 0 and not np.isnan(v).any():
            # (NaN ranks last in the sort below; the compiled merge takes every other float)
            sign = 1.0 if self.largest else -1.0
            merge = compiled(topk_merge_runs)
            cuts = np.flatnonzero(q[1:] < q[:-1])
            if len(cuts) < self.MERGE_RUNS_MAX:
                # (the fields as they are, strided views of the parts included: no copies)
                starts = np.concatenate([[0], cuts + 1, [len(q)]]).astype(np.int64)
                q, t, x, rank, _ = merge(q, t, v, starts, self.k, sign)
                return q, t, v[x], rank
            order = compiled(query_order)(np.ascontiguousarray(q))
            v = v[order]
            q, t, x, rank, _ = merge(q[order], t[order], v, np.array([0, len(q)]), self.k, sign)
            return q, t, v[x], rank
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
        """(rows, cols) of a superset of every row's k best among the cells of the space: the
        cells at least as good as the row's k-th best (ties kept; ``_select`` orders them).
        Sorting only these instead of the whole tile saves a sort of every pair of it: a tile
        of short reads holds millions. None when it does not apply (NaN, few columns)."""
        if values.ndim != 2 or values.shape[1] <= self.k or \
                (values.dtype.kind == "f" and np.isnan(values).any()):
            return None
        full = _all_true(mask)
        if not full:  # cells outside the space rank last, and are never candidates
            worst = -np.inf if self.largest else np.inf
            if values.dtype.kind != "f":
                info = np.iinfo(values.dtype) if values.dtype.kind in "iu" else None
                worst = (info.min if self.largest else info.max) if info else worst
            values = np.where(mask, values, worst)
        if self.largest:
            kth = np.partition(values, -self.k, axis=1)[:, -self.k]
            good = values >= kth[:, None]
        else:
            kth = np.partition(values, self.k - 1, axis=1)[:, self.k - 1]
            good = values <= kth[:, None]
        return np.nonzero(good if full else good & mask)

    def _compiles(self) -> bool:
        """Only float values take the compiled passes (tile pass, merge, streamed finalize):
        for others (align's int scores) numba is not loaded (~0.6 CPU s a fresh process)."""
        dtype = (getattr(self, "ctx", None) and self.ctx.fields or {}).get(self.field, "f8")
        return np.dtype(dtype).kind == "f"

    def attach(self):
        # compile (or load from numba's cache) the tile pass before the clock starts
        if not self._compiles():
            return
        self._compiled_cells(np.zeros((2, 2)), np.ones((2, 2), bool))
        self._select(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1))

    def before_finalize(self):
        super().before_finalize()
        if not self._compiles():
            return
        # every compiled path finalize may take: the merge on contiguous arrays (candidates
        # grouped by query_order, for parts in more than MERGE_RUNS_MAX runs) and on the
        # parts' strided fields
        self._select(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1))
        compiled(query_order)(np.zeros(1, np.int64))
        for ix in (np.int64, np.int32):  # (parts' indices: int32 where they fit)
            one = np.zeros(1, [("qi", ix), ("ti", ix), ("score", np.float64)])
            self._select(one["qi"], one["ti"], one["score"])
            state = np.zeros((1, self.k)), np.zeros((1, self.k), np.int64), \
                np.zeros(1, np.int64)
            compiled(topk_state_merge)(*state, one["qi"], one["ti"], one["score"], 1.0)
        compiled(topk_state_rows)(*state)

    @classmethod
    def _part(cls, q, t, v) -> bytes:
        """A tile's part: its candidates' query and target indices as int32 where every index
        fits (a third less to write than int64, on every tile), and their scores."""
        q, t = np.asarray(q), np.asarray(t)
        if (len(q) == 0 or max(int(q.max()), int(t.max())) < cls.NARROW) and \
                (len(q) == 0 or min(int(q.min()), int(t.min())) >= 0):
            q, t = q.astype(np.int32), t.astype(np.int32)
        return cls._encode_part({"qi": q, "ti": t, "score": v})

    NARROW = 2 ** 31  # indices below this are written as int32

    def _compiled_cells(self, values, mask, both: bool = True):
        full = _all_true(mask)
        return compiled(topk_cells)(
            np.ascontiguousarray(values, dtype=np.float64),
            np.ones((1, 1), bool) if full else np.ascontiguousarray(mask),
            not full, self.k, 1.0 if self.largest else -1.0, both)

    def reduction(self):
        symmetric = bool(self.ctx.space.symmetric)
        return TopKReduction(self.field, self.k, bool(self.largest),
                             rows=symmetric or self.per == "row",
                             cols=symmetric or self.per == "col")

    def _floors(self) -> np.ndarray:
        """Each query's k-th best in the tiles this process has reduced (NaN: fewer than k
        yet): a lower bound of its k-th best over the run (the k-th best of a subset is no
        better), so a kernel may drop a later tile's cells worse than it. Shared by the
        copies of this sink in one process; a stale read only keeps more cells."""
        floors = getattr(self, "_floor_values", None)
        if floors is None:
            symmetric = bool(self.ctx.space.symmetric)
            n = len(self.ctx.col_keys if self.per == "col" and not symmetric
                    else self.ctx.row_keys)
            with _FLOORS_LOCK:
                floors = _FLOORS.get(self.path)
                if floors is None or len(floors) != n:
                    floors = np.full(n, np.nan)
                    _FLOORS[self.path] = floors
            self._floor_values = floors
        return floors

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_floor_values", None)  # per process
        return state

    def tile_reduction(self, tile, reduction):
        floors = self._floors()
        return dataclasses.replace(
            reduction,
            row_floor=floors[tile.r0:tile.r1] if reduction.rows else None,
            col_floor=floors[tile.c0:tile.c1] if reduction.cols else None)

    def encode_reduced(self, tile, found):
        """The candidates an app kept (``reduction()``) ranked as from the full field; each
        query with k of them here raises its floor (``_floors``) to its k-th."""
        col = np.asarray(found.is_col, bool)
        i, j = np.asarray(found.i, np.int64), np.asarray(found.j, np.int64)
        q = np.where(col, j + tile.c0, i + tile.r0)
        t = np.where(col, i + tile.r0, j + tile.c0)
        q, t, v, rank = self._select(q, t, np.asarray(found.values))
        kth = rank == self.k
        if kth.any():
            floors, qk = self._floors(), q[kth]
            better = np.fmax if self.largest else np.fmin  # (NaN: no floor yet)
            floors[qk] = better(floors[qk], v[kth])
        return self._part(q, t, v)

    def encode_tile(self, tile, fields, mask):
        values = np.asarray(fields[self.field])
        mask = np.asarray(mask, bool)
        symmetric = bool(self.ctx.space.symmetric)
        r0, c0 = tile.r0, tile.c0
        if self.per == "col" and not symmetric:  # a column's k best rows: the transpose's rows
            values, mask, r0, c0 = values.T, mask.T, tile.c0, tile.r0
        # exactly k candidates per row (and per column of a symmetric space), for float
        # values (ints might not fit a float) without NaN (the sort below ranks them last)
        i, j, col, ok = self._compiled_cells(values, mask, symmetric) \
            if values.ndim == 2 and values.dtype.kind == "f" else (None, None, None, False)
        if ok:
            v = values[i, j]
            q = np.where(col, j + c0, i + r0)
            t = np.where(col, i + r0, j + c0)
            q, t, v, _ = self._select(q, t, v)
            return self._part(q, t, v)
        rows = self._row_candidates(values, mask)
        cols = self._row_candidates(values.T, mask.T) if symmetric else None
        if rows is None or (symmetric and cols is None):
            ii, jj = np.nonzero(mask)
            q, t, v = ii + r0, jj + c0, values[ii, jj]
            if symmetric:  # a pair is a candidate for both its items
                q, t, v = np.concatenate([q, t]), np.concatenate([t, q]), np.concatenate([v, v])
        else:
            ii, jj = rows
            q, t, v = ii + r0, jj + c0, values[ii, jj]
            if cols is not None:  # the column items' k best within the tile, as queries
                cj, ci = cols
                q = np.concatenate([q, cj + c0])
                t = np.concatenate([t, ci + r0])
                v = np.concatenate([v, values[ci, cj]])
        q, t, v, _ = self._select(q, t, v)
        return self._part(q, t, v)

    def _stream_parts(self, n: int):
        """Each query's k best over every part, the parts read one at a time into a state of
        n * k (``topk_state_merge``): a run's finalize holds that, never all its parts at
        once (10^6 reads leave some 10^8 candidates in them). None when a part is not of
        the compiled merge's kind (scores not float64, or NaN): finalize then takes them all
        at once."""
        paths = [os.path.join(self.parts_dir, f)
                 for f in sorted(os.listdir(self.parts_dir)) if f.endswith(".npy")]
        want = [np.dtype([("qi", ix), ("ti", ix), ("score", np.float64)])
                for ix in (np.int64, np.int32)]
        bv = np.empty((n, self.k))
        bt = np.empty((n, self.k), np.int64)
        bn = np.zeros(n, np.int64)
        merge = None  # (compiled once a part is of its kind: numba is not imported else)
        sign = 1.0 if self.largest else -1.0
        for path in paths:
            offset, shape, dtype = _npy_head(path)
            if dtype not in want or len(shape) != 1:
                return None
            if merge is None:
                merge = compiled(topk_state_merge)
            part = np.fromfile(path, dtype=dtype, count=shape[0], offset=offset)
            if len(part) != shape[0]:
                raise OSError(f"{path}: shorter than its header says")
            if not merge(bv, bt, bn, part["qi"], part["ti"], part["score"], sign):
                return None
        return compiled(topk_state_rows)(bv, bt, bn)

    def finalize(self):
        import pyarrow as pa
        rows, cols = self.ctx.row_keys, self.ctx.col_keys
        if self.per == "col" and not self.ctx.space.symmetric:
            rows, cols = cols, rows
        found = self._stream_parts(len(rows))
        if found is not None:
            q, t, v, rank = found
        else:
            table = self._read_parts()
            if table is None:
                q, t, v, rank = self._select(np.zeros(0, np.int64), np.zeros(0, np.int64),
                                             np.zeros(0))
            else:
                q, t, v, rank = self._select(table["qi"], table["ti"], table["score"])
        named = len(q) and all(isinstance(x, str) for x in (rows[0], cols[0]))
        if named:  # (a symmetric space's rows and columns are the same keys: one dictionary)
            row_dict = pa.array(list(rows), pa.string())
            col_dict = row_dict if self.ctx.space.symmetric else pa.array(list(cols), pa.string())
            query, target = _named(row_dict, q), _named(col_dict, t)
        elif len(q):
            query, target = np.asarray(rows)[q], np.asarray(cols)[t]
        else:
            query = target = np.zeros(0, dtype=object)
        _write_parquet(pa.table({"query": query, "target": target,
                                 "qi": q, "ti": t, "score": v, "rank": rank}), self.path)
        return self.path


class Threshold(_PartsSink):
    """Pairs whose ``field`` is >= t (``above=True``) or <= t, as a Parquet edge list."""

    name = "threshold"
    filename = "edges.parquet"

    def __init__(self, t: float, field: str = "value", above: bool = True):
        self.t, self.field, self.above = float(t), field, above

    def reduction(self):
        return ThresholdReduction(self.field, self.t, bool(self.above))

    def encode_reduced(self, tile, found):
        return self._encode_part({"i": np.asarray(found.i, np.int64) + tile.r0,
                                  "j": np.asarray(found.j, np.int64) + tile.c0,
                                  "value": np.asarray(found.values)})

    def encode_tile(self, tile, fields, mask):
        values = np.asarray(fields[self.field])
        # only the passing cells become pairs (a tile may hold millions of pairs)
        keep = (values >= self.t if self.above else values <= self.t) & np.asarray(mask, bool)
        q, t, v = _pairs_of(tile, values, keep)
        return self._encode_part({"i": q.astype(np.int64), "j": t.astype(np.int64),
                                  "value": v})

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
