"""Reading sequence files (FASTA, FASTQ, GenBank, SwissProt; plain, gzip, bgzip) into records.

Why it looks like this
----------------------
* The engine fetches an item's bytes itself (through fsspec, on I/O threads) and hands them to
  ``parse(key, raw)``; so :func:`read_records` takes the bytes when it has them and fetches only
  when called on its own.  The same function serves local paths, ``s3://``, ``memory://`` ….
* pysam (htslib's kseq) parses FASTA/FASTQ in C, but it reads only paths.  The bytes are
  decompressed here and written to a temporary file for it, in ``/dev/shm`` (memory) when it has
  room, else the temp dir; the file is removed on every path out.  Decompressing in Python rather
  than in htslib gives clear errors for truncated or corrupt gzip (htslib prints to stderr and
  raises "unknown problem parsing"), reads bgzip for free (it is multi-member gzip) and bzip2/xz
  by their magic numbers.
* htslib is lenient where silence would corrupt results: it drops sequence lines before the first
  header, yields a truncated last FASTQ record without quality, and accepts empty names.  Those
  are checked here, so bad input stops the run before compute with the file, the record and the
  problem in one message (:class:`InputError`), as the design asks.
* GenBank goes through Biopython's scanner with features skipped (the sequence is all an item
  needs; skipping features made the 162-locus Klebsiella file ~6x faster to read).
* SwissProt/UniProt flat files (``ID   NAME  Reviewed; 2554 AA.``, e.g. HMMER's 7LESS_DROME)
  go through ``Bio.SwissProt``; the record name is the entry name, and the length the ID line
  declares is checked.
* Hostile input (``tests/unit/test_hostile_input.py``) gives either the records a clean file would
  give or an :class:`InputError`.  Tolerated: CRLF, a UTF-8 byte-order mark, blanks at line ends,
  any line wrapping.  Errors, named by record and line: control bytes or invalid UTF-8 anywhere
  (pysam cuts strings at a NUL byte, which silently shortened a sequence past the 64 KB that
  :func:`detect_format` samples), sequence characters other than letters, ``*``, ``-`` and ``.``
  (digits, ``>``, inner blanks: another format's lines mixed in), and text the parsers would skip
  without a word (a FASTA line starting with '@' or '+', FASTQ lines between records, anything but
  LOCUS after a GenBank record's ``//`` — a GenBank record whose LOCUS line was lost vanished).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import re
import tempfile
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Literal

from pairflow.engine import InputError as _EngineInputError

__all__ = [
    "SequenceRecord",
    "InputError",
    "read_records",
    "SequenceCatalog",
    "parsed_file",
    "file_stem",
    "detect_format",
]

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


# --------------------------------------------------------------------------------------------
# bytes -> text


def _fetch(url: str) -> bytes:
    from pairflow.engine import InputError as EngineInputError, fetch
    try:
        return fetch(url)
    except EngineInputError as exc:  # this module's subclass, same message
        raise InputError(exc.file, exc.problem) from None


_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def _decompress(name: str, raw: bytes) -> bytes:
    """Undo gzip/bgzip/bzip2/xz by magic number (not by suffix: names lie, magic does not)."""
    try:
        if raw[:2] == b"\x1f\x8b":
            out = gzip.decompress(raw)  # multi-member: reads bgzip too, and checks every CRC
            # BGZF cut exactly between two blocks is still valid multi-member gzip; only its empty
            # end-of-file block tells (htslib warns about it; a shorter sequence must not pass).
            if raw[:4] == b"\x1f\x8b\x08\x04" and raw[12:14] == b"BC" and not raw.endswith(_BGZF_EOF):
                raise InputError(name, "truncated BGZF file (its end-of-file block is missing: "
                                 "cut between two blocks?)")
            return out
        if raw[:3] == b"BZh":
            return bz2.decompress(raw)
        if raw[:6] == b"\xfd7zXZ\x00":
            return lzma.decompress(raw)
    except EOFError:
        raise InputError(name, "truncated compressed file (data ends before the end-of-stream marker)") from None
    except (gzip.BadGzipFile, zlib.error, OSError, lzma.LZMAError) as e:
        raise InputError(name, f"corrupt compressed file: {e}") from None
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        raise InputError(name, "zstd-compressed files are not supported; use gzip or bgzip")
    return raw


_CONTROL = bytes(range(0, 9)) + b"\x0b\x0e\x0f" + bytes(range(0x10, 0x20)) + b"\x7f"
_SEQ_LINE = re.compile(rb"^[A-Za-z*.\-]+\r?$")
_BOM = b"\xef\xbb\xbf"  # UTF-8 byte-order mark (Windows editors write it)
_CONTROL_RE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_SEQ_LETTERS = bytes(range(65, 91)) + bytes(range(97, 123)) + b"*-."  # what _SEQ_LINE accepts
_NOT_SEQ_LETTER = re.compile(rb"[^A-Za-z*.\-]")
_QUAL_CHARS = bytes(range(33, 127))  # Phred+33 '!'..'~'
_NOT_QUAL_CHAR = re.compile(rb"[^!-~]")
_TRAILING_BLANKS = re.compile(rb"[ \t]+(?=\r?\n|\Z)")
_MARKERS = ((b">", "fasta"), (b"@", "fastq"), (b"LOCUS", "genbank"), (b"ID   ", "swiss"))
_CHUNK = 1 << 24


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


# --------------------------------------------------------------------------------------------
# hostile input: where in the file, and what


def _show(byte: int) -> str:
    return repr(chr(byte)) if 32 <= byte < 127 else f"byte 0x{byte:02x}"


def _line_of(data: bytes, p: int) -> int:
    return data.count(b"\n", 0, p) + 1


def _format_by_marker(data: bytes) -> str | None:
    """The format the first non-blank bytes announce (what detect_format would say), or None."""
    m = re.match(rb"\s*", data[:65536])
    start = m.end()
    for marker, fmt in _MARKERS:
        if data.startswith(marker, start):
            return fmt
    return None


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


# --------------------------------------------------------------------------------------------
# parsers


def _tmpdirs(size: int) -> list[str | None]:
    """Where to put pysam's copy: /dev/shm (memory) first when it has room to spare — it is often
    small (64 MB in Docker) and Ray's object store lives there too — then the default temp dir."""
    dirs: list[str | None] = []
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize > 4 * size + (256 << 20):
            dirs.append(shm)
    except OSError:
        pass
    dirs.append(None)
    return dirs


