"""Record batches: the columnar unit every source yields, operator sees and sink receives.

A batch is columns of one length: numpy arrays for flat values, awkward arrays for jagged ones
(jets of an event). Whatever a source returns (dicts, pandas, Arrow, awkward records) is turned
into a Batch once, in the data-setup task, so operators and sinks meet one type.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np


def is_awkward(x) -> bool:
    """By module name, so that code handling numpy batches never has to import awkward."""
    return type(x).__module__.split(".")[0] == "awkward"


def as_column(name: str, v):
    """One column as numpy where the values are flat numbers, awkward where they are jagged."""
    if isinstance(v, np.ndarray):
        return v
    if is_awkward(v):
        import awkward as ak
        if v.ndim == 1 and not ak.fields(v):
            try:  # flat numbers: numpy is faster and simpler downstream
                return ak.to_numpy(v)
            except Exception:
                return v
        return v
    if hasattr(v, "to_numpy") and not hasattr(v, "combine_chunks"):  # pandas Series
        return v.to_numpy()
    if hasattr(v, "type") and hasattr(v, "to_pylist"):  # Arrow (chunked) array
        return arrow_column(v)
    arr = np.asarray(v)
    if arr.ndim == 0:
        raise ValueError(f"column {name!r} is a scalar, not one value per record")
    return arr


def arrow_column(col):
    import pyarrow as pa
    typ = col.type
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_boolean(typ):
        if col.null_count == 0:  # nulls have no numpy form: awkward keeps them as options
            return col.to_numpy(zero_copy_only=False)
    import awkward as ak
    return ak.from_arrow(col)


class Batch:
    """Columns of one length: numpy arrays or awkward arrays (jagged collections)."""

    __slots__ = ("columns", "n")

    def __init__(self, columns: Mapping[str, Any] | None = None, n: int | None = None):
        cols = {str(k): as_column(str(k), v) for k, v in (columns or {}).items()}
        lengths = {k: len(v) for k, v in cols.items()}
        if n is None:
            n = next(iter(lengths.values()), 0)
        bad = {k: m for k, m in lengths.items() if m != n}
        if bad:
            raise ValueError(f"columns of a batch must have one length ({n}); got {bad}")
        self.columns, self.n = cols, int(n)

    @classmethod
    def _raw(cls, columns: dict, n: int) -> "Batch":
        b = cls.__new__(cls)
        b.columns, b.n = columns, n
        return b

    @classmethod
    def from_any(cls, obj) -> "Batch":
        """dict of arrays, pandas DataFrame, pyarrow Table/RecordBatch, awkward record array,
        numpy structured array, or a Batch."""
        if isinstance(obj, Batch):
            return obj
        if isinstance(obj, Mapping):
            return cls(obj)
        mod = type(obj).__module__.split(".")[0]
        if mod == "pandas":
            return cls({c: obj[c].to_numpy() for c in obj.columns})
        if mod == "pyarrow":
            if hasattr(obj, "column_names"):
                return cls({name: arrow_column(obj.column(name)) for name in obj.column_names},
                           n=obj.num_rows)
        if mod == "awkward":
            import awkward as ak
            fields = ak.fields(obj)
            if not fields:
                raise TypeError("an awkward batch must be an array of records (with fields)")
            return cls({f: obj[f] for f in fields}, n=len(obj))
        if isinstance(obj, np.ndarray) and obj.dtype.names:
            return cls({f: obj[f] for f in obj.dtype.names})
        raise TypeError(f"cannot make a record batch from {type(obj).__name__}: give a dict of "
                        f"arrays, a pandas DataFrame, a pyarrow Table or an awkward record array")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, name: str):
        try:
            return self.columns[name]
        except KeyError:
            raise KeyError(f"no column {name!r} in this batch (columns: "
                           f"{sorted(self.columns)}); does the operator declare after= the "
                           f"map that makes it?") from None

    def __contains__(self, name) -> bool:
        return name in self.columns

    def keys(self):
        return self.columns.keys()

    def get(self, name, default=None):
        return self.columns.get(name, default)

    def take(self, sel) -> "Batch":
        """Rows by boolean mask or integer indices."""
        sel = np.asarray(sel)
        n = int(sel.sum()) if sel.dtype == bool else len(sel)
        return Batch._raw({k: v[sel] for k, v in self.columns.items()}, n)

    def with_columns(self, cols: Mapping[str, Any]) -> "Batch":
        new = dict(self.columns)
        new.update(cols)
        return Batch._raw(new, self.n)

    def select(self, names: Iterable[str] | None) -> "Batch":
        if names is None:
            return self
        return Batch._raw({k: self.columns[k] for k in names if k in self.columns}, self.n)

    @staticmethod
    def concat(batches: Sequence["Batch"]) -> "Batch":
        batches = [b for b in batches if b is not None]
        if not batches:
            return Batch({})
        names = list(batches[0].columns)
        out = {}
        for k in names:
            parts = [b.columns[k] for b in batches]
            if any(is_awkward(p) for p in parts):
                import awkward as ak
                out[k] = ak.concatenate(parts)
            else:
                out[k] = np.concatenate(parts)
        return Batch._raw(out, sum(b.n for b in batches))

    def to_arrow(self):
        import pyarrow as pa
        arrays, names = [], []
        for k, v in self.columns.items():
            names.append(k)
            if is_awkward(v):
                import awkward as ak
                arrays.append(ak.to_arrow(v, extensionarray=False))
            elif v.ndim > 1:
                import awkward as ak
                arrays.append(ak.to_arrow(ak.from_numpy(v), extensionarray=False))
            else:
                arrays.append(pa.array(v))
        return pa.table(arrays, names=names) if names else pa.table({})

    def to_pandas(self):
        return self.to_arrow().to_pandas()

    def to_awkward(self):
        import awkward as ak
        return ak.zip(dict(self.columns), depth_limit=1)

    def __repr__(self):
        return f"Batch({self.n} records, columns={list(self.columns)})"
