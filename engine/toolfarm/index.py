"""The farm's index of written blocks, kept in the run's journal (``engine/run/journal.py``).

One journal line per unit and stream: ``{"tile": unit, "actor", "sink": stream, "location":
the node file, "length", "crc32", "offset": where in the file, "record": the unit's first input
record}``; the journal's own format with the block's offset and its place in input order added.
The last line per unit and stream counts: a unit written again (after a corrupted block or a
lost writer) supersedes its first write, wherever that went.

A unit is safely on disk when each of its streams has a line whose bytes still match the CRC:
``replay`` checks every one, and ``gather`` again while it copies.
"""
from __future__ import annotations

import os
import zlib

from ..run.journal import JournalWriter, read_entries, sink_entry
from .writer import PARTIAL


def journal_blocks(journal: JournalWriter, entries: list[dict], actor: str) -> None:
    """Writer index entries (``writer.BlockWriter.drain``) into the journal, a unit per call."""
    by_unit: dict[int, list[dict]] = {}
    for e in entries:
        line = sink_entry(e["stream"], e["location"], e["length"], e["crc32"])
        line.update(offset=int(e["offset"]), record=int(e["record"]))
        by_unit.setdefault(int(e["unit"]), []).append(line)
    for unit, lines in sorted(by_unit.items()):
        journal.append(unit, actor, lines)


class UnitLedger:
    """Which units are safely on disk, for a farm's driver (in-process or on Ray): a unit is
    once the journal holds a block of each of its streams (its writers drain them apart)."""

    def __init__(self, journal: JournalWriter, streams: int, done):
        self.journal, self.streams = journal, streams
        self.on_disk = set(done)
        self._partial: dict[int, set] = {}  # unit -> its streams journaled so far

    def journal_entries(self, entries: list[dict], actor: str) -> None:
        journal_blocks(self.journal, entries, actor)
        for e in entries:
            self._partial.setdefault(int(e["unit"]), set()).add(e["stream"])
        for unit, got in list(self._partial.items()):
            if len(got) == self.streams:
                self.on_disk.add(unit)
                del self._partial[unit]

    def metrics_row(self, t_run: float, n_total: int, reused: int, queue, workers: dict,
                    final: bool = False) -> dict:
        """One line of the farm's metrics.jsonl."""
        import time
        return {"t": time.time(), "elapsed": time.time() - t_run,
                "units_done": len(self.on_disk), "units_total": n_total,
                "units_reused": reused, "units_failed": len(queue.failures),
                "retries": queue.retried,
                "in_flight": sum(len(h) for h in queue.held.values()),
                "workers": workers, "final": final}


def stream_path(result_dir: str, stream: str, location: str) -> str:
    """A block's file: its final name, or ``.partial`` while (or if) the run has not finished."""
    path = os.path.join(result_dir, stream, location)
    return path if os.path.exists(path) else path + PARTIAL


def read_block(result_dir: str, entry: dict) -> bytes | None:
    """A journaled block's bytes if they still match its CRC, else None."""
    try:
        with open(stream_path(result_dir, entry["sink"], entry["location"]), "rb") as fh:
            fh.seek(int(entry["offset"]))
            data = fh.read(int(entry["length"]))
    except OSError:
        return None
    if len(data) != int(entry["length"]) or (zlib.crc32(data) & 0xFFFFFFFF) != int(entry["crc32"]):
        return None
    return data


def last_blocks(journal_path: str) -> dict[tuple[int, str], dict]:
    """(unit, stream) -> its last journal line."""
    last: dict[tuple[int, str], dict] = {}
    for e in read_entries(journal_path):
        if "offset" in e:
            last[(int(e["tile"]), e["sink"])] = e
    return last


def replay(journal_path: str, result_dir: str, streams: list[str],
           n_units: int) -> tuple[set[int], dict]:
    """Units safely on disk (every stream journaled and its CRC verified), and a report:
    how many are reused, which were journaled but fail their CRC (rerun), how many are new."""
    last = last_blocks(journal_path)
    units = {u for u, _ in last}
    done, corrupt = set(), []
    for u in sorted(units):
        entries = [last.get((u, s)) for s in streams]
        if all(e is not None for e in entries) and \
                all(read_block(result_dir, e) is not None for e in entries):
            done.add(u)
        else:
            corrupt.append(u)
    return done, {"reused": len(done), "corrupt_units": corrupt,
                  "rerun": n_units - len(done)}
