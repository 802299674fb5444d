"""Apps whose every parse call is written to a file (one line per call, appended by whichever
process or thread parsed): the count a test checks the L4 store against, kept apart from the
engine's own counters. Importable by Ray workers (``tests.parse_count``)."""
from __future__ import annotations

import os

import numpy as np

from pairflow.apps.align import AlignApp
from pairflow.apps.jaccard import JaccardApp
from pairflow.engine.pairs.app import BasePairApp


def _record(path: str, key: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (key + "\n").encode())  # one write under O_APPEND: lines never interleave
    finally:
        os.close(fd)


def parsed(path: str, reset: bool = True) -> list[str]:
    """The keys parsed since the last reset, one entry per parse call."""
    try:
        with open(path) as fh:
            keys = fh.read().split()
    except FileNotFoundError:
        keys = []
    if reset and os.path.exists(path):
        os.remove(path)
    return keys


class _Counted:
    """An app mixin: every parse appends its key to ``count_path``."""

    def __init__(self, *args, count_path: str, **kw):
        super().__init__(*args, **kw)
        self.count_path = count_path

    def parse(self, key, raw):
        _record(self.count_path, key)
        return super().parse(key, raw)


class CountedJaccard(_Counted, JaccardApp):
    pass


class CountedAlign(_Counted, AlignApp):
    pass


class CountedBytes(BasePairApp):
    """Items are files of bytes (one per key, read through ``url``); a pair's value is the dot
    product of the two byte vectors (exact in int64, so any run's result can be checked against
    a brute force). Every parse is a load from storage: counted in ``count_path``."""

    name = "bytes"

    def __init__(self, paths: list[str], count_path: str):
        self.paths = {os.path.basename(p).split(".")[0]: p for p in paths}
        self.count_path = count_path

    def keys(self):
        return list(self.paths)

    def url(self, key):
        return self.paths[key]

    def parse(self, key, raw):
        _record(self.count_path, key)
        return np.frombuffer(raw, np.uint8).astype(np.int64)

    def compare(self, left, right, mask, device):
        out = np.stack(left) @ np.stack(right).T
        return {"dot": np.where(mask, out, 0)}

    def fields(self):
        return {"dot": "int64"}
