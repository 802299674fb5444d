"""GenBank through Biopython's scanner, features skipped, with the checks it leaves out.

Why features are skipped: the sequence is all an item needs, and skipping them makes a GenBank
file several times faster to read. Biopython only warns when a file is cut inside a record and
skips whatever lies between a record's '//' and the next LOCUS line, so the LOCUS lengths, the
final '//' and the space between records are checked here.
"""
from __future__ import annotations

import io
import re

from .checks import _check_all_letters
from .records import InputError, SequenceRecord


_LOCUS = re.compile(r"LOCUS\s+\S+\s+(\d+)\s+(?:bp|aa)")


def _locus_lengths(text: str) -> list[int]:
    """Sequence lengths declared by the LOCUS lines, in order.  (Line starts are found first: a
    multi-line regex over the whole text is many times slower.)"""
    starts = [0] if text.startswith("LOCUS") else []
    i = text.find("\nLOCUS")
    while i >= 0:
        starts.append(i + 1)
        i = text.find("\nLOCUS", i + 1)
    out = []
    for p in starts:
        m = _LOCUS.match(text, p)
        if m:
            out.append(int(m.group(1)))
    return out


def _parse_genbank(name: str, data: bytes) -> list[SequenceRecord]:
    from Bio.GenBank.Scanner import GenBankScanner

    text = data.decode("utf-8", "replace")
    records: list[SequenceRecord] = []
    try:
        for rec in GenBankScanner(debug=0).parse_records(io.StringIO(text), do_features=False):
            i = len(records)
            try:
                seq = bytes(rec.seq)
            except ValueError:  # Bio.Seq.UndefinedSequenceError: no ORIGIN section
                seq = b""
            rname = rec.name if rec.name and rec.name != "<unknown name>" else None
            if rname is None:
                raise InputError(name, "missing LOCUS name", index=i)
            records.append(SequenceRecord(rname, seq, None, rec.description or ""))
    except InputError:
        raise
    except ValueError as e:
        raise InputError(name, f"malformed GenBank: {e}", index=len(records)) from None
    # Biopython only warns when the file is cut inside a record's sequence; the LOCUS lines say
    # how long each sequence should be, and a complete file ends with '//'.
    if records and not text.rstrip().endswith("//"):
        r = records[-1]
        raise InputError(name, "truncated GenBank file (last record does not end with '//')", r.name, len(records) - 1)
    _check_all_letters(name, records)
    _check_genbank_between_records(name, text, records)
    expected = _locus_lengths(text)
    if len(expected) == len(records):
        for i, (n, r) in enumerate(zip(expected, records)):
            if len(r.sequence) and len(r.sequence) != n:
                raise InputError(name, f"sequence has {len(r.sequence)} letters but LOCUS says {n}", r.name, i)
    return records


def _check_genbank_between_records(name: str, text: str, records: list[SequenceRecord]) -> None:
    """Biopython skips whatever lies between a record's '//' and the next LOCUS line: another
    format's records, or a whole GenBank record whose LOCUS line was lost.  Nothing may be there."""
    nonblank = re.compile(r"\S")
    i, pos = 0, 0
    while True:
        e = text.find("\n//", pos)
        if e < 0:
            return
        eol = text.find("\n", e + 1)
        if eol < 0:
            return
        m = nonblank.search(text, eol)
        if m is None:
            return
        if not text.startswith("LOCUS", m.start()):
            r = records[min(i, len(records) - 1)]
            line = text[m.start():m.start() + 40].split("\n", 1)[0]
            raise InputError(name, f"line {text.count(chr(10), 0, m.start()) + 1} ({line!r}) after the "
                             "record's end '//' is not a LOCUS line (a record without its LOCUS "
                             "line, or another format mixed in?)", r.name, min(i, len(records) - 1))
        i, pos = i + 1, m.start()
