"""Cutting input into work units: byte ranges of whole records, so a unit's input is exactly the
bytes the user's file holds (the tool sees what it would see run on the file itself).

A record starts at a FASTA header (``>``), every fourth line of FASTQ (``@``, checked against
its ``+`` line), every line (``lines``), or where a pattern matches a line (``pattern``: MOL2's
``@<TRIPOS>MOLECULE`` starts one; with ``pattern_ends`` SDF's ``$$$$`` ends one). ``file``
makes each input file one unit (Clustal Omega aligns one file). Units never span files.

The last units are cut smaller (half, then a quarter of ``unit_records``), so the run ends on
short units and no core idles while one long unit finishes: the all-pairs engine splits its
last tiles for the same reason.

``unit_records="auto"``: every tool run pays a fixed cost (blastp loads its database and
matrix every time, several queries' worth), so small units waste cores and one huge unit per
core leaves no room to balance. A probe times the tool on one record and on a few
(``fit_unit_cost``), and ``choose_unit_records`` takes units big enough that the fixed cost is
a small share of each, yet enough of them for every worker to get several.
"""
from __future__ import annotations

import hashlib
import importlib
import math
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
FIXED_SHARE = 0.05        # auto units: the tool's fixed cost at most this share of a unit
UNITS_PER_WORKER = 4      # and at least this many full units per worker (balance, progress)
MAX_UNIT_S = 60.0         # and none longer than this (what a killed run loses per worker)
PROBE_RECORDS = 16        # the probe's larger unit


def fit_unit_cost(t_one: float, t_many: float, many: int) -> tuple[float, float]:
    """(fixed seconds per tool run, seconds per record) from the tool timed on 1 record and on
    ``many``: a line through the two points, the per-record cost kept above zero."""
    per_record = max((t_many - t_one) / max(1, many - 1), 1e-6)
    return max(0.0, t_one - per_record), per_record


def choose_unit_records(fixed_s: float, per_record_s: float, records: int, workers: int,
                        fixed_share: float = FIXED_SHARE,
                        units_per_worker: int = UNITS_PER_WORKER,
                        max_unit_s: float = MAX_UNIT_S) -> int:
    """Records per unit: enough that the fixed cost is at most ``fixed_share`` of a unit's
    time, but no more than leaves every worker ``units_per_worker`` units, nor a unit longer
    than ``max_unit_s``; at least 1."""
    want = math.ceil(fixed_s * (1 - fixed_share) / (fixed_share * per_record_s))
    balance = records // max(1, workers * units_per_worker)
    longest = int(max_unit_s / per_record_s)
    return max(1, min(want, balance, longest))


def unit_sizes(total: int, unit_records: int, tail_units: int) -> list[int]:
    """Record counts of consecutive units over ``total`` records (one file)."""
    sizes, done = [], 0
    while done < total:
        sizes.append(unit_size(total - done, unit_records, tail_units))
        done += sizes[-1]
    return sizes


def cut_units(offsets: list[list[int]], unit_records: int, tail_units: int,
              per_file: bool = False) -> list[Unit]:
    """Units over every file's record offsets (``scan_records`` per input), in input order;
    a unit ends at its file's end, and the next starts a new one.

    ``per_file``: one unit per file whatever its records (``cut="file"``)."""
    if per_file:
        return [Unit(i, i, 0, offs[-1], i, 1) for i, offs in enumerate(offsets)]
    left = sum(len(o) - 1 for o in offsets)
    units: list[Unit] = []
    first = 0
    for file, offs in enumerate(offsets):
        rec = 0
        while rec < len(offs) - 1:
            take = min(unit_size(left, unit_records, tail_units), len(offs) - 1 - rec)
            units.append(Unit(len(units), file, offs[rec], offs[rec + take], first, take))
            rec, first, left = rec + take, first + take, left - take
    return units


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
