"""Cutting input into work units: byte ranges of whole records, so a unit's input is exactly the
bytes the user's file holds (the tool sees what it would see run on the file itself).

A record starts at a FASTA header (``>``), every fourth line of FASTQ (``@``, checked against
its ``+`` line), every line (``lines``), or where a pattern matches a line (``pattern``: MOL2's
``@<TRIPOS>MOLECULE`` starts one; with ``pattern_ends`` SDF's ``$$$$`` ends one). ``file``
makes each input file one unit (Clustal Omega aligns one file). Units never span files.

The last units are cut smaller (half, then a quarter of ``unit_records``), so the run ends on
short units and no core idles while one long unit finishes: the all-pairs engine splits its
last tiles for the same reason. ``unit_records="auto"`` is sized from the tool's measured
throughput curve (``sizing.py``); the ladder's units are the run's first units, so the cut
continues where they end (``cut_units``'s ``start``).
"""
from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
from dataclasses import asdict, dataclass

from ..errors import InputError


@dataclass(frozen=True)
class Unit:
    uid: int        # position in input order: gather writes units in this order
    file: int       # index into the farm's inputs
    start: int      # byte range [start, end) of that file
    end: int
    first: int      # index of the unit's first record in the whole input
    records: int

    def to_list(self) -> list[int]:
        return list(asdict(self).values())

    @classmethod
    def from_list(cls, values) -> "Unit":
        return cls(*[int(v) for v in values])


INPUTS_DIR = "inputs"  # in the run directory: compressed inputs, decompressed once
_OPENERS = {".gz": "gzip", ".bgz": "gzip", ".bz2": "bz2", ".xz": "lzma"}


