"""The dense sink's staged logs read fast (issue 58 part 3: a resume of 10^6 tiles): the records
``StagedTiles`` finds, and the CRC a journal names for each (``journal_crcs``), are exactly
what a reader written from the format (tile_log.py's docstring) finds, record by record, in
logs that are clean, torn, damaged, or whose payloads hold bytes that look like a record; at
any window size. ``DenseMatrix.verify_many`` says what ``verify`` says, entry by entry."""
from __future__ import annotations

import json
import os
import random
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.pairs.sinks import tile_log

MAGIC = b"PFTILE\x00\x01"  # the format's, written out: the oracle imports nothing it checks


def record(field: str, region, mirror: bool, data: np.ndarray, ascii_only=True) -> bytes:
    payload = np.ascontiguousarray(data).tobytes()
    header = json.dumps({"field": field, "region": list(region), "mirror": mirror,
                         "dtype": data.dtype.str, "crc32": zlib.crc32(payload)},
                        separators=(",", ":"), ensure_ascii=ascii_only).encode()
    return MAGIC + struct.pack("<II", len(header), zlib.crc32(header)) + header + payload


def oracle(raw: bytes, path: str) -> list[tuple]:
    """Each record as the format says a reader finds it: from each magic, a header whose CRC
    matches and parses, a payload inside the file; then on after the payload (a damaged
    record: on from the next byte)."""
    out, pos = [], 0
    while True:
        pos = raw.find(MAGIC, pos)
        if pos < 0:
            return out
        try:
            hlen, hcrc = struct.unpack("<II", raw[pos + 8:pos + 16])
            header = raw[pos + 16:pos + 16 + hlen]
            assert len(header) == hlen and zlib.crc32(header) == hcrc
            h = json.loads(header)
            dtype = np.dtype(h["dtype"])
            assert dtype.kind in "biufc"
            r0, r1, c0, c1 = (int(x) for x in h["region"])
            assert r1 >= r0 and c1 >= c0
            start = pos + 16 + hlen
            nbytes = (r1 - r0) * (c1 - c0) * dtype.itemsize
            assert start + nbytes <= len(raw)
        except (AssertionError, ValueError, KeyError, TypeError, struct.error):
            pos += 1
            continue
        payload = raw[start:start + nbytes]
        crc = int(h["crc32"])
        if zlib.crc32(payload) != crc:
            journal = -1
        elif h["mirror"]:
            t = np.frombuffer(payload, dtype).reshape(r1 - r0, c1 - c0).T
            journal = zlib.crc32(np.ascontiguousarray(t).tobytes(), crc)
        else:
            journal = crc
        out.append((path, pos, str(h["field"]), (r0, r1, c0, c1), bool(h["mirror"]), crc,
                    journal))
        pos = start + nbytes


def write_logs(rng: random.Random, directory: str, damaged: bool,
               names=("value", "score", "naïve")) -> None:
    os.makedirs(directory, exist_ok=True)
    for w in range(rng.randint(1, 3)):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r0, c0 = rng.randrange(60), rng.randrange(60)
            h, wd = rng.randint(0, 3), rng.randint(0, 3)
            dtype = rng.choice(["<f8", "<f4", "<i4", "|u1"])
            data = np.random.default_rng(rng.getrandbits(32)).integers(
                0, 255, (h, wd)).astype(dtype)
            field = rng.choice(names)
            rec = record(field, (r0, r0 + h, c0, c0 + wd), rng.random() < 0.5, data,
                         ascii_only=rng.random() < 0.8)
            if damaged and rng.random() < 0.15:  # a record whose payload looks like records
                inner = record("value", (0, 1, 0, 1), False, np.ones((1, 1)))
                rec = record("value", (0, 1, 0, len(inner)), False,
                             np.frombuffer(inner, np.uint8).reshape(1, -1))
            parts.append(rec)
        raw = bytearray(b"".join(parts))
        if damaged and raw:
            for _ in range(rng.randint(1, 4)):
                kind = rng.random()
                at = rng.randrange(len(raw))
                if kind < 0.5:
                    raw[at] ^= 1 << rng.randrange(8)  # a flipped bit: header or payload
                elif kind < 0.75:
                    raw[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
                else:
                    del raw[rng.randrange(len(raw)):]  # torn
                if not raw:
                    break
        with open(os.path.join(directory, f"{w}-x{tile_log.LOG_SUFFIX}"), "wb") as fh:
            fh.write(bytes(raw))


def found(staged: tile_log.StagedTiles) -> list[tuple]:
    crcs = staged.journal_crcs()
    out = []
    for i in range(len(staged)):
        r = staged.record(i)
        out.append((r.path, r.offset, r.field, r.region, r.mirror, r.crc32, int(crcs[i])))
    return sorted(out)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), damaged=st.booleans(),
       window=st.sampled_from([40, 97, 500, 16 << 20]))
def test_the_staged_index_finds_what_the_format_says(tmp_path_factory, seed, damaged, window):
    d = str(tmp_path_factory.mktemp("staged"))
    write_logs(random.Random(seed), d, damaged)
    want = []
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as fh:
            want += oracle(fh.read(), os.path.join(d, name))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tile_log, "WINDOW", window)
        staged = tile_log.StagedTiles(d)
        try:
            assert found(staged) == sorted(want)
        finally:
            staged.close()


def test_a_clean_log_is_read_without_the_record_by_record_scan(tmp_path, monkeypatch):
    # (a name JSON escapes, "na\\u00efve", is read by the record-by-record scan)
    write_logs(random.Random(3), str(tmp_path), damaged=False, names=("value", "score"))
    calls = []
    real = tile_log._scan
    monkeypatch.setattr(tile_log, "_scan", lambda *a: calls.extend(
        r.offset for r in real(*a)) or iter(()))
    staged = tile_log.StagedTiles(str(tmp_path))
    try:
        assert len(staged) > 20 and calls == []
    finally:
        staged.close()


