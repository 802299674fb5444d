"""FASTA and FASTQ through pysam (htslib's kseq, in C), with the checks kseq leaves out.

Why a temporary file: pysam reads only paths, so the decompressed bytes are written for it to
``/dev/shm`` (memory) when it has room, else the temp dir, and removed on every path out. kseq is
lenient: it drops sequence lines before the first header, yields a truncated last FASTQ record
without quality, accepts empty names, skips lines it does not expect and takes a FASTA line
starting with '@' for a header; each of those is an ``InputError`` here. Tolerated: CRLF, blanks
at line ends, any line wrapping.
"""
from __future__ import annotations

import os
import re
import tempfile

from .checks import _check_all_letters, _fastq_walk, _line_of, _record_at
from .records import InputError, SequenceRecord

_TRAILING_BLANKS = re.compile(rb"[ \t]+(?=\r?\n|\Z)")


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
