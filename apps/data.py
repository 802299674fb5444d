"""Where the example data live, and how input patterns become file lists.

The data directory is ``PAIRFLOW_DATA`` if set, else the platform's user data directory
(``platformdirs.user_data_dir("pairflow")``: ``~/.local/share/pairflow`` on Linux), never a path
inside the package or the checkout: an installed pairflow finds them wherever it runs from.
``pairflow data install`` (``apps/data_install.py``) fills it: Debian data packages unpacked into
``root/``, and the sets derived from them (``proteomes/``, ``cameras/``, ``particles/``).
Patterns may be globs, comma-separated lists, directories or fsspec URLs. A default input
under the data directory that matches nothing means the data are not installed: that is said in
one line (``NoDataError``), with how to get them or how to name inputs instead.
"""
from __future__ import annotations

import os
from typing import Iterable

from pairflow.engine import InputError

SEQ_SUFFIXES = (".fasta", ".fa", ".fna", ".ffn", ".faa", ".fas", ".fastq", ".fq",
                ".gbk", ".gb", ".genbank")
# the config keys that hold input patterns (app and farm groups); a default one points into the
# data directory through ${pairflow_data:...} or ${pairflow_data_dir:...}
INPUT_KEYS = ("data.inputs", "data.queries", "data.targets", "farm.queries", "farm.inputs",
              "farm.input", "farm.db", "farm.hmm")


def data_dir() -> str:
    """The data directory: ``PAIRFLOW_DATA``, else the user data directory of pairflow."""
    root = os.environ.get("PAIRFLOW_DATA")
    if root:
        return os.path.abspath(os.path.expanduser(root))
    import platformdirs
    return platformdirs.user_data_dir("pairflow", appauthor=False)


def data_root() -> str:
    """Where the Debian data packages are unpacked (their ``usr/share/...`` tree)."""
    return os.path.join(data_dir(), "root")


def data_path(rel: str) -> str:
    """A path inside the unpacked Debian tree (``${pairflow_data:REL}``)."""
    return os.path.join(data_root(), rel.lstrip("/"))


def dataset_path(rel: str) -> str:
    """A path inside the data directory itself (``${pairflow_data_dir:REL}``: ``cameras``...)."""
    return os.path.join(data_dir(), rel.lstrip("/"))


class NoDataError(InputError):
    """A default input in the data directory matched nothing: the data are not installed."""

    def __init__(self, where: str, key: str = "data.inputs", example: str = "my/*.fa"):
        self.where, self.key, self.example = where, key, example
        ValueError.__init__(self, f"no input data in {where}: run 'pairflow data install' to "
                                  f"fetch the example data, or name inputs: pairflow "
                                  f"{key}='{example}'")
        self.file, self.problem, self.record, self.index = where, str(self), None, None

    def __reduce__(self):
        return (type(self), (self.where, self.key, self.example), self.__dict__)


def _missing_data(pattern: str, key: str) -> NoDataError | None:
    """The error for a pattern inside the data directory that matches nothing, else None."""
    home = data_dir()
    path = os.path.normpath(os.path.abspath(pattern))
    if not path.startswith(home + os.sep):
        return None
    top = path[len(home) + 1:].split(os.sep, 1)[0]
    installed = os.path.isdir(home) and any(not n.startswith(".") for n in os.listdir(home))
    where = os.path.join(home, top) if installed else home
    name = os.path.basename(path)
    example = "my/" + (("*" + name[name.index("."):]) if "." in name.lstrip("*") else "*")
    return NoDataError(where, key, example)


def check_inputs(cfg) -> None:
    """Before a run starts: a default input (a pattern under the data directory) that matches
    nothing raises ``NoDataError``; inputs the user named are left to the app to expand."""
    import glob

    from omegaconf import OmegaConf
    home = data_dir() + os.sep
    for key in INPUT_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        if isinstance(value, str):
            patterns = value.split(",")
        elif OmegaConf.is_list(value):
            patterns = [str(v) for v in value]
        else:
            continue
        for pattern in (p.strip() for p in patterns):
            if "://" in pattern or not os.path.abspath(pattern).startswith(home):
                continue
            if not glob.glob(pattern):
                raise _missing_data(pattern, key)


def expand_inputs(patterns: str | Iterable[str], key: str = "data.inputs") -> list[str]:
    """Expand globs / lists / directories into sorted URLs; an unmatched pattern is an error
    (``NoDataError`` for one inside the data directory)."""
    import fsspec
    if patterns is None:
        raise InputError("inputs", "no input given (set data.inputs, or data.queries for align)")
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    urls: list[str] = []
    for pattern in patterns:
        pattern = os.path.expanduser(str(pattern).strip())
        fs, _, paths = fsspec.get_fs_token_paths(pattern)
        proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        found = []
        for path in paths:
            if fs.isdir(path):
                found += [p for p in sorted(fs.find(path))
                          if any(p.lower().replace(".gz", "").endswith(s) for s in SEQ_SUFFIXES)]
            elif fs.exists(path):
                found.append(path)
        if not found:
            missing = _missing_data(pattern, key) if proto == "file" else None
            raise missing or InputError(pattern, "no input file matches this pattern")
        for p in sorted(found):
            urls.append(p if proto == "file" else f"{proto}://{p}")
    return urls
