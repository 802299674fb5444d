"""The journal's contract (``pairflow.engine.testing.journal.JournalTests``) for both ways a run
journals its tiles: in place (the scheduler's ``JournalWriter`` after the device actors wrote
the sinks) and shipped (workers encode, the scheduler's ``ShippedJournal`` keeps the payloads,
the driver's ``ResultWriter`` stores and journals them); then what is particular to the writer:
no journal, a resume that would compute something else, appends on disk before close."""
import json
import os
import pickle

import pytest

from pairflow.engine import leaves
from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.sinks.shipped import ResultWriter, ShippedJournal
from pairflow.engine.run.journal import (JournalWriter, check_same_work, replay,
                                         tiles_journaled)
from pairflow.engine.run.rundir import RunDir
from pairflow.engine.testing.journal import LEAF, JournalTests


class TestJournalWriter(JournalTests):
    """As the scheduler journals what the device actors wrote in place."""

    def journal_tiles(self, journal_path, sinks, tiles, fields):
        journal = JournalWriter(journal_path, fsync_s=0.01)
        for t in tiles:
            entries = []
            for s in sinks.values():
                entries += s.write_tile(t, fields(t), self.mask(t))
            journal.append(t.id, "node-0/dev-0", entries)
        journal.close()


class TestShippedToTheDriver(JournalTests):
    """Nothing shared: copies of the opened sinks encode each tile (as Ray ships them to the
    workers), the scheduler's ShippedJournal keeps the payloads, and the driver drains them
    now and then into its ResultWriter, which stores and journals them."""

    def journal_tiles(self, journal_path, sinks, tiles, fields):
        workers = pickle.loads(pickle.dumps(list(sinks.values())))
        shipped = ShippedJournal()
        run = RunDir(os.path.join(os.path.dirname(journal_path), "run")).create()
        writer = ResultWriter(run, list(sinks.values()), leaves(self.space, LEAF), journal_path,
                              fsync_s=0.01)
        for n, t in enumerate(reversed(tiles)):  # any order, drained every third tile
            shipped.append(t.id, "node-0/dev-0",
                           [(s.name, s.encode_tile(t, fields(t), self.mask(t))) for s in workers])
            if n % 3 == 2:
                writer.write({"shipped": shipped.drain()})
        writer.write({"shipped": shipped.drain()})
        shipped.close()
        writer.close()


def test_no_journal_means_everything_is_recomputed(tmp_path):
    done, report = replay(str(tmp_path / "journal.jsonl"), {}, 5)
    assert done == [] and report["recomputed"] == 5


def test_changed_inputs_are_refused_and_named():
    old = {"app": "jaccard", "k": 21, "inputs": {"a.fa": "1" * 64, "b.fa": "2" * 64}}
    check_same_work("run", old, json.loads(json.dumps(old)))  # the same work: no error
    new = {"app": "jaccard", "k": 15, "inputs": {"a.fa": "3" * 64, "c.fa": "4" * 64}}
    with pytest.raises(PairflowError) as err:
        check_same_work("run", old, new)
    msg = str(err.value)
    assert msg.startswith("cannot resume run: the run would compute something else")
    for part in ("input a.fa changed (sha256 111111111111.. -> 333333333333..)",
                 "input b.fa was removed", "input c.fa was added", "k: 21 -> 15"):
        assert part in msg


class _TickPerThread:
    """``time`` for the journal: each thread's ``perf_counter`` counts its own calls, so a
    timed call on the caller's path lasts exactly 1 "second", whatever the fsync thread does."""

    def __init__(self):
        import threading
        self.local = threading.local()

    def perf_counter(self) -> float:
        n = getattr(self.local, "n", 0)
        self.local.n = n + 1
        return float(n)


def test_appends_are_on_disk_before_close(tmp_path, monkeypatch):
    """Flushed per tile: a reader (or a resume after a kill) sees every finished tile. The
    caller's time is counted: one append and the closing fsync (one tick each)."""
    from pairflow.engine.run import journal as journal_module
    monkeypatch.setattr(journal_module, "time", _TickPerThread())
    path = str(tmp_path / "journal.jsonl")
    journal = JournalWriter(path, fsync_s=0.01)
    journal.append(7, "a", [{"sink": "dense", "location": "m", "length": 1, "crc32": 2}])
    assert os.path.getsize(path) > 0 and tiles_journaled(path) == 1
    journal.close()
    assert journal.append_seconds == 2.0
