"""The journal's contract (engine/run/journal.py), with real sinks writing real files: what
``replay`` trusts is exactly what still reads back with the journaled CRC32. A truncated last
line is ignored, a CRC mismatch sends the tile back, a tile finished twice counts once and its
last entry wins, and a resume that would compute something else is refused."""
import json
import os
import zlib

import numpy as np
import pytest

from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.sinks import DenseMatrix, SinkContext, Threshold
from pairflow.engine.pairs.space import Triangle, leaves
from pairflow.engine.run.journal import (JournalWriter, check_same_work, read_entries, replay,
                                tiles_journaled)

N, LEAF = 9, 3


def open_sinks(out_dir, resume=False):
    space = Triangle(N)
    keys = [f"k{i}" for i in range(N)]
    ctx = SinkContext(str(out_dir), space, LEAF, keys, keys, {"value": "float64"})
    sinks = [DenseMatrix(), Threshold(0.5)]
    for s in sinks:
        s.open(ctx, resume=resume)
    return {s.name: s for s in sinks}


def write_run(tmp_path, tiles=None):
    """Every tile (or ``tiles``) through both sinks, journaled as the scheduler does."""
    space = Triangle(N)
    values = np.random.default_rng(0).random((N, N))
    sinks = open_sinks(tmp_path / "result")
    path = str(tmp_path / "journal.jsonl")
    journal = JournalWriter(path, fsync_s=0.01)
    all_tiles = leaves(space, LEAF)
    for t in all_tiles if tiles is None else [all_tiles[i] for i in tiles]:
        mask = space.mask(t.r0, t.r1, t.c0, t.c1)
        entries = []
        for s in sinks.values():
            entries += s.write_tile(t, {"value": values[t.r0:t.r1, t.c0:t.c1]}, mask)
        journal.append(t.id, "node-0/dev-0", entries)
    journal.close()
    return path, sinks, len(all_tiles)


def test_lines_name_tile_actor_sink_location_length_and_crc_of_the_bytes(tmp_path):
    path, sinks, n_tiles = write_run(tmp_path)
    lines = [json.loads(line) for line in open(path)]
    assert len(lines) == 2 * n_tiles  # one dense field and one threshold part per tile
    for e in lines:
        assert list(e)[:4] == ["tile", "actor", "sink", "location"]
        assert list(e)[-2:] == ["length", "crc32"]
        if e["sink"] == "threshold":  # a file per tile: the CRC is of its bytes
            raw = open(tmp_path / "result" / e["location"], "rb").read()
            assert (e["length"], e["crc32"]) == (len(raw), zlib.crc32(raw))
        else:  # the dense region, and its mirror below the diagonal
            assert e["region"][0] <= e["region"][2]
    assert tiles_journaled(path) == n_tiles


def test_everything_verifies_and_is_reused(tmp_path):
    path, _, n_tiles = write_run(tmp_path)
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert done == list(range(n_tiles))
    assert report == {"reused": n_tiles, "repaired": 0, "recomputed": 0, "corrupt_tiles": []}


def test_a_truncated_last_line_is_ignored(tmp_path):
    path, _, n_tiles = write_run(tmp_path, tiles=[0, 1, 2])
    with open(path, "a") as fh:  # a writer killed mid-append
        fh.write('{"tile": 3, "actor": "node-0/dev-0", "sink": "dense", "locat')
    assert tiles_journaled(path) == 3
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert done == [0, 1, 2] and report["recomputed"] == n_tiles - 3


def test_a_crc_mismatch_sends_the_tile_back(tmp_path):
    path, _, n_tiles = write_run(tmp_path)
    part = next(e for e in read_entries(path) if e["sink"] == "threshold" and e["tile"] == 4)
    file = tmp_path / "result" / part["location"]
    raw = bytearray(file.read_bytes())
    raw[-1] ^= 0xFF  # one flipped byte in the data
    file.write_bytes(bytes(raw))
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert 4 not in done and len(done) == n_tiles - 1
    assert report["repaired"] == 1 and report["corrupt_tiles"] == [4]


def test_a_tile_finished_twice_counts_once_and_its_last_entry_wins(tmp_path):
    path, _, n_tiles = write_run(tmp_path)
    entries = [e for e in read_entries(path) if e["tile"] == 2]
    stale = [{**e, "crc32": (e["crc32"] + 1) & 0xFFFFFFFF} for e in entries]
    with open(path, "a") as fh:  # the same tile again, journaled with a wrong CRC
        fh.writelines(json.dumps(e) + "\n" for e in stale)
    assert tiles_journaled(path) == n_tiles
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert 2 not in done and report["corrupt_tiles"] == [2]
    with open(path, "a") as fh:  # and again, right: the last entry is the truth
        fh.writelines(json.dumps(e) + "\n" for e in entries)
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert done == list(range(n_tiles)) and report["repaired"] == 0


def test_a_tile_missing_a_sink_is_not_done(tmp_path):
    path, _, n_tiles = write_run(tmp_path)
    kept = [e for e in read_entries(path) if not (e["tile"] == 0 and e["sink"] == "dense")]
    with open(path, "w") as fh:
        fh.writelines(json.dumps(e) + "\n" for e in kept)
    done, report = replay(path, open_sinks(tmp_path / "result", resume=True), n_tiles)
    assert 0 not in done and report["corrupt_tiles"] == [0]


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
