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

import os
import threading
import time
from typing import Iterable, Mapping

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


def tiles_journaled(path: str) -> int:
    return len({e["tile"] for e in read_entries(path)})


def replay(path: str, sinks: Mapping[str, object], n_tiles: int) -> tuple[list[int], dict]:
    """Tiles whose every sink entry still verifies (CRC), and a report of what a resume does.

    ``sinks``: name -> an object with ``verify(entry) -> bool`` (the run's open sinks). The last
    entry per tile, sink and location counts: a tile written again after a repair supersedes
    its first write."""
    last: dict[tuple, dict] = {}
    for e in read_entries(path):
        last[(e["tile"], e["sink"], e.get("location"))] = e
    by_tile: dict[int, list] = {}
    for (t, _, _), e in last.items():
        by_tile.setdefault(t, []).append(e)
    done, corrupt = [], []
    for t, entries in sorted(by_tile.items()):
        names = {e["sink"] for e in entries}
        ok = names >= set(sinks) and all(sinks[e["sink"]].verify(e)
                                         for e in entries if e["sink"] in sinks)
        (done if ok else corrupt).append(t)
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
