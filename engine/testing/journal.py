"""The journal's contract as a base class, for each way a run's journal gets written: what
``replay`` (``pairflow.engine.run.journal``) trusts is exactly what still reads back with the
journaled CRC32, with real sinks writing real files.

A truncated last line is ignored, a CRC mismatch sends the tile back, a tile finished twice
counts once and its last entry wins, a tile missing one sink's entry is not done. Each line
names tile, actor, sink and location first and ends with the length and the CRC32 of the bytes
(checked here with ``zlib.crc32`` of the file a per-tile sink wrote).

A subclass gives ``journal_tiles(journal_path, sinks, tiles, fields)``: write each tile of
``tiles`` through the opened ``sinks`` (name -> sink) and journal it at ``journal_path`` the way
its implementation does (in place as the scheduler does, or shipped to the driver).
``fields(tile)`` gives a tile's result fields and ``mask(tile)`` its pairs.
"""
from __future__ import annotations

import json
import zlib

import numpy as np

from pairflow.engine import DenseMatrix, Threshold, Triangle, leaves
from pairflow.engine.pairs.sinks import SinkContext
from pairflow.engine.run.journal import read_entries, replay, tiles_journaled

__all__ = ["JournalTests"]

N, LEAF = 9, 3


class JournalTests:
    """Subclass and give ``journal_tiles``; see the module's docstring."""

    space = Triangle(N)

    def journal_tiles(self, journal_path: str, sinks: dict, tiles: list, fields) -> None:
        raise NotImplementedError("a subclass writes and journals the tiles")

    def mask(self, tile):
        return self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)

    def open_sinks(self, out_dir, resume=False) -> dict:
        """A sink writing into a shared array and one writing a file per tile."""
        keys = [f"k{i}" for i in range(N)]
        ctx = SinkContext(str(out_dir), self.space, LEAF, keys, keys, {"value": "float64"})
        sinks = [DenseMatrix(), Threshold(0.5)]
        for s in sinks:
            s.open(ctx, resume=resume)
        return {s.name: s for s in sinks}

    def write_run(self, tmp_path, tiles=None):
        """Every tile (or those numbered in ``tiles``) through both sinks, journaled."""
        values = np.random.default_rng(0).random((N, N))
        sinks = self.open_sinks(tmp_path / "result")
        path = str(tmp_path / "journal.jsonl")
        all_tiles = leaves(self.space, LEAF)
        chosen = all_tiles if tiles is None else [all_tiles[i] for i in tiles]
        self.journal_tiles(path, sinks, chosen,
                           lambda t: {"value": values[t.r0:t.r1, t.c0:t.c1]})
        return path, sinks, len(all_tiles)

    def resumed(self, tmp_path):
        return self.open_sinks(tmp_path / "result", resume=True)

    def test_lines_name_tile_actor_sink_location_length_and_crc_of_the_bytes(self, tmp_path):
        path, sinks, n_tiles = self.write_run(tmp_path)
        lines = [json.loads(line) for line in open(path)]
        assert len(lines) == 2 * n_tiles  # one dense field and one threshold part per tile
        assert sorted({e["tile"] for e in lines}) == list(range(n_tiles))
        for e in lines:
            assert list(e)[:4] == ["tile", "actor", "sink", "location"]
            assert list(e)[-2:] == ["length", "crc32"]
            if e["sink"] == "threshold":  # a file per tile: the CRC is of its bytes
                raw = open(tmp_path / "result" / e["location"], "rb").read()
                assert (e["length"], e["crc32"]) == (len(raw), zlib.crc32(raw))
            else:  # the dense region, and its mirror below the diagonal
                assert e["region"][0] <= e["region"][2]
        assert tiles_journaled(path) == n_tiles

    def test_everything_verifies_and_is_reused(self, tmp_path):
        path, _, n_tiles = self.write_run(tmp_path)
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert done == list(range(n_tiles))
        assert report == {"reused": n_tiles, "repaired": 0, "recomputed": 0, "corrupt_tiles": []}

    def test_a_truncated_last_line_is_ignored(self, tmp_path):
        path, _, n_tiles = self.write_run(tmp_path, tiles=[0, 1, 2])
        with open(path, "a") as fh:  # a writer killed mid-append
            fh.write('{"tile": 3, "actor": "node-0/dev-0", "sink": "dense", "locat')
        assert tiles_journaled(path) == 3
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert done == [0, 1, 2] and report["recomputed"] == n_tiles - 3

    def test_a_crc_mismatch_sends_the_tile_back(self, tmp_path):
        path, _, n_tiles = self.write_run(tmp_path)
        part = next(e for e in read_entries(path) if e["sink"] == "threshold" and e["tile"] == 4)
        file = tmp_path / "result" / part["location"]
        raw = bytearray(file.read_bytes())
        raw[-1] ^= 0xFF  # one flipped byte in the data
        file.write_bytes(bytes(raw))
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert 4 not in done and len(done) == n_tiles - 1
        assert report["repaired"] == 1 and report["corrupt_tiles"] == [4]

    def test_a_tile_finished_twice_counts_once_and_its_last_entry_wins(self, tmp_path):
        path, _, n_tiles = self.write_run(tmp_path)
        entries = [e for e in read_entries(path) if e["tile"] == 2]
        stale = [{**e, "crc32": (e["crc32"] + 1) & 0xFFFFFFFF} for e in entries]
        with open(path, "a") as fh:  # the same tile again, journaled with a wrong CRC
            fh.writelines(json.dumps(e) + "\n" for e in stale)
        assert tiles_journaled(path) == n_tiles
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert 2 not in done and report["corrupt_tiles"] == [2]
        with open(path, "a") as fh:  # and again, right: the last entry is the truth
            fh.writelines(json.dumps(e) + "\n" for e in entries)
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert done == list(range(n_tiles)) and report["repaired"] == 0

    def test_a_tile_missing_a_sink_is_not_done(self, tmp_path):
        path, _, n_tiles = self.write_run(tmp_path)
        kept = [e for e in read_entries(path) if not (e["tile"] == 0 and e["sink"] == "dense")]
        with open(path, "w") as fh:
            fh.writelines(json.dumps(e) + "\n" for e in kept)
        done, report = replay(path, self.resumed(tmp_path), n_tiles)
        assert 0 not in done and report["corrupt_tiles"] == [0]