def _write_temp(name: str, data: bytes, suffix: str) -> str:
    last: OSError | None = None
    for d in _tmpdirs(len(data)):
        try:
            fd, path = tempfile.mkstemp(prefix="pairflow-", suffix=suffix, dir=d)
        except OSError as e:
            last = e
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return path
        except OSError as e:
            last = e
            os.unlink(path)
    raise OSError(f"{name}: cannot write a temporary copy for pysam: {last}") from last


def _parse_fastx(name: str, data: bytes, fmt: str) -> list[SequenceRecord]:
    """FASTA/FASTQ records.  Blanks at line ends are tolerated without a regex pass over every
    file: they show up as blanks in a sequence (or as a pysam quality-length error), and only then
    is the file parsed again with them removed — blanks inside a line stay an error."""
    try:
        return _fastx_records(name, data, fmt)
    except InputError:
        if not _TRAILING_BLANKS.search(data):
            raise
    return _fastx_records(name, _TRAILING_BLANKS.sub(b"", data), fmt)


def _name_and_comment(entry) -> tuple[str, str]:
    """A pysam record's name and description. For "> NAME description" kseq gives an empty name
    and the whole text as the comment; the name is then its first word, as Biopython and BLAST
    read it."""
    name, comment = entry.name, entry.comment or ""
    if not name:
        words = comment.split(None, 1)
        name = words[0] if words else ""
        comment = words[1] if len(words) > 1 else ""
    return name, comment


