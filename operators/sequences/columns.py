"""A parsed file's records as compact columns: every sequence in one uint8 array with offsets,
qualities beside them, names in one byte array with offsets and a hash index to find one.

Why: a process that keeps a file parsed (the per-process cache, the driver's catalog) kept one
``SequenceRecord`` a read, with its name, sequence and quality as Python objects and a dict of
names: about 0.7 KB a 150-base read, 0.7 GB a process at 10^6 reads, and every process that
read the file held its own. As columns the same file is its bytes plus 8 bytes of offsets and
16 of name index a record (~0.35 KB a FASTQ read, half of it the qualities).

``RecordColumns`` still reads as a list of ``SequenceRecord`` (``len``, indexing, iteration:
each record built when asked for); code that wants many sequences at once takes
``sequences()``, a ``Sequences`` view whose ``joined()`` hands the kernels one buffer with
starts and ends, no bytes object a record.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .records import SequenceRecord

_EMPTY = np.zeros(0, np.uint8)


def _blob(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(one uint8 array of every part, offsets: part i is ``blob[off[i]:off[i + 1]]``)."""
    off = np.zeros(len(parts) + 1, np.int64)
    if parts:
        np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=off[1:])
    blob = np.frombuffer(b"".join(parts), np.uint8) if parts else _EMPTY
    return blob, off


class Sequences:
    """Some records' sequences: ``buf[starts[i]:ends[i]]`` is sequence i (a view, no copy).
    Indexing by an int gives its bytes; by a slice or an index array another view."""

    __slots__ = ("buf", "starts", "ends")

    def __init__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.buf, self.starts, self.ends = buf, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i):
        if isinstance(i, (int, np.integer)):
            return self.buf[self.starts[i]:self.ends[i]].tobytes()
        return Sequences(self.buf, self.starts[i], self.ends[i])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def joined(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(bytes, starts, ends) as the compiled k-mer scans take them."""
        return self.buf, np.ascontiguousarray(self.starts), np.ascontiguousarray(self.ends)


class NameIndex:
    """Record names as one byte array with offsets, and each name's record found by hash:
    ``hashes`` sorted, ``order`` the record of each (16 bytes a record, not a dict entry and a
    string). Python's hash of the name's bytes: an index lives in one process."""

    __slots__ = ("blob", "off", "hashes", "order")

    def __init__(self, names: list[str]):
        raw = [n.encode() for n in names]
        self.blob, self.off = _blob(raw)
        h = np.fromiter(map(hash, raw), np.int64, len(raw))
        self.order = np.argsort(h, kind="stable")
        self.hashes = h[self.order]

    def __len__(self) -> int:
        return len(self.off) - 1

    def name(self, i: int) -> str:
        return self.blob[self.off[i]:self.off[i + 1]].tobytes().decode()

    def names(self) -> Iterable[str]:
        blob, off = self.blob.tobytes(), self.off.tolist()
        return (blob[off[i]:off[i + 1]].decode() for i in range(len(off) - 1))

    def find(self, name: str) -> int | None:
        """The first record (in file order) named ``name``, or None."""
        raw = name.encode()
        h = hash(raw)
        lo = int(np.searchsorted(self.hashes, h, "left"))
        hi = int(np.searchsorted(self.hashes, h, "right"))
        for p in range(lo, hi):  # (stable sort: file order within a hash)
            i = int(self.order[p])
            if self.blob[self.off[i]:self.off[i + 1]].tobytes() == raw:
                return i
        return None

    def first_duplicate(self) -> tuple[int, int] | None:
        """(first record, later record) of the earliest record in file order whose name an
        earlier one has, or None when every name is distinct."""
        h = self.hashes
        runs = np.flatnonzero(np.r_[True, h[1:] != h[:-1], True])
        best = None
        long = np.flatnonzero(np.diff(runs) > 1)
        for a, b in zip(runs[long].tolist(), runs[long + 1].tolist()):
            seen: dict[str, int] = {}  # equal hashes: the names themselves decide
            for i in sorted(int(x) for x in self.order[a:b]):
                first = seen.setdefault(self.name(i), i)
                if first != i and (best is None or i < best[1]):
                    best = (first, i)
        return best


class RecordColumns:
    """A file's records as columns (see the module's docstring); reads as a list of
    ``SequenceRecord``."""

    __slots__ = ("seq", "off", "qual", "index", "desc", "desc_off")

    def __init__(self, records: list[SequenceRecord]):
        self.seq, self.off = _blob([r.sequence for r in records])
        quals = [r.quality for r in records]
        self.qual = None  # every record has one (FASTQ) or none does
        if records and all(q is not None for q in quals):
            self.qual = _blob(quals)[0]
        elif any(q is not None for q in quals):
            raise ValueError("records with and without qualities in one file")
        self.index = NameIndex([r.name for r in records])
        self.desc = self.desc_off = None  # descriptions: only where a record has one
        if any(r.description for r in records):
            self.desc, self.desc_off = _blob([r.description.encode() for r in records])

    def __len__(self) -> int:
        return len(self.off) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n}")
        i = int(i) % n if n else int(i)
        a, b = self.off[i], self.off[i + 1]
        desc = "" if self.desc is None else \
            self.desc[self.desc_off[i]:self.desc_off[i + 1]].tobytes().decode()
        return SequenceRecord(self.index.name(i), self.seq[a:b].tobytes(),
                              None if self.qual is None else self.qual[a:b].tobytes(), desc)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def has_quality(self) -> bool:
        return self.qual is not None

    def sequences(self) -> Sequences:
        return Sequences(self.seq, self.off[:-1], self.off[1:])

    def name(self, i: int) -> str:
        return self.index.name(i)

    def find(self, name: str) -> int | None:
        return self.index.find(name)

    @property
    def nbytes(self) -> int:
        ix = self.index
        parts = [self.seq, self.off, ix.blob, ix.off, ix.hashes, ix.order]
        parts += [x for x in (self.qual, self.desc, self.desc_off) if x is not None]
        return int(sum(x.nbytes for x in parts))
