"""A sequence record and the error of a bad sequence file: the vocabulary every reader, check and
the catalog share.

Why apart: each parser builds ``SequenceRecord`` values and raises ``InputError``, and apps read
both; they import this small module, not the parsers.
"""
from __future__ import annotations

from dataclasses import dataclass

from pairflow.engine import InputError as _EngineInputError


@dataclass(frozen=True, slots=True)
class SequenceRecord:
    """One record: ``name`` is the header's first word (GenBank: the LOCUS name), ``sequence`` the
    letters as bytes (what kernels take), ``quality`` the FASTQ quality string (None otherwise),
    ``description`` the rest of the header line (FASTA/FASTQ; GenBank: DEFINITION)."""

    name: str
    sequence: bytes
    quality: bytes | None = None
    description: str = ""

    def __len__(self) -> int:
        return len(self.sequence)


class InputError(_EngineInputError):
    """Bad input, with where it is: ``"FILE: record 'NAME' (#i): PROBLEM"``.

    It *is* the engine's :class:`engine.errors.InputError` (a ValueError that pickles with its
    fields across Ray), so the driver reports it as bad input before compute; this subclass only
    adds the case of a record known by position but not by name (an empty header, a record pysam
    could not parse).  As in the engine, ``index`` is 0-based and shown 1-based as ``#i``.
    """

    def __init__(self, file, problem: str, record: str | None = None, index: int | None = None):
        super().__init__(str(file), problem, record, index)
        if record is None and index is not None:
            self.args = (f"{self.file}: record #{index + 1}: {problem}",)
