"""A tool farm's output contract as base classes: the block writer (one stream's file on one node,
``pairflow.engine.toolfarm.writer``) and the index of its blocks kept in the run's journal
(``pairflow.engine.toolfarm.index``). A resume trusts the index alone, so:

``BlockWriterTests``: every appended block is handed out by ``drain``/``close`` exactly once, as
an entry (unit, record, stream, location, offset, length, crc32) whose bytes in the file are the
block's and whose CRC32 is theirs; the blocks tile the file (no block written twice, no gap, no
byte past the last block); a drained entry's bytes are in the file already; buffers are flushed
on size and on age, not only at close; the file carries ``partial_suffix`` until ``finalize``.
Blocks may be appended from many threads.

``FarmIndexTests``: a unit is done when each stream's last journaled block reads back with its
CRC; a unit missing a stream, a flipped byte, a block past a lost tail are not done (that unit
only); a later write of a unit supersedes the first wherever either went; ``read_block`` gives
a block's bytes while the file is partial and once it is final.

The oracle is the bytes appended, found in the files by search (never through the index). A
subclass sets ``writer_cls``, ``partial_suffix`` and ``finalize`` (and, for the index,
``journal_cls``, ``journal_blocks``, ``replay`` and ``read_block``) as the implementation's.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
import zlib

import pytest

__all__ = ["BlockWriterTests", "FarmIndexTests"]

FIELDS = {"unit", "record", "stream", "location", "offset", "length", "crc32"}


def _blocks(rng: random.Random, n: int, stream: str = "stdout",
            empty: bool = True) -> list[tuple[int, int, bytes]]:
    """(unit, record, bytes) in a random order; every block's bytes unique, some ``empty``."""
    units = list(range(n))
    rng.shuffle(units)
    out = []
    for u in units:
        body = f"<{stream} unit {u} {rng.getrandbits(64):016x}>".encode()
        out.append((u, 10 * u + 3, b"" if empty and u % 7 == 3 else body * rng.randint(1, 40)))
    return out


def _wait_for(drain, count: int, seconds: float = 10.0) -> list[dict]:
    got, deadline = [], time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        got += drain()
        time.sleep(0.01)
    return got


class _Writing:
    """What both suites need of a writer: its class, its file's name until the run's end, and
    that end."""

    writer_cls: type
    partial_suffix: str

    def finalize(self, path: str) -> None:
        raise NotImplementedError("a subclass gives the run's end for a writer's file")

    def open_writer(self, path, stream="stdout", flush_bytes=4 << 20, flush_s=1.0):
        return self.writer_cls(str(path), stream, flush_bytes=flush_bytes, flush_s=flush_s)


