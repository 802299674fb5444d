"""A per-process cache of parsed files: the records of one file, fetched and parsed once while it
stays among the last few files used.

Why: items that are records of one file would otherwise each read it whole (a 2.5 MB target file
read once for each of its 8,000 records). A cached parse stands for the file only while its
signature (the bytes' length and leading CRC, or a local file's size and mtime) matches. It is
kept as columns (``columns.RecordColumns``: the bytes, offsets and a name index), not a record
object a read: at 10^6 reads that was 0.7 GB in every process that read the file.
"""
from __future__ import annotations

import os
import threading
import zlib
from collections import OrderedDict

from .columns import RecordColumns
from .reader import read_records


# (url, fmt, allow_empty) -> (signature, columns, bytes)
_PARSED: "OrderedDict[tuple, tuple]" = OrderedDict()
_PARSED_KEPT = 4  # files; a worker walks the records of one file, then the next
# ... and more while their sequences total at most this: a run checks every file before it
# parses them, and a process that does both (an in-process run) then parses each file once
_PARSED_KEPT_BYTES = 128 << 20
_PARSED_LOCK = threading.Lock()


def _signature(url: str, raw: bytes | None):
    """What must match for a cached parse to stand for the file: the bytes' length and leading
    CRC when the caller has them, else a local file's (size, mtime); None for a remote URL read
    by the catalog itself (a run's inputs are fixed: its fingerprint holds their SHA-256)."""
    if raw is not None:
        return ("raw", len(raw), zlib.crc32(raw[:65536]))
    path = url[7:] if url.startswith("file://") else url
    if "://" in path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return ("missing",)
    return (st.st_size, st.st_mtime_ns)


def parsed_file(url: str, raw: bytes | None = None, fmt: str = "auto",
                allow_empty: bool = False) -> RecordColumns:
    """The records of one file (a list of ``SequenceRecord`` to read, kept as columns), fetched
    and parsed once per process while it stays among the last few files used: items that are
    records of one file would otherwise each read it whole (a 2.5 MB target file read once
    for each of its 8,000 records)."""
    return _parsed(url, raw, fmt, allow_empty)


def _parsed(url: str, raw: bytes | None, fmt: str, allow_empty: bool) -> RecordColumns:
    """A file's records as columns (with their name index), through the per-process cache."""
    key, sig = (url, fmt, allow_empty), _signature(url, raw)
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None and hit[0] == sig:
            _PARSED.move_to_end(key)
            return hit[1]
    value = RecordColumns(read_records(url, raw=raw, fmt=fmt, allow_empty=allow_empty))
    size = value.nbytes
    with _PARSED_LOCK:
        _PARSED[key] = (sig, value, size)
        total = sum(entry[2] for entry in _PARSED.values())
        while len(_PARSED) > _PARSED_KEPT and total > _PARSED_KEPT_BYTES:
            total -= _PARSED.popitem(last=False)[1][2]
    return value
