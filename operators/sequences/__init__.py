"""Reading sequence files (FASTA, FASTQ, GenBank, SwissProt; plain, gzip, bgzip, bzip2, xz) into
records, and the items of a set of them.

This package holds, one concept a module: ``records`` (``SequenceRecord`` and ``InputError``),
``formats`` (the format by content, the item key by name), ``compression`` (fetching and
decompressing), ``checks`` (hostile input: what the parsers would accept silently, named by
record and line), the parsers ``fastx`` (pysam), ``genbank`` and ``swiss`` (Biopython),
``reader`` (``read_records``, which strings them together), ``cache`` (a per-process cache of
parsed files) and ``catalog`` (``SequenceCatalog``: keys, duplicates, where each item's records
are). Hostile input (``tests/unit/test_hostile_input.py``) gives either the records a clean file
would give or an ``InputError``; each module's docstring says which leniency of its parser it
closes. Everything others import is named here.
"""
from __future__ import annotations

from .cache import parsed_file
from .catalog import SequenceCatalog
from .formats import FORMATS, detect_format, file_stem
from .reader import read_records
from .records import InputError, SequenceRecord

__all__ = [
    "SequenceRecord",
    "InputError",
    "read_records",
    "SequenceCatalog",
    "parsed_file",
    "file_stem",
    "detect_format",
    "FORMATS",
]
