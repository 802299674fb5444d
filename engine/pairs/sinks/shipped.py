"""Results of a run where nothing is shared, on their way from the workers to the driver.

With ``shared_fs=False`` a device actor does not write its tile: it encodes it
(``Sink.encode_tile``) and hands the payloads to the scheduler, whose ``ShippedJournal`` keeps
them (in place of the journal) until the driver's next watch call drains them; the driver's
``ResultWriter`` stores each tile through its sinks (``Sink.store_tile``) and only then journals
it, and appends the JSON Lines the coordinator's metrics left in their ``Outbox``. A tile
drained but not yet journaled when the driver dies is recomputed by a resume, as any tile the
journal does not show.
"""
from __future__ import annotations

import time

from ...errors import PairflowError
from ...run.journal import JournalWriter
from ...run.rundir import JsonlWriter
from .base import Sink


class ShippedJournal:
    """The scheduler's journal where the run directory is out of reach: each tile's encoded
    sink payloads wait here until the driver drains them (``ResultWriter`` writes the sinks and
    the real journal). Same interface as ``JournalWriter``."""

    append_seconds = 0.0
    fsync_seconds = 0.0

    def __init__(self):
        self.pending: list = []

    def append(self, tile: int, actor: str, entries) -> None:
        self.pending.append((tile, actor, entries))

    def drain(self) -> list:
        out, self.pending = self.pending, []
        return out

    def close(self) -> None:
        return None


class ResultWriter:
    """In the driver: writes what workers shipped (tiles' sink payloads, JSON Lines records)
    into the run directory, journaling each tile after its sinks wrote it."""

    def __init__(self, run_dir, sinks: list, tiles: list, journal_path: str | None,
                 fsync_s: float = 1.0):
        self.run_dir, self.tiles = run_dir, tiles
        self.sinks = {s.name: s for s in sinks}
        self.journal = JournalWriter(journal_path, fsync_s) if journal_path else None
        self.files: dict[str, JsonlWriter] = {}
        self.write_seconds = 0.0
        self.tiles_written = 0
        self.payload_bytes = 0

    def write(self, drained: dict | None) -> None:
        if not drained:
            return
        t0 = time.perf_counter()
        for name, records in (drained.get("files") or {}).items():
            if name not in self.files:
                self.files[name] = JsonlWriter(self.run_dir.file(name))
            self.files[name].write(records)
        for t, actor, shipped in drained.get("shipped") or ():
            tile, entries = self.tiles[t], []
            for sink_name, payload in shipped:
                entries.extend(self.sinks[sink_name].store_tile(tile, payload))
                self.payload_bytes += _nbytes(payload)
            if self.journal is not None:
                self.journal.append(t, actor, entries)
            self.tiles_written += 1
        self.write_seconds += time.perf_counter() - t0

    def close(self) -> dict:
        for w in self.files.values():
            w.close()
        if self.journal is not None:
            self.journal.close()
        return {"journal_s": self.write_seconds + (self.journal.append_seconds
                                                    if self.journal else 0.0),
                "journal_fsync_s": self.journal.fsync_seconds if self.journal else 0.0}


def _nbytes(payload) -> int:
    if isinstance(payload, (bytes, bytearray)):
        return len(payload)
    if isinstance(payload, dict):
        return sum(_nbytes(v) for v in payload.values())
    if isinstance(payload, (list, tuple)):
        return sum(_nbytes(v) for v in payload)
    return int(getattr(payload, "nbytes", 0))


def check_sinks(sinks) -> None:
    """Every sink must encode a tile apart from storing it when nothing is shared."""
    for sink in sinks:
        if type(sink).encode_tile is Sink.encode_tile:
            raise PairflowError(
                f"sink {sink.name!r} ({type(sink).__name__}) only defines write_tile, which "
                "writes where the tile is computed; with shared_fs=False workers cannot reach "
                "the run directory: define encode_tile and store_tile, or run with "
                "shared_fs=true")