def decompressed(path: str, into: str) -> str:
    """``path`` itself, or for a compressed file (gzip/BGZF, bzip2, xz) its decompressed copy in
    ``into``, written once: the copy appears under its name only when whole, so a run killed
    while decompressing leaves nothing a resume would take for the input."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in _OPENERS:
        return path
    tag = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:8]  # a.fa.gz, b/a.fa.gz
    target = os.path.join(into, f"{tag}-{os.path.basename(path)[:-len(ext)]}")
    if os.path.exists(target):
        return target
    os.makedirs(into, exist_ok=True)
    partial = target + ".partial"
    opener = importlib.import_module(_OPENERS[ext]).open
    try:
        with opener(path, "rb") as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except Exception as exc:  # BadGzipFile, EOFError (truncated), LZMAError, OSError
        if os.path.exists(partial):
            os.remove(partial)
        raise InputError(path, f"cannot decompress it: {exc}") from None
    os.replace(partial, target)
    return target


def scan_records(path: str, cut: str, pattern: str | None = None,
                 pattern_ends: bool = False) -> list[int]:
    """Byte offsets where each record starts, then the file's size (``len - 1`` records).

    Bad input is an ``InputError`` naming the file, the record and the problem."""
    if path.endswith((".gz", ".bgz", ".bz2", ".xz")):
        raise InputError(path, "a farm cuts its input by byte ranges: decompress it first")
    size = os.path.getsize(path)
    if cut == "file":
        return [0, size]
    starts: list[int] = []
    rx = re.compile(pattern.encode()) if cut == "pattern" else None
    pos, lineno = 0, 0
    pending_end = False  # pattern_ends: the next line starts a record
    with open(path, "rb") as fh:
        for line in fh:
            if cut == "fasta":
                if line.startswith(b">"):
                    starts.append(pos)
                elif not starts and line.strip():
                    raise InputError(path, "line 1", "not FASTA: text before the first '>' "
                                                     "header")
            elif cut == "fastq":
                k = lineno % 4
                if k == 0:
                    if not line.startswith(b"@"):
                        if line.strip() or lineno == 0:
                            raise InputError(path, f"record {len(starts) + 1}",
                                             f"line {lineno + 1}: a FASTQ record starts with "
                                             f"'@' (multi-line FASTQ is not supported)")
                    else:
                        starts.append(pos)
                elif k == 2 and not line.startswith(b"+"):
                    raise InputError(path, f"record {len(starts)}",
                                     f"line {lineno + 1}: expected the '+' line")
            elif cut == "lines":
                if line.strip():
                    starts.append(pos)
            elif cut == "pattern":
                if pattern_ends:
                    if (pending_end or not starts) and line.strip():
                        starts.append(pos)
                        pending_end = False
                    if rx.match(line):
                        pending_end = True
                elif rx.match(line):
                    starts.append(pos)
                elif not starts and line.strip():
                    raise InputError(path, "line 1", f"text before the first record (pattern "
                                                     f"{pattern!r})")
            pos += len(line)
            lineno += 1
    if cut == "fastq" and lineno % 4 not in (0,) and starts:
        raise InputError(path, f"record {len(starts)}", "truncated FASTQ record")
    return starts + [size]


def unit_size(left: int, unit_records: int, tail_units: int) -> int:
    """Records of the next unit when ``left`` records remain: ``unit_records``, then half that
    in the last ``tail_units`` full units' worth of records, a quarter in the last quarter."""
    tail = tail_units * unit_records
    if left > tail:
        n = unit_records
    elif left > tail // 4:
        n = max(1, unit_records // 2)
    else:
        n = max(1, unit_records // 4)
    return min(n, left)


AUTO = "auto"


def unit_sizes(total: int, unit_records: int, tail_units: int) -> list[int]:
    """Record counts of consecutive units over ``total`` records (one file)."""
    sizes, done = [], 0
    while done < total:
        sizes.append(unit_size(total - done, unit_records, tail_units))
        done += sizes[-1]
    return sizes


def cut_units(offsets: list[list[int]], unit_records: int, tail_units: int,
              per_file: bool = False, start: tuple[int, int] = (0, 0),
              uid0: int = 0) -> list[Unit]:
    """Units over every file's record offsets (``scan_records`` per input), in input order;
    a unit ends at its file's end, and the next starts a new one.

    ``start``: (file, record in that file) where the cut begins, numbering units from
    ``uid0`` (the records before it are already in units: the ladder's). ``per_file``: one
    unit per file whatever its records (``cut="file"``)."""
    if per_file:
        return [Unit(uid0 + k, i, 0, offs[-1], i, 1)
                for k, (i, offs) in enumerate(list(enumerate(offsets))[start[0]:])]
    f0, r0 = start
    first = sum(len(o) - 1 for o in offsets[:f0]) + r0
    left = sum(len(o) - 1 for o in offsets) - first
    units: list[Unit] = []
    for file, offs in enumerate(offsets):
        if file < f0:
            continue
        rec = r0 if file == f0 else 0
        while rec < len(offs) - 1:
            take = min(unit_size(left, unit_records, tail_units), len(offs) - 1 - rec)
            units.append(Unit(uid0 + len(units), file, offs[rec], offs[rec + take], first, take))
            rec, first, left = rec + take, first + take, left - take
    return units


def take_unit(offsets: list[list[int]], pos: tuple[int, int], uid: int,
              n: int, per_file: bool = False) -> tuple[Unit, tuple[int, int]] | None:
    """The unit of up to ``n`` records at ``pos`` (file, record), never past its file's end,
    and the position after it; None at the end of the input (``per_file``: the next file)."""
    f, r = pos
    while f < len(offsets) and r >= len(offsets[f]) - 1:
        f, r = f + 1, 0
    if f >= len(offsets):
        return None
    offs = offsets[f]
    first = sum(len(o) - 1 for o in offsets[:f]) + r
    if per_file:
        return Unit(uid, f, 0, offs[-1], f, 1), (f + 1, 0)
    k = min(n, len(offs) - 1 - r)
    return Unit(uid, f, offs[r], offs[r + k], first, k), (f, r + k)


def read_unit(path: str, unit: Unit) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(unit.start)
        return fh.read(unit.end - unit.start)


def record_names(data: bytes, cut: str) -> list[str]:
    """The first word of each record's header (FASTA ``>``, FASTQ ``@``): how tools name
    queries in their output."""
    mark = b">" if cut == "fasta" else b"@"
    names = []
    for i, line in enumerate(data.splitlines()):
        if line.startswith(mark) and (cut == "fasta" or i % 4 == 0):
            word = line[1:].split(maxsplit=1)
            names.append(word[0].decode(errors="replace") if word else "")
    return names
