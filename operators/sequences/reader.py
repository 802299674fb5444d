"""``read_records``: all records of one sequence file, or an ``InputError`` saying what is wrong.

Why the bytes are an argument: the engine fetches an item's bytes itself (through fsspec, on I/O
threads) and hands them to ``parse(key, raw)``; so this takes the bytes when the caller has them
and fetches only when called on its own. The same function serves local paths, ``s3://``,
``memory://`` .... It strings the steps together: decompress, strip a UTF-8 byte-order mark,
check the text, detect the format, parse, refuse empty records.
"""
from __future__ import annotations

import os

from .checks import _check_text
from .compression import _decompress, _fetch
from .fastx import _parse_fastx
from .formats import FORMATS, _FMT_ALIASES, _format_by_marker, detect_format
from .genbank import _parse_genbank
from .records import InputError, SequenceRecord
from .swiss import _parse_swiss

_BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark (Windows editors write it)


def read_records(
    url_or_path,
    raw: bytes | None = None,
    fmt: str = "auto",
    *,
    allow_empty: bool = False,
) -> list[SequenceRecord]:
    """All records of one sequence file, or :class:`InputError` saying what is wrong with it.

    ``raw`` is the file's bytes when the caller already has them (the engine's fetch); without it
    the file is read with fsspec.  ``fmt`` ("auto", "fasta", "fastq", "genbank", "swiss") overrides the
    detection by content; a file whose content contradicts a forced format is an error.  Records
    with an empty sequence are errors unless ``allow_empty`` (a k-mer set of nothing would make the
    item silently unrelated to everything).
    """
    name = os.fspath(url_or_path) if not isinstance(url_or_path, str) else url_or_path
    want = _FMT_ALIASES.get(str(fmt).lower())
    if want is None:
        raise ValueError(f"unknown format {fmt!r}; expected 'auto' or one of {', '.join(FORMATS)}")
    if raw is None:
        raw = _fetch(name)
    raw = bytes(raw) if not isinstance(raw, bytes) else raw
    if not raw:
        raise InputError(name, "empty file (no records)")
    data = _decompress(name, raw)
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    announced = _format_by_marker(data)
    if announced is not None:  # a sequence file by its start: control bytes or bad UTF-8 anywhere are named
        _check_text(name, data, announced)
    try:
        found = detect_format(data)
    except ValueError as e:
        raise InputError(name, str(e)) from None
    if want != "auto" and want != found:
        raise InputError(name, f"format {want} was requested but the content looks like {found}")
    if found == "genbank":
        records = _parse_genbank(name, data)
    elif found == "swiss":
        records = _parse_swiss(name, data)
    else:
        records = _parse_fastx(name, data, found)
    if not records:
        raise InputError(name, "no records found")
    if not allow_empty:
        for i, r in enumerate(records):
            if not r.sequence:
                raise InputError(name, "empty sequence", r.name, i)
    return records