class BlockWriterTests(_Writing):
    """Subclass, set ``writer_cls``, ``partial_suffix`` and ``finalize``; see the module."""

    def check_index(self, entries, blocks, raw, stream="stdout", location="n0"):
        """Each block once, its bytes and CRC; the blocks tile ``raw`` exactly."""
        want = {u: (r, d) for u, r, d in blocks}
        assert sorted(e["unit"] for e in entries) == sorted(want), "a block lost or repeated"
        for e in entries:
            assert FIELDS <= set(e), e
            record, data = want[e["unit"]]
            assert (e["record"], e["stream"], e["location"]) == (record, stream, location)
            assert e["length"] == len(data) and e["crc32"] == zlib.crc32(data)
            assert raw[e["offset"]:e["offset"] + e["length"]] == data, e["unit"]
        end = 0
        for e in sorted(entries, key=lambda e: (e["offset"], e["length"])):
            assert e["offset"] == end, "blocks overlap or leave a gap"
            end += e["length"]
        assert end == len(raw), "bytes beyond the last block"

    @pytest.mark.parametrize("flush_bytes", [64, 1 << 20])
    @pytest.mark.parametrize("seed", range(3))
    def test_every_block_is_indexed_once_and_reads_back(self, tmp_path, seed, flush_bytes):
        rng = random.Random(seed)
        blocks = _blocks(rng, 60)
        path = tmp_path / "stdout" / "n0"
        w = self.open_writer(path, flush_bytes=flush_bytes, flush_s=0.02)
        entries = []
        for unit, record, data in blocks:
            w.append(unit, record, data)
            if rng.random() < 0.2:
                entries += w.drain()
        entries += w.close()
        partial = str(path) + self.partial_suffix
        assert not path.exists() and os.path.exists(partial)
        raw = open(partial, "rb").read()
        self.check_index(entries, blocks, raw)
        self.finalize(str(path))
        assert path.read_bytes() == raw and not os.path.exists(partial)

    def test_blocks_from_many_threads_each_land_once(self, tmp_path):
        rng = random.Random(11)
        blocks = _blocks(rng, 200)
        w = self.open_writer(tmp_path / "stdout" / "n0", flush_bytes=512, flush_s=0.01)
        drained, lock = [], threading.Lock()

        def worker(share):
            for unit, record, data in share:
                w.append(unit, record, data)
                with lock:
                    drained.extend(w.drain())
        threads = [threading.Thread(target=worker, args=(blocks[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        drained += w.close()
        raw = open(str(tmp_path / "stdout" / "n0") + self.partial_suffix, "rb").read()
        self.check_index(drained, blocks, raw)

    def test_a_drained_entry_names_bytes_already_in_the_file(self, tmp_path):
        path = tmp_path / "tblout" / "n0"
        w = self.open_writer(path, stream="tblout", flush_bytes=1 << 20, flush_s=0.05)
        try:
            w.append(4, 43, b"a block flushed on age\n")
            (entry,) = _wait_for(w.drain, 1)  # not on size: the buffer is far from full
            with open(str(path) + self.partial_suffix, "rb") as fh:
                fh.seek(entry["offset"])
                assert fh.read(entry["length"]) == b"a block flushed on age\n"
            assert entry["stream"] == "tblout" and not path.exists()
        finally:
            assert w.close() == []

    def test_buffers_are_flushed_on_size_before_close(self, tmp_path):
        w = self.open_writer(tmp_path / "stdout" / "n0", flush_bytes=64, flush_s=3600)
        try:
            for u in range(8):
                w.append(u, u, bytes([65 + u]) * 40)
            got = _wait_for(w.drain, 4)
            assert len(got) >= 4, "nothing written although the buffers were full"
        finally:
            w.close()

    def test_a_writer_given_nothing_leaves_an_empty_file(self, tmp_path):
        path = tmp_path / "stdout" / "n0"
        w = self.open_writer(path, flush_s=0.01)
        assert w.drain() == [] and w.close() == []
        self.finalize(str(path))
        assert path.read_bytes() == b""
        self.finalize(str(path))  # again (a resumed run's end): nothing moves
        assert path.read_bytes() == b""


class FarmIndexTests(_Writing):
    """Subclass, set the writer's parts as for ``BlockWriterTests`` and the index's (see the
    module)."""

    journal_cls: type
    streams = ["stdout", "tblout"]

    def journal_blocks(self, journal, entries, actor):
        raise NotImplementedError

    def replay(self, journal_path, result_dir, streams, n_units):
        raise NotImplementedError

    def read_block(self, result_dir, entry):
        raise NotImplementedError

    def write_units(self, tmp_path, units: dict, attempt=0, rng=None):
        """``units``: stream -> unit numbers; each stream's blocks through a writer of this
        attempt, journaled. The oracle: (unit, stream) -> (file, bytes)."""
        rng = rng or random.Random(attempt)
        journal = self.journal_cls(str(tmp_path / "journal.jsonl"))
        oracle = {}
        for stream, numbers in units.items():
            path = tmp_path / "result" / stream / f"a{attempt}-n0"
            w = self.open_writer(path, stream=stream, flush_bytes=256, flush_s=0.01)
            for u, record, data in _blocks(rng, max(numbers, default=-1) + 1, stream, False):
                if u in numbers:
                    w.append(u, record, data + b"\n")
                    oracle[(u, stream)] = (str(path) + self.partial_suffix, data + b"\n")
            self.journal_blocks(journal, w.close(), f"attempt-{attempt}")
        journal.close()
        return oracle

    def done(self, tmp_path, n_units):
        return self.replay(str(tmp_path / "journal.jsonl"), str(tmp_path / "result"),
                           self.streams, n_units)

    def last_lines(self, tmp_path) -> dict:
        last = {}
        with open(tmp_path / "journal.jsonl") as fh:
            for line in fh:
                e = json.loads(line)
                last[(e["tile"], e["sink"])] = e
        return last

    def test_units_on_every_stream_are_done_and_read_back(self, tmp_path):
        units = {"stdout": set(range(12)) - {9}, "tblout": set(range(12)) - {5, 9}}
        oracle = self.write_units(tmp_path, units)
        done, report = self.done(tmp_path, 14)
        assert done == set(range(12)) - {5, 9}
        assert report["reused"] == 10 and report["corrupt_units"] == [5]  # journaled, half
        assert report["rerun"] == 4
        last = self.last_lines(tmp_path)
        assert set(last) == set(oracle)
        for (u, stream), e in last.items():
            assert e["record"] == 10 * u + 3
            assert self.read_block(str(tmp_path / "result"), e) == oracle[(u, stream)][1]
        for stream in self.streams:  # the run's end: read from the final names
            self.finalize(str(tmp_path / "result" / stream / "a0-n0"))
        assert self.done(tmp_path, 14)[0] == done
        for (u, stream), e in last.items():
            assert self.read_block(str(tmp_path / "result"), e) == oracle[(u, stream)][1]

    def test_a_flipped_byte_fails_that_unit_only(self, tmp_path):
        oracle = self.write_units(tmp_path, {s: set(range(10)) for s in self.streams})
        for (u, stream), (path, data) in sorted(oracle.items()):
            raw = open(path, "rb").read()
            at = raw.find(data) + len(data) // 2  # found by its bytes, not by the index
            assert raw.count(data) == 1
            open(path, "wb").write(raw[:at] + bytes([raw[at] ^ 0x20]) + raw[at + 1:])
            done, report = self.done(tmp_path, 10)
            assert done == set(range(10)) - {u} and report["corrupt_units"] == [u], (u, stream)
            open(path, "wb").write(raw)
        assert self.done(tmp_path, 10)[0] == set(range(10))

    def test_a_lost_tail_fails_the_units_it_held(self, tmp_path):
        oracle = self.write_units(tmp_path, {s: set(range(10)) for s in self.streams})
        path = str(tmp_path / "result" / "stdout" / "a0-n0") + self.partial_suffix
        raw = open(path, "rb").read()
        cut = len(raw) * 2 // 3
        open(path, "wb").write(raw[:cut])
        held = {u for (u, s), (_, data) in oracle.items()
                if s == "stdout" and raw.find(data) + len(data) > cut}
        assert held
        done, report = self.done(tmp_path, 10)
        assert done == set(range(10)) - held and report["corrupt_units"] == sorted(held)
        last = self.last_lines(tmp_path)
        for u in held:
            assert self.read_block(str(tmp_path / "result"), last[(u, "stdout")]) is None

    def test_a_later_write_supersedes_the_first_wherever_it_went(self, tmp_path):
        oracle = self.write_units(tmp_path, {s: set(range(6)) for s in self.streams})
        path, data = oracle[(2, "stdout")]
        raw = open(path, "rb").read()
        at = raw.find(data)
        open(path, "wb").write(raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1:])
        assert self.done(tmp_path, 6)[0] == {0, 1, 3, 4, 5}
        again = self.write_units(tmp_path, {"stdout": {2}}, attempt=1, rng=random.Random(5))
        assert self.done(tmp_path, 6)[0] == set(range(6))  # attempt 1's file holds it now
        e = self.last_lines(tmp_path)[(2, "stdout")]
        assert e["location"] == "a1-n0"
        assert self.read_block(str(tmp_path / "result"), e) == again[(2, "stdout")][1]
        path, data = again[(2, "stdout")]  # and a later block that fails counts, not the first
        open(path, "wb").write(data[:-1] + b"?")
        assert self.done(tmp_path, 6)[0] == {0, 1, 3, 4, 5}
