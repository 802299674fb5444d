"""Columnar building blocks for pipelines: a Parquet source, and small reusable operators.

* ``ParquetSource(paths, columns=None, batch_rows=None)``: one batch per Parquet row group (or
  per ``batch_rows`` rows), read with pyarrow in a data-setup task; a directory is read as a
  dataset of its ``*.parquet`` files (what ``operators.parquet.ParquetSink`` writes).
* ``between(name, column, lo, hi)``: a ``Filter`` keeping lo < column < hi.
* ``at_least(name, column, n)``: a ``Filter`` keeping column >= n (counts, multiplicities).
* ``derive(name, fn, inputs, after=())``: a ``Map`` making column ``name`` from ``fn(*columns)``.

In-memory data (dicts, pandas, Arrow, awkward) and Dask collections become sources through
``operators.arrays.as_source`` (``ArraySource``, ``operators.dask.DaskSource``).
"""
from __future__ import annotations

import glob
import os
from typing import Callable, Sequence

import numpy as np

from pairflow.engine.errors import InputError
from pairflow.engine.pipeline import Batch, Filter, Map, Source


class ParquetSource(Source):
    name = "parquet"

    def __init__(self, paths: str | Sequence[str], columns: Sequence[str] | None = None,
                 batch_rows: int | None = None):
        import pyarrow.parquet as pq
        paths = [paths] if isinstance(paths, str) else list(paths)
        files: list[str] = []
        for p in paths:
            if os.path.isdir(p):
                found = sorted(glob.glob(os.path.join(p, "**", "*.parquet"), recursive=True))
                if not found:
                    raise InputError(p, "no *.parquet file in this directory")
                files += found
            elif os.path.exists(p):
                files.append(p)
            else:
                raise InputError(p, "no such file")
        self.files, self.columns, self.batch_rows = files, \
            (list(columns) if columns else None), batch_rows
        self.groups = []
        for f in files:
            try:
                meta = pq.ParquetFile(f).metadata
            except Exception as exc:
                raise InputError(f, f"not a Parquet file: {exc}") from None
            if self.columns:
                names = set(pq.ParquetFile(f).schema_arrow.names)
                missing = [c for c in self.columns if c not in names]
                if missing:
                    raise InputError(f, f"no column {missing}")
            self.groups.append([meta.row_group(g).num_rows for g in range(meta.num_row_groups)])

    def partitions(self):
        specs = []
        for fi, groups in enumerate(self.groups):
            for g, rows in enumerate(groups):
                step = self.batch_rows or max(rows, 1)
                for start in range(0, max(rows, 1), step):
                    specs.append((fi, g, start, min(rows, start + step)))
        return specs

    def read(self, spec):
        import pyarrow.parquet as pq
        fi, g, start, stop = spec
        table = pq.ParquetFile(self.files[fi]).read_row_group(g, columns=self.columns)
        if start or stop < table.num_rows:
            table = table.slice(start, stop - start)
        return Batch.from_any(table)

    def describe(self):
        return {"type": "ParquetSource", "files": self.files, "columns": self.columns,
                "row_groups": sum(len(g) for g in self.groups),
                "rows": int(sum(sum(g) for g in self.groups))}


def between(name: str, column: str, lo: float, hi: float, after: Sequence[str] = ()) -> Filter:
    return Filter(name, lambda b: (np.asarray(b[column]) > lo) & (np.asarray(b[column]) < hi),
                  after=after)


def at_least(name: str, column: str, n, after: Sequence[str] = ()) -> Filter:
    return Filter(name, lambda b: np.asarray(b[column]) >= n, after=after)


def derive(name: str, fn: Callable, inputs: Sequence[str], after: Sequence[str] = ()) -> Map:
    return Map(name, lambda b: fn(*[b[c] for c in inputs]), after=after)