def dense_run(tmp_path, space_kind, chunk_bytes=None):
    """A dense sink's tiles written by two writers (the first tile twice, by both), as a run
    writes them; its context, tiles and journal entries."""
    import pickle

    from pairflow.engine.pairs.sinks import DenseMatrix, SinkContext
    from pairflow.engine.pairs.space import Rectangle, Triangle, leaves
    space = Triangle(23) if space_kind == "triangle" else Rectangle(17, 11)
    keys = [f"k{i}" for i in range(30)]
    ctx = SinkContext(str(tmp_path), space, 3, keys[:space.n_rows], keys[:space.n_cols],
                      {"value": "float64"})
    values = np.random.default_rng(0).random((space.n_rows, space.n_cols))
    driver = DenseMatrix(**({"chunk_bytes": chunk_bytes} if chunk_bytes else {}))
    driver.open(ctx)
    writers = [pickle.loads(pickle.dumps(driver)) for _ in range(2)]
    tiles = list(leaves(space, 3))
    entries = []
    for k, t in enumerate(tiles + tiles[:1]):
        mask = space.mask(t.r0, t.r1, t.c0, t.c1)
        for e in writers[k % 2].write_tile(t, {"value": values[t.r0:t.r1, t.c0:t.c1]}, mask):
            entries.append({"tile": t.id, **e})
    for w in writers:
        w._close_log()
    return driver, ctx, tiles, entries


def agree(sink, entries) -> list[bool]:
    """``verify_many`` of the entries as columns, checked against ``verify`` one by one."""
    from pairflow.engine.run.journal import Entries
    cols = Entries(np.array([e["tile"] for e in entries]), [e["sink"] for e in entries],
                   [e["location"] for e in entries], np.array([e["region"] for e in entries]),
                   np.array([e["length"] for e in entries]),
                   np.array([e["crc32"] for e in entries]))
    many = [bool(x) for x in sink.verify_many(cols)]
    assert many == [bool(sink.verify(e)) for e in entries]
    return many


def with_wrong_crcs(entries, wrong):
    return [{**e, "crc32": (e["crc32"] + 1) & 0xFFFFFFFF} if i in wrong else e
            for i, e in enumerate(entries)]


@pytest.mark.parametrize("space_kind", ["triangle", "rectangle"])
def test_verify_many_says_what_verify_says_of_staged_tiles(tmp_path, space_kind):
    """Some staged payloads damaged, some journaled CRCs wrong: ``verify_many`` agrees with
    ``verify`` entry by entry, and with what was done to the bytes."""
    from pairflow.engine.pairs.sinks import DenseMatrix
    driver, ctx, tiles, entries = dense_run(tmp_path, space_kind)
    rng = random.Random(5)
    bad = {rng.randrange(1, len(tiles)) for _ in range(4)}  # tiles whose one record is hit
    for path in [os.path.join(driver.staging, f) for f in sorted(os.listdir(driver.staging))]:
        raw = bytearray(open(path, "rb").read())
        for r in oracle(bytes(raw), path):
            tile = next(t for t in tiles if (t.r0, t.r1, t.c0, t.c1) == r[3])
            if tile.id in bad:
                hlen = struct.unpack("<II", bytes(raw[r[1] + 8:r[1] + 16]))[0]
                raw[r[1] + 16 + hlen + 3] ^= 0x10  # a byte of its payload
        open(path, "wb").write(bytes(raw))
    wrong = {len(entries) - 1, 2}
    entries = with_wrong_crcs(entries, wrong)
    resumed = DenseMatrix()
    resumed.open(ctx, resume=True)
    got = agree(resumed, entries)
    assert got == [i not in wrong and e["tile"] not in bad for i, e in enumerate(entries)]
    resumed._reset()


@pytest.mark.parametrize("space_kind", ["triangle", "rectangle"])
@pytest.mark.parametrize("chunk_bytes", [None, 6 * 6 * 8, 3 * 3 * 8])
def test_verify_many_reads_a_finished_run_back_from_its_array(tmp_path, space_kind,
                                                               chunk_bytes):
    """A finished run reopened: every entry read back from the chunks (as arrays), agreeing
    with ``verify``; a flipped byte in a chunk fails the tile (and its mirror's) that holds
    the cell, a wrong journaled CRC its entry."""
    from pairflow.engine.pairs.sinks import DenseMatrix
    from tests.dense_layout import cell_span, flip_byte
    driver, ctx, tiles, entries = dense_run(tmp_path, space_kind, chunk_bytes)
    driver.finalize()
    wrong = {0, 5}
    entries = with_wrong_crcs(entries, wrong)
    hit = next(e for e in entries[10:] if e["region"][1] > e["region"][0]
               and e["region"][3] > e["region"][2] and e["region"][0] != e["region"][2])
    r0, _, c0, _ = hit["region"]
    path, start, _ = cell_span(os.path.join(driver.path, "value"), r0, c0)
    flip_byte(path, start)
    resumed = DenseMatrix(**({"chunk_bytes": chunk_bytes} if chunk_bytes else {}))
    resumed.open(ctx, resume=True)  # a finished run reopened: nothing staged
    got = agree(resumed, entries)
    for i, e in enumerate(entries):
        holds = e["region"][0] <= r0 < e["region"][1] and e["region"][2] <= c0 < e["region"][3]
        mirror = ctx.space.symmetric and e["region"][2] <= r0 < e["region"][3] and \
            e["region"][0] <= c0 < e["region"][1]
        assert got[i] == (i not in wrong and not holds and not mirror), (i, e)
    resumed._reset()
