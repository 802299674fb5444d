"""The journal: what a run has safely written, and the only thing a resume trusts.

One append-only JSON Lines file (``journal.jsonl`` in the run directory). Every finished tile adds
one line per sink entry, ``{"tile", "actor", "sink", "location"[, "region"], "length",
"crc32"}``: where the sink wrote, how many bytes, and the CRC32 of those bytes (``sink_entry``
builds the sink's part, so the format lives here only). Lines are written and flushed per tile, so
a killed process loses nothing the OS has; a background thread fsyncs at most every
``fsync_s`` while appends happen, so a machine crash loses at most that long of journal and the
hand-out path never waits for the disk.

A resume replays the journal (``replay``): the last entry per tile, sink and location counts, a
tile is done when every sink has an entry for it and each still verifies against its CRC (the
sinks read back what they wrote), and everything else is recomputed. A truncated last line (a
writer killed mid-append) is ignored. ``check_same_work`` refuses a resume that would compute
something else than the run it continues.
"""
from __future__ import annotations

import json
import os
import threading
import time
from array import array
from typing import Iterable, Mapping

import numpy as np

from ..errors import PairflowError
from .rundir import JsonlWriter, read_jsonl


def sink_entry(sink: str, location: str, length: int, crc32: int,
               region: list[int] | None = None) -> dict:
    """A sink's part of a journal line: ``region`` ([r0, r1, c0, c1]) for sinks that write
    into a shared array, none for sinks that write a file per tile."""
    entry = {"sink": sink, "location": location}
    if region is not None:
        entry["region"] = list(region)
    entry.update(length=int(length), crc32=int(crc32) & 0xFFFFFFFF)
    return entry


class JournalWriter:
    """Appends tiles' entries, flushed per tile, fsynced in the background."""

    def __init__(self, path: str, fsync_s: float = 1.0):
        self.out = JsonlWriter(path)
        self.fsync_s = fsync_s
        self.append_seconds = 0.0  # on the caller's path: what the journal adds to a run
        self.fsync_seconds = 0.0   # in the background thread
        self._dirty = threading.Event()  # appended since the last fsync
        self._closing = threading.Event()
        self._fsyncer = threading.Thread(target=self._fsync_loop, daemon=True,
                                         name="journal-fsync")
        self._fsyncer.start()

    def append(self, tile: int, actor: str, entries: Iterable[dict]) -> None:
        t0 = time.perf_counter()
        self.out.write([{"tile": tile, "actor": actor, **e} for e in entries])
        self._dirty.set()
        self.append_seconds += time.perf_counter() - t0

    def _fsync_loop(self) -> None:
        # an fsync can wait for the disk, and on ext4 for other files' data: never on the
        # hand-out path
        while not self._closing.wait(self.fsync_s):
            if self._dirty.is_set():
                self._dirty.clear()
                t0 = time.perf_counter()
                try:
                    os.fsync(self.out.fh.fileno())
                except (OSError, ValueError):  # closed under us at the end of the run
                    return
                self.fsync_seconds += time.perf_counter() - t0

    def close(self) -> None:
        """Stop the background thread, fsync what is left and close the file."""
        self._closing.set()
        self._fsyncer.join()
        t0 = time.perf_counter()
        os.fsync(self.out.fh.fileno())
        self.out.close()
        self.append_seconds += time.perf_counter() - t0


def read_entries(path: str) -> list[dict]:
    """Every complete line of a journal (a partial last line is ignored)."""
    return read_jsonl(path)


def _lines(path: str):
    """(line number, parsed entry) of every complete line that parses, streamed: a journal of
    10^6 tiles is never a list of dicts (read_entries')."""
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        for no, line in enumerate(fh):
            if not line.endswith(b"\n"):
                break
            try:
                e = json.loads(line.decode())
            except ValueError:
                continue
            if isinstance(e, dict) and "tile" in e and "sink" in e:
                yield no, e


