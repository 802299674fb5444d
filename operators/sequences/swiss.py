"""SwissProt/UniProt flat files (``ID   NAME  Reviewed; 2554 AA.``, e.g. HMMER's 7LESS_DROME)
through ``Bio.SwissProt``.

Why its own reader: the record name is the entry name, and the length the ID line declares is
checked against the sequence read.
"""
from __future__ import annotations

import io

from .records import InputError, SequenceRecord


def _parse_swiss(name: str, data: bytes) -> list[SequenceRecord]:
    from Bio import SwissProt

    text = data.decode("utf-8", "replace")
    records: list[SequenceRecord] = []
    try:
        for rec in SwissProt.parse(io.StringIO(text)):
            i = len(records)
            rname = rec.entry_name
            if not rname:
                raise InputError(name, "missing entry name on the ID line", index=i)
            seq = rec.sequence.encode("ascii", "replace")
            if rec.sequence_length and len(seq) != rec.sequence_length:
                raise InputError(name, f"sequence has {len(seq)} letters but the ID line says "
                                 f"{rec.sequence_length}", rname, i)
            records.append(SequenceRecord(rname, seq, None, rec.description or ""))
    except InputError:
        raise
    except (ValueError, AssertionError, KeyError, IndexError, SwissProt.SwissProtParserError) as e:
        raise InputError(name, f"malformed SwissProt entry: {e}", index=len(records)) from None
    return records