def _fastx_records(name: str, data: bytes, fmt: str) -> list[SequenceRecord]:
    import pysam

    path = _write_temp(name, data, ".fq" if fmt == "fastq" else ".fa")
    records: list[SequenceRecord] = []
    seqs: list[bytes] = []
    quals: list[bytes] = []
    try:
        try:
            with pysam.FastxFile(path) as fx:
                for entry in fx:
                    i = len(records)
                    rname, comment = _name_and_comment(entry)
                    seq = entry.sequence or ""
                    qual = entry.quality
                    if not rname:
                        raise InputError(name, "missing header name (nothing after '>' or '@')",
                                         index=i)
                    if fmt == "fastq":
                        if qual is None:
                            raise InputError(name, "missing quality line (truncated FASTQ record?)", rname, i)
                        if len(qual) != len(seq):
                            raise InputError(
                                name, f"quality length {len(qual)} differs from sequence length {len(seq)}", rname, i
                            )
                    elif qual is not None:
                        raise InputError(name, "a '+' line (FASTQ quality) in a FASTA file: is a "
                                         "FASTQ file mixed in?", rname, i)
                    try:
                        sbytes = seq.encode("ascii")
                    except UnicodeEncodeError:
                        raise InputError(name, "non-ASCII character in sequence", rname, i) from None
                    try:
                        qbytes = qual.encode("ascii") if qual is not None else None
                    except UnicodeEncodeError:
                        raise InputError(name, "non-ASCII character in quality string", rname, i) from None
                    records.append(SequenceRecord(rname, sbytes, qbytes, comment.rstrip()))
                    seqs.append(sbytes)
                    if qbytes is not None:
                        quals.append(qbytes)
        except InputError as e:
            raise _fasta_at_line(name, data, fmt, e) from None
        except UnicodeDecodeError as e:
            err = InputError(name, f"not valid UTF-8 text ({e.reason})", index=len(records))
            raise _fasta_at_line(name, data, fmt, err) from None
        except (ValueError, OSError) as e:
            msg = str(e).replace(path, name)
            if "truncated quality" in msg:
                msg = "quality string longer or shorter than the sequence (pysam: truncated quality string)"
            raise _fasta_at_line(name, data, fmt, InputError(name, msg, index=len(records))) from None
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    _check_all_letters(name, records, seqs, quals)
    _check_all_lines_read(name, data, fmt, records)
    return records


_AT_LINE = re.compile(rb"^@", re.M)


def _at_line_error(name: str, data: bytes, p: int) -> InputError:
    rname, index = _record_at(data, p, "fasta")  # the record whose lines hold it
    return InputError(name, f"line {_line_of(data, p)} starts with '@', a FASTQ header in a FASTA "
                      "file (is a FASTQ file mixed in?)", rname, index)


def _fasta_at_line(name: str, data: bytes, fmt: str, err: InputError) -> InputError:
    """kseq takes a FASTA line starting with '@' for a header: the records after it are phantoms,
    and an error about one of them is really about that line.  (Error path only.)"""
    if fmt != "fasta":
        return err
    m = _AT_LINE.search(data)
    if m is None:
        return err
    at = _at_line_error(name, data, m.start())
    return at if err.index is None or at.index is None or at.index < err.index else err


def _check_all_lines_read(name: str, data: bytes, fmt: str, records: list[SequenceRecord]) -> None:
    """kseq skips whatever it does not expect while it looks for the next header, and takes a line
    starting with '@' for a header in FASTA too: records of another format, or a FASTQ record whose
    header line was lost, would vanish without a word.  Count the header lines it must have read."""
    if not records:
        return
    if fmt == "fasta":
        start = re.match(rb"\s*", data[:65536]).end()
        n_heads = data.count(b"\n>", start) + (data[start:start + 1] == b">")
        if n_heads == len(records):
            return
        m = _AT_LINE.search(data)
        if m is None:  # kseq drops a bare '>' at the very end of the file
            p = data.rfind(b"\n>") + 1
            raise InputError(name, f"header line {_line_of(data, p)} ends the file without a name or "
                             "a sequence (file truncated?)", index=len(records))
        raise _at_line_error(name, data, m.start())
    # FASTQ: 4 lines a record and every record non-empty leave no line unread; otherwise walk.
    n_lines = data.count(b"\n") + (not data.endswith(b"\n"))
    if n_lines == 4 * len(records) and all(r.sequence for r in records):
        return
    heads, stray = _fastq_walk(data)
    if stray is not None:
        i = len(heads) - 1
        line = data[stray:stray + 40].split(b"\n", 1)[0].decode("utf-8", "replace")
        raise InputError(name, f"line {_line_of(data, stray)} ({line!r}) belongs to no FASTQ record "
                         "(expected an '@' header after the quality; is another format mixed in, "
                         "or a header line lost?)",
                         records[i].name if 0 <= i < len(records) else None, i if i >= 0 else None)
    if len(heads) != len(records):  # kseq drops a bare '@' at the very end of the file
        raise InputError(name, f"header line {_line_of(data, heads[-1])} ends the file without a name "
                         "or a sequence (file truncated?)", index=len(records))


