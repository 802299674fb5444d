"""Hostile input: checks that turn what the parsers would silently accept into an ``InputError``
naming the file, the record and the line.

Why: htslib and Biopython are lenient where silence would corrupt results (pysam cuts strings at a
NUL byte, kseq skips lines it does not expect). Control bytes or invalid UTF-8 anywhere, and
sequence characters other than letters, ``*``, ``-`` and ``.`` (digits, ``>``, inner blanks:
another format's lines mixed in) are errors; ``tests/unit/test_hostile_input.py`` holds the
cases. The record is looked for only when something is wrong, so clean files pay one pass.
"""
from __future__ import annotations

import re

from .formats import _CONTROL
from .records import InputError, SequenceRecord

_CONTROL_RE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_SEQ_LETTERS = bytes(range(65, 91)) + bytes(range(97, 123)) + b"*-."  # what formats._SEQ_LINE accepts
_NOT_SEQ_LETTER = re.compile(rb"[^A-Za-z*.\-]")
_QUAL_CHARS = bytes(range(33, 127))  # Phred+33 '!'..'~'
_NOT_QUAL_CHAR = re.compile(rb"[^!-~]")
_CHUNK = 1 << 24


def _show(byte: int) -> str:
    return repr(chr(byte)) if 32 <= byte < 127 else f"byte 0x{byte:02x}"


def _line_of(data: bytes, p: int) -> int:
    return data.count(b"\n", 0, p) + 1


def _fastq_walk(data: bytes, end: int | None = None) -> tuple[list[int], int | None]:
    """Walk FASTQ lines as kseq reads them: (offsets of the header lines, offset of the first line
    that belongs to no record, or None).  kseq skips such lines silently while it looks for the next
    '@'; this walk is the slow path, run only when the line count does not fit 4 lines a record."""
    end = len(data) if end is None else end
    heads: list[int] = []
    pos = 0

    def line(at: int) -> tuple[bytes, int]:
        nl = data.find(b"\n", at, end)
        nl = end if nl < 0 else nl
        return data[at:nl].rstrip(b"\r"), nl + 1

    while pos < end:
        text, nxt = line(pos)
        if not text.strip():
            pos = nxt
            continue
        if text[:1] != b"@":
            return heads, pos
        heads.append(pos)
        pos = nxt
        n_seq = 0
        while pos < end:
            text, nxt = line(pos)
            pos = nxt
            if text[:1] == b"+":
                break
            n_seq += len(text)
        n_qual = 0
        while pos < end and n_qual < n_seq:
            text, pos = line(pos)
            n_qual += len(text)
    return heads, None


def _record_at(data: bytes, p: int, fmt: str) -> tuple[str | None, int | None]:
    """(name, 0-based index) of the record holding byte ``p``, for an error message; the name is
    None when the header has none, both are None before the first header."""
    eol = data.find(b"\n", p)
    eol = len(data) if eol < 0 else eol
    if fmt == "fastq":
        heads, _ = _fastq_walk(data, eol)
        n, h = len(heads), (heads[-1] if heads else -1)
    else:
        marker = b"\n" + {"fasta": b">", "genbank": b"LOCUS", "swiss": b"ID   "}[fmt]
        first = data.startswith(marker[1:])
        n = data.count(marker, 0, p) + first
        h = data.rfind(marker, 0, p) + 1 if n > first else 0
    if n == 0:
        return None, None
    header = data[h:min(p, eol) if p > h else eol]
    words = header[1:].split() if fmt in ("fasta", "fastq") else header.split()[1:2]
    return (words[0].decode("utf-8", "replace") if words else None), n - 1


def _check_text(name: str, data: bytes, fmt: str) -> None:
    """Control bytes or invalid UTF-8 anywhere in a sequence file: an error naming record and line."""
    problem = p = None
    for off in range(0, len(data), _CHUNK):  # chunks: no full-size copy of a large file
        chunk = data[off:off + _CHUNK]
        if len(chunk.translate(None, _CONTROL)) != len(chunk):
            p = off + _CONTROL_RE.search(chunk).start()
            problem = f"binary content ({_show(data[p])})"
            break
    if p is None:
        import codecs
        dec = codecs.getincrementaldecoder("utf-8")()
        try:
            for off in range(0, len(data), _CHUNK):
                dec.decode(data[off:off + _CHUNK], final=off + _CHUNK >= len(data))
            return
        except UnicodeDecodeError as e:
            p = max(0, off + e.start)  # e.start is relative to the chunk (and any carried-over bytes)
            p = min(p, len(data) - 1)
            problem = f"not valid UTF-8 text ({_show(data[p])})"
    rname, index = _record_at(data, p, fmt)
    raise InputError(name, f"{problem} at line {_line_of(data, p)}", rname, index)


def _check_all_letters(name: str, records: list[SequenceRecord], seqs: list[bytes] | None = None,
                       quals: list[bytes] | None = None) -> None:
    """Every sequence holds letters, '*', '-' and '.' only; every FASTQ quality, '!'..'~' only.
    One pass over all records joined (a call per record cost a third more on short reads); the
    record is looked for only when something is wrong."""
    if not records:
        return
    if seqs is None:
        seqs = [r.sequence for r in records]
        quals = [r.quality for r in records if r.quality is not None]
    seq_bad = bool(b"".join(seqs).translate(None, _SEQ_LETTERS))
    if seq_bad or (quals and b"".join(quals).translate(None, _QUAL_CHARS)):
        for i, r in enumerate(records):
            _check_letters(name, r.name, i, r.sequence, r.quality)


def _check_letters(name: str, rname: str, i: int, seq: bytes, qual: bytes | None = None) -> None:
    """A sequence holds letters, '*', '-' and '.' only; a FASTQ quality, '!'..'~' only."""
    if seq.translate(None, _SEQ_LETTERS):
        j = _NOT_SEQ_LETTER.search(seq).start()
        raise InputError(name, f"unexpected character {_show(seq[j])} at position {j + 1} of the "
                         "sequence (sequences hold letters, '*', '-' and '.'; is text of another "
                         "kind or format mixed in?)", rname, i)
    if qual is not None and qual.translate(None, _QUAL_CHARS):
        j = _NOT_QUAL_CHAR.search(qual).start()
        raise InputError(name, f"unexpected character {_show(qual[j])} at position {j + 1} of the "
                         "quality string (expected '!' to '~')", rname, i)
