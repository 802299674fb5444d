"""Apps whose every parse call is written to a file (one line per call, appended by whichever
process or thread parsed): the count a test checks the L4 store against, kept apart from the
engine's own counters. Importable by Ray workers (``tests.parse_count``)."""
from __future__ import annotations

import os

from apps.align import AlignApp
from apps.jaccard import JaccardApp


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


class CountedJaccard(JaccardApp):
    def __init__(self, *args, count_path: str, **kw):
        super().__init__(*args, **kw)
        self.count_path = count_path

    def parse(self, key, raw):
        _record(self.count_path, key)
        return super().parse(key, raw)


class CountedAlign(AlignApp):
    def __init__(self, *args, count_path: str, **kw):
        super().__init__(*args, **kw)
        self.count_path = count_path

    def parse(self, key, raw):
        _record(self.count_path, key)
        return super().parse(key, raw)
