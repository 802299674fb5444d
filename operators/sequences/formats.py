"""What a sequence file is: its format from its content (``detect_format``: FASTA, FASTQ, GenBank,
SwissProt), the names ``fmt`` may take, and its item key from its name (``file_stem``).

Why by content: names lie (a ``.txt`` FASTA, a ``.fa`` that is FASTQ) and magic does not; the
name is used only for the key, with compression and format suffixes dropped so a key stays the
same when a file is recompressed.
"""
from __future__ import annotations

import posixpath
import re


FORMATS = ("fasta", "fastq", "genbank", "swiss")
_FMT_ALIASES = {
    "auto": "auto",
    "fasta": "fasta", "fa": "fasta", "fna": "fasta", "faa": "fasta",
    "fastq": "fastq", "fq": "fastq",
    "genbank": "genbank", "gb": "genbank", "gbk": "genbank", "gbff": "genbank",
    "swiss": "swiss", "swissprot": "swiss", "uniprot": "swiss", "sp": "swiss", "dat": "swiss",
}
_COMPRESSION_SUFFIXES = (".gz", ".bgz", ".bgzf", ".bz2", ".xz")
_SEQUENCE_SUFFIXES = (
    ".fasta", ".fas", ".fa", ".fna", ".ffn", ".faa", ".frn", ".mfa", ".fsa", ".seq",
    ".fastq", ".fq", ".gbk", ".gb", ".gbff", ".genbank",
)

_CONTROL = bytes(range(0, 9)) + b"\x0b\x0e\x0f" + bytes(range(0x10, 0x20)) + b"\x7f"
_SEQ_LINE = re.compile(rb"^[A-Za-z*.\-]+\r?$")
_MARKERS = ((b">", "fasta"), (b"@", "fastq"), (b"LOCUS", "genbank"), (b"ID   ", "swiss"))


def _looks_binary(head: bytes) -> bool:
    if any(b in head for b in (b"\x00",)) or len(head.translate(None, _CONTROL)) != len(head):
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 4  # a multi-byte character cut at the end of the sample is fine
    return False


def detect_format(data: bytes) -> str:
    """"fasta", "fastq", "genbank" or "swiss" from the first non-blank line of decompressed ``data``.

    Raises ValueError with the reason when it is none of them (the caller adds the file name).
    """
    head = data[:65536]
    if _looks_binary(head):
        raise ValueError("not a sequence file (binary content)")
    stripped = head.lstrip()
    if not stripped:
        raise ValueError("empty file (no records)")
    if stripped[:1] == b">":
        return "fasta"
    if stripped[:1] == b"@":
        return "fastq"
    if stripped[:5] == b"LOCUS":
        return "genbank"
    if stripped[:5] == b"ID   ":
        return "swiss"
    first = stripped.split(b"\n", 1)[0]
    if _SEQ_LINE.match(first):
        raise ValueError("missing header: sequence data before the first '>' (FASTA) or '@' (FASTQ) header line")
    shown = first[:40].decode("utf-8", "replace")
    raise ValueError(
        f"not a sequence file: expected FASTA '>', FASTQ '@' or GenBank 'LOCUS' at the start, found {shown!r}"
    )


def _format_by_marker(data: bytes) -> str | None:
    """The format the first non-blank bytes announce (what detect_format would say), or None."""
    m = re.match(rb"\s*", data[:65536])
    start = m.end()
    for marker, fmt in _MARKERS:
        if data.startswith(marker, start):
            return fmt
    return None


def file_stem(url: str) -> str:
    """The item key of a file: its base name without compression and sequence-format suffixes
    (``s3://b/x/K12.fasta.gz`` -> ``K12``), so keys stay stable when files are recompressed."""
    base = posixpath.basename(str(url).split("?", 1)[0].rstrip("/"))
    low = base.lower()
    for suf in _COMPRESSION_SUFFIXES:
        if low.endswith(suf):
            base, low = base[: -len(suf)], low[: -len(suf)]
            break
    for suf in _SEQUENCE_SUFFIXES:
        if low.endswith(suf) and len(base) > len(suf):
            base = base[: -len(suf)]
            break
    return base
