"""Where the bundled real data lives, and how input patterns become file lists.

``scripts/setup.sh`` unpacks Debian data packages into ``.data/root`` (override with
``PAIRFLOW_DATA``). Patterns may be globs, comma-separated lists, directories or fsspec URLs.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

REPO = Path(__file__).resolve().parent.parent

SEQ_SUFFIXES = (".fasta", ".fa", ".fna", ".ffn", ".faa", ".fas", ".fastq", ".fq",
                ".gbk", ".gb", ".genbank")


def data_root() -> str:
    root = os.environ.get("PAIRFLOW_DATA")
    return os.path.join(root, "root") if root else str(REPO / ".data" / "root")


def data_path(rel: str) -> str:
    return os.path.join(data_root(), rel.lstrip("/"))


def expand_inputs(patterns: str | Iterable[str]) -> list[str]:
    """Expand globs / lists / directories into sorted URLs; an unmatched pattern is an error."""
    import fsspec
    from pairflow.engine import InputError
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
            raise InputError(pattern, "no input file matches this pattern")
        for p in sorted(found):
            urls.append(p if proto == "file" else f"{proto}://{p}")
    return urls