_LOCUS = re.compile(r"LOCUS\s+\S+\s+(\d+)\s+(?:bp|aa)")


def _locus_lengths(text: str) -> list[int]:
    """Sequence lengths declared by the LOCUS lines, in order.  (A multi-line regex over the
    whole text took 70 ms on the 8 MB Klebsiella file; finding line starts first takes ~1 ms.)"""
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


# --------------------------------------------------------------------------------------------
# public API


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


# --------------------------------------------------------------------------------------------
# items: which records make up each key, and a per-process cache of parsed files

_PARSED: "OrderedDict[tuple, tuple]" = OrderedDict()  # (url, fmt, allow_empty) -> (sig, records)
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
                allow_empty: bool = False) -> list[SequenceRecord]:
    """The records of one file, fetched and parsed once per process while it stays among the
    last few files used: items that are records of one file would otherwise each read it whole
    (a 2.5 MB target file read once for each of its 8,000 records)."""
    return _parsed(url, raw, fmt, allow_empty)[0]


def _parsed(url: str, raw: bytes | None, fmt: str,
            allow_empty: bool) -> tuple[list[SequenceRecord], dict[str, int]]:
    """(records, {name: index}) of a file, through the per-process cache."""
    key, sig = (url, fmt, allow_empty), _signature(url, raw)
    with _PARSED_LOCK:
        hit = _PARSED.get(key)
        if hit is not None and hit[0] == sig:
            _PARSED.move_to_end(key)
            return hit[1]
    records = read_records(url, raw=raw, fmt=fmt, allow_empty=allow_empty)
    value = (records, {r.name: i for i, r in enumerate(records)})
    size = sum(len(r.sequence) for r in records)
    with _PARSED_LOCK:
        _PARSED[key] = (sig, value, size)
        total = sum(entry[2] for entry in _PARSED.values())
        while len(_PARSED) > _PARSED_KEPT and total > _PARSED_KEPT_BYTES:
            total -= _PARSED.popitem(last=False)[1][2]
    return value


