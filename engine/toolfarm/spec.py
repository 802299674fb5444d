"""What a farm runs: the program as an argument list, how its input is cut, how a unit reaches
it, the shared files and their per-node preparation, and the output streams.

Arguments are templates expanded per unit (``expand``); a token is passed to the program as one
argument and never through a shell, so a file name with spaces or ``;`` stays one argument.
Placeholders (Python ``str.format`` fields inside a token):

  ``{input}``          the unit's input file (``feed="file"``); with ``feed="stdin"`` the unit
                       arrives on standard input instead
  ``{shared:NAME}``    the node-local copy of shared file NAME (after its preparation)
  ``{out:NAME}``       a file the tool writes, collected as output stream NAME
  ``{scratch}``        the node's scratch directory (shared files live there)
  ``{tmp}``            the unit's own temporary directory
  ``{input_records}``  records in the whole input (hmmsearch ``-Z``: E-values as one search)
  ``{db_letters}``, ``{db_records}``  letters and records of the whole segmented database
                       (blastp ``-dbsize``), set when ``volumes > 1``
  ``{threads}``        the cores the worker owns (1 unless there are fewer workers than
                       cores: ``sizing.threads_per_worker``): the tool's own thread option,
                       ``-num_threads {threads}``, ``--cpu {threads}``, ``--threads {threads}``
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

from ..errors import PairflowError
from .units import AUTO

FORMATS = ("fasta", "fastq", "lines", "pattern", "file")
FEEDS = ("stdin", "file")
STDOUT = "stdout"


@dataclass
class FarmSpec:
    """One farm: ``program`` (argv template) over ``inputs`` cut into units of
    ``unit_records`` records (``cut``: fasta, fastq, lines, pattern or file = one unit per
    input file).

    ``shared``: name -> path, put in the object store once and materialised once per node;
    ``prepare``: argv templates run once per node in its scratch directory after the shared
    files arrive (``makeblastdb``, ``hmmpress``); ``streams``: output stream names (``stdout``
    or the NAME of an ``{out:NAME}`` placeholder).

    ``volumes``: cut the shared FASTA file ``segment`` into this many volumes, each searched
    separately (a unit runs once per volume) with ``volume_args`` appended, and the hits of a
    unit merged by ``merge`` (see ``segment.py``) so they read as one unsegmented search."""
    program: list[str]
    inputs: list[str]
    cut: str = "fasta"
    unit_records: int | str = 50      # or "auto": sized by a probe of the tool (units.py)
    pattern: str | None = None        # cut="pattern": a regex that starts a record ...
    pattern_ends: bool = False        # ... or ends it (SDF's "$$$$")
    feed: str = "file"
    input_suffix: str = ".fa"         # the name of the unit's input file ends so
    shared: dict[str, str] = field(default_factory=dict)
    prepare: list[list[str]] = field(default_factory=list)
    streams: list[str] = field(default_factory=lambda: [STDOUT])
    retries: int = 2                  # a failing unit runs at most 1 + retries times
    timeout_s: float | None = None    # per tool run; past it the run counts as failed
    env: dict[str, str] = field(default_factory=dict)
    volumes: int = 1
    segment: str | None = None        # the shared name cut into volumes
    volume_args: list[str] = field(default_factory=list)
    merge: dict = field(default_factory=dict)  # stream -> merge rule (segment.MERGES)
    tail_units: int | None = None     # the last units are cut smaller (None: 2 per worker)

    def check(self) -> "FarmSpec":
        """Refuse a spec that cannot run, before anything starts, saying what is wrong."""
        if not self.program or not all(isinstance(t, str) for t in self.program):
            raise PairflowError(f"farm: program must be a non-empty list of strings, got "
                                f"{self.program!r}")
        if not self.inputs:
            raise PairflowError("farm: no inputs given")
        if self.cut not in FORMATS:
            raise PairflowError(f"farm: unknown cut {self.cut!r}: choose {', '.join(FORMATS)}")
        if self.cut == "pattern" and not self.pattern:
            raise PairflowError("farm: cut='pattern' needs pattern= (a regex)")
        if self.feed not in FEEDS:
            raise PairflowError(f"farm: unknown feed {self.feed!r}: choose stdin or file")
        if self.unit_records != AUTO and (not isinstance(self.unit_records, int)
                                            or isinstance(self.unit_records, bool)
                                            or self.unit_records < 1):
            raise PairflowError(f"farm: unit_records must be an integer >= 1 or 'auto', got "
                                f"{self.unit_records!r}")
        tokens = self.program + self.volume_args + [t for p in self.prepare for t in p]
        fields_ = {f for t in tokens for f in placeholders(t)}
        if self.feed == "file" and "input" not in fields_ and self.cut != "file":
            raise PairflowError("farm: feed='file' but no argument names {input}")
        for f in fields_:
            kind, _, name = f.partition(":")
            if kind == "shared" and name not in self.shared:
                raise PairflowError(f"farm: argument names {{shared:{name}}} but no shared "
                                    f"file {name!r} is given (shared: {sorted(self.shared)})")
            if kind not in ("input", "shared", "out", "scratch", "tmp", "input_records",
                            "db_letters", "db_records", "threads"):
                raise PairflowError(f"farm: unknown placeholder {{{f}}} in the arguments")
        outs = {f.partition(":")[2] for t in self.program for f in placeholders(t)
                if f.startswith("out:")}
        for s in self.streams:
            if s != STDOUT and s not in outs:
                raise PairflowError(f"farm: stream {s!r} is neither stdout nor an {{out:{s}}} "
                                    f"argument of the program")
        if self.volumes > 1 and self.segment not in self.shared:
            raise PairflowError(f"farm: volumes={self.volumes} needs segment= naming a shared "
                                f"file (shared: {sorted(self.shared)})")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self, input_digests: dict[str, str],
                    shared_digests: dict[str, str]) -> dict:
        """What decides the results, key by key, so a refused resume names what changed:
        ``inputs`` maps every input and shared file to its sha256, the rest are spec fields
        (how often a unit is retried or how long it may take decides nothing)."""
        d = {k: v for k, v in self.to_dict().items()
             if k not in ("retries", "timeout_s", "tail_units", "inputs", "shared")}
        files = dict(input_digests)
        files.update({f"shared {n}": shared_digests[n] for n in sorted(shared_digests)})
        return {"inputs": files, **d}

    def digest(self, input_digests: dict[str, str], shared_digests: dict[str, str]) -> str:
        """One hash of ``fingerprint`` (names the farm's node scratch directory)."""
        fp = self.fingerprint(input_digests, shared_digests)
        return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()


_FIELD = re.compile(r"\{([^{}]*)\}")


def placeholders(token: str) -> list[str]:
    """The ``{...}`` fields of one argument template."""
    return _FIELD.findall(token.replace("{{", "").replace("}}", ""))


class _Values(dict):
    def __missing__(self, key):
        raise PairflowError(f"farm: no value for placeholder {{{key}}}")


def expand(tokens: list[str], values: dict[str, str]) -> list[str]:
    """Argument templates -> the argv of one run (``values``: placeholder -> text)."""
    vals = _Values(values)
    out = []
    for t in tokens:
        # "{shared:db}" is not a valid format field name for str.format_map (the colon starts
        # a format spec), so fields are substituted whole, and "{{"/"}}" escape braces
        text = t.replace("{{", "\0").replace("}}", "\1")
        text = _FIELD.sub(lambda m: str(vals[m.group(1)]), text)
        out.append(text.replace("\0", "{").replace("\1", "}"))
    return out