class JournalIndex:
    """The journal as arrays, one row per complete line: its tile, its (sink, location) key
    and its line number; ``last`` keeps the rows a resume trusts (the last per tile, sink and
    location). What replay needs at 10^6 tiles in a few tens of MiB, not a dict per line."""

    def __init__(self, path: str):
        self.path = path
        keys: dict[tuple, int] = {}
        tile, key, line = array("q"), array("q"), array("q")
        for no, e in _lines(path):
            k = (e["sink"], e.get("location"))
            tile.append(int(e["tile"]))
            key.append(keys.setdefault(k, len(keys)))
            line.append(no)
        self.keys = list(keys)  # key id -> (sink, location)
        self.tile = np.frombuffer(tile, dtype=np.int64) if len(tile) else np.zeros(0, np.int64)
        self.key = np.frombuffer(key, dtype=np.int64) if len(key) else np.zeros(0, np.int64)
        self.line = np.frombuffer(line, dtype=np.int64) if len(line) else np.zeros(0, np.int64)

    def tiles(self) -> np.ndarray:
        """Every tile the journal names, ascending, once."""
        return np.unique(self.tile)

    def last(self) -> np.ndarray:
        """Row indices of the last entry per (tile, key), sorted by tile then key."""
        if not len(self.tile):
            return np.zeros(0, np.int64)
        order = np.lexsort((self.line, self.key, self.tile))
        t, k = self.tile[order], self.key[order]
        end = np.ones(len(order), bool)
        end[:-1] = (t[1:] != t[:-1]) | (k[1:] != k[:-1])
        return order[end]


def tiles_journaled(path: str) -> int:
    return len(JournalIndex(path).tiles())


def replay(path: str, sinks: Mapping[str, object], n_tiles: int) -> tuple[list[int], dict]:
    """Tiles whose every sink entry still verifies (CRC), and a report of what a resume does.

    ``sinks``: name -> an object with ``verify(entry) -> bool`` (the run's open sinks). The last
    entry per tile, sink and location counts: a tile written again after a repair supersedes
    its first write. Streams the journal twice (``JournalIndex``, then the lines it keeps), so
    its memory is a few arrays whatever the number of tiles."""
    index = JournalIndex(path)
    rows = index.last()
    tiles, keys = index.tile[rows], index.key[rows]
    starts = np.flatnonzero(np.r_[True, tiles[1:] != tiles[:-1]]) if len(rows) else \
        np.zeros(0, np.int64)
    # a tile is complete when every sink of the run has an entry for it
    complete = np.ones(len(starts), bool)
    for name in sinks:
        has = np.isin(keys, [i for i, k in enumerate(index.keys) if k[0] == name])
        complete &= np.maximum.reduceat(has, starts) if len(rows) else complete
    ok = np.repeat(complete, np.diff(np.r_[starts, len(rows)]))  # rows worth verifying
    row_of_line = np.full(int(index.line.max()) + 1 if len(rows) else 0, -1, dtype=np.int64)
    row_of_line[index.line[rows]] = np.arange(len(rows))
    for no, e in _lines(path):  # the kept lines again, parsed one at a time
        i = row_of_line[no] if no < len(row_of_line) else -1
        if i < 0 or not ok[i] or e["sink"] not in sinks:
            continue
        if not sinks[e["sink"]].verify(e):
            ok[i] = False
    done: list[int] = []
    corrupt: list[int] = []
    if len(rows):  # a tile is done when it is complete and all its kept entries verify
        tile_ok = np.minimum.reduceat(ok, starts) & complete
        done, corrupt = tiles[starts][tile_ok].tolist(), tiles[starts][~tile_ok].tolist()
    report = {"reused": len(done), "repaired": len(corrupt),
              "recomputed": n_tiles - len(done) - len(corrupt), "corrupt_tiles": corrupt}
    return done, report


def check_same_work(run_dir: str, old: dict, new: dict) -> None:
    """Refuse to resume when anything that decides the results differs; say what.

    ``old``/``new``: the fingerprints of the journaled run and of the run asked for
    (``BasePairApp.fingerprint``); ``"inputs"`` maps each input to its sha256."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and key == "inputs":
            for u in sorted(set(a) | set(b)):
                if u not in a:
                    diffs.append(f"input {u} was added")
                elif u not in b:
                    diffs.append(f"input {u} was removed")
                elif a[u] != b[u]:
                    diffs.append(f"input {u} changed (sha256 {a[u][:12]}.. -> {b[u][:12]}..)")
        else:
            diffs.append(f"{key}: {a!r} -> {b!r}")
    if diffs:
        raise PairflowError(f"cannot resume {run_dir}: the run would compute something else: "
                            + "; ".join(diffs))