class SequenceCatalog:
    """The items of a set of sequence files: their keys, where each item's records are, and the
    records themselves, read through a per-process cache of parsed files.

    ``item="file"``: an item is a file with all its records (a genome of several chromosomes or
    contigs), keyed by :func:`file_stem`; the keys are checked before any file is read.
    ``item="record"``: an item is one record, keyed ``"stem/name"``; every file is read here,
    because the record names are the keys. A stem shared by two different files gets ``~2``,
    ``~3``... on the later ones, so their records stay apart.

    Two items with one key would overwrite each other in every result, so a duplicate is an
    :class:`InputError` naming both files (and both records). A pickled catalog (what Ray ships
    to workers with the app) is slim: it keeps the file of each stem and answers ``records`` and
    ``location`` for any key, but not the per-key tables, which for thousands of records took
    longer to unpickle than a record takes to load.
    """

    def __init__(self, urls: Iterable, item: Literal["file", "record"] = "file", *,
                 fmt: str = "auto", allow_empty: bool = False):
        if item not in ("file", "record"):
            raise ValueError(f"item must be 'file' or 'record', got {item!r}")
        self.item, self.fmt, self.allow_empty = item, fmt, allow_empty
        self.urls = [u if isinstance(u, str) else os.fspath(u) for u in urls]
        self._stem_url: dict[str, str] = {}
        self._where: dict[str, tuple[str, int | None, str | None]] = {}  # key -> url, index, name
        self._keys_of: dict[str, list[str]] = {}
        self._slim = False
        if item == "file":
            for url in self.urls:
                key = file_stem(url)
                if key in self._stem_url:
                    raise InputError(url, f"duplicate item key {key!r}: same file stem as "
                                     f"{self._stem_url[key]}")
                self._stem_url[key] = url
                self._where[key] = (url, None, None)
                self._keys_of[url] = [key]
            return
        for url in self.urls:
            if url in self._keys_of:
                raise InputError(url, "the same file is listed twice")
            stem = self._new_stem(url)
            keys = self._keys_of[url] = []
            for i, rec in enumerate(self._parse(url)):
                key = f"{stem}/{rec.name}"
                if key in self._where:
                    url0, i0, name0 = self._where[key]
                    raise InputError(url, f"duplicate record name {rec.name!r}: item key "
                                     f"{key!r} is also {url0} record {name0!r} (#{i0 + 1})",
                                     rec.name, i)
                self._where[key] = (url, i, rec.name)
                keys.append(key)

    def _new_stem(self, url: str) -> str:
        stem, n = file_stem(url), 1
        while stem in self._stem_url:
            n += 1
            stem = f"{file_stem(url)}~{n}"
        self._stem_url[stem] = url
        return stem

    def _parse(self, url: str, raw: bytes | None = None) -> list[SequenceRecord]:
        return parsed_file(url, raw, self.fmt, self.allow_empty)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_where={}, _keys_of={}, _slim=True)
        return state

    def _driver(self, what: str) -> None:
        if self._slim:
            raise RuntimeError(f"SequenceCatalog.{what} is driver-side; this is the slim copy "
                               "workers get")

    def keys(self) -> list[str]:
        """Every item's key, in input order (files in the order given, records in file order)."""
        self._driver("keys()")
        return [k for url in self.urls for k in self._keys_of[url]]

    def keys_of(self, url: str) -> list[str]:
        """The keys of one file's items."""
        self._driver("keys_of()")
        return list(self._keys_of[url])

    def location(self, key: str) -> tuple[str, int | None, str | None]:
        """(file, 0-based record index, record name) of a key; the record's index and name are
        None for a whole-file item, and the index is None on a slim copy (found when read)."""
        where = self._where.get(key)
        if where is not None:
            return where
        if self.item == "file":
            return self._stem_url[key], None, None
        stem, _, name = key.partition("/")
        return self._stem_url[stem], None, name

    def url(self, key: str) -> str:
        """The file an item comes from."""
        return self.location(key)[0]

    def fetch_url(self, key: str) -> str | None:
        """What an all-pairs app's ``url(key)`` should answer: the file of a whole-file item (the
        engine fetches it on its I/O threads), None for a record (``records`` reads the file
        through the per-process cache instead of once per record)."""
        return self.location(key)[0] if self.item == "file" else None

    def file_records(self, url: str, raw: bytes | None = None) -> list[SequenceRecord]:
        """Every record of one input file, through the per-process cache (an app that builds
        the items of all of a file's records at once reads them here)."""
        return _parsed(url, raw, self.fmt, self.allow_empty)[0]

    def index_of(self, key: str, raw: bytes | None = None) -> tuple[str, int]:
        """(file, 0-based record index) of a record item, on a slim copy too (the file's index
        of names comes from the per-process cache)."""
        if self.item != "record":
            raise ValueError("index_of is for record items (item='record')")
        url, index, name = self.location(key)
        if index is None:
            index = _parsed(url, raw, self.fmt, self.allow_empty)[1].get(name)
            if index is None:
                raise InputError(url, "the file changed since the run started (record not "
                                 "found)", record=name)
        return url, index

    def records(self, key: str, raw: bytes | None = None) -> list[SequenceRecord]:
        """The records of one item (all of a file's, or the one record), from ``raw`` (the
        file's bytes) when the caller has them."""
        url, _, name = self.location(key)
        records, index = _parsed(url, raw, self.fmt, self.allow_empty)
        if self.item == "file":
            return records
        if name not in index:
            raise InputError(url, "the file changed since the run started (record not found)",
                             record=name)
        return [records[index[name]]]
