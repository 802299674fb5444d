"""The dense sink's layout (issue 58): chunks sized for the reader, not for tiles; tiles staged
by each writer in a log of its own until the driver, the one writer of every chunk, moves them
in. Checked against numpy brute force and the on-disk format read independently
(tests/dense_layout.py), no Ray."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.errors import PairflowError
from pairflow.engine.pairs.result import AllPairsResult
from pairflow.engine.pairs.sinks import DenseMatrix, SinkContext
from pairflow.engine.pairs.space import Rectangle, Triangle, leaves
from tests.dense_layout import cell_span, flip_byte, staged_records, tile_records


def files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path)
                  for d, _, files in os.walk(path) for f in files)


def brute_force(values, symmetric, diagonal):
    n_rows, n_cols = values.shape
    out = np.full(values.shape, np.nan)
    for i in range(n_rows):
        for j in range(n_cols):
            if not symmetric or i < j:
                out[i, j] = values[i, j]
                if symmetric:
                    out[j, i] = values[i, j]
    if symmetric and diagonal is not None:
        np.fill_diagonal(out, diagonal)
    return out


class Run:
    """A dense sink driven as a run drives it: opened in the driver, shipped (pickled) to
    ``writers`` device actors which write the tiles dealt round-robin, finalized in the
    driver."""

    def __init__(self, tmp_path, space, leaf, values, writers=2, chunk_bytes=None, **kw):
        self.space, self.leaf, self.values = space, leaf, values
        keys = [f"k{i}" for i in range(max(space.n_rows, space.n_cols))]
        self.ctx = SinkContext(str(tmp_path), space, leaf, keys[:space.n_rows],
                               keys[:space.n_cols], {"value": "float64"})
        if chunk_bytes is not None:
            kw["chunk_bytes"] = chunk_bytes
        self.kw = kw
        self.driver = self.open(resume=False)
        self.writers = [pickle.loads(pickle.dumps(self.driver)) for _ in range(writers)]
        self.tiles = leaves(space, leaf)
        self.entries = {t.id: self.write(t, self.writers[k % writers])
                        for k, t in enumerate(self.tiles)}

    def open(self, resume):
        sink = DenseMatrix(**self.kw)
        sink.open(self.ctx, resume=resume)
        return sink

    def write(self, tile, sink):
        mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        return sink.write_tile(tile, {"value": self.values[tile.r0:tile.r1, tile.c0:tile.c1]},
                               mask)

    def array_dir(self, finished=True):
        return os.path.join(self.driver.path if finished else self.driver.partial, "value")


@settings(max_examples=60, derandomize=True, deadline=None)
@given(n_rows=st.integers(1, 5000), n_cols=st.integers(1, 5000), leaf=st.integers(1, 700),
       itemsize=st.sampled_from([1, 4, 8]), mib=st.sampled_from([1, 8, 16]))
def test_chunks_hold_whole_tiles_and_are_sized_for_the_reader(n_rows, n_cols, leaf, itemsize,
                                                               mib):
    from pairflow.engine.pairs.sinks.dense import chunk_shape
    rows, cols = chunk_shape(n_rows, n_cols, leaf, itemsize, mib << 20)
    assert 1 <= rows <= n_rows and 1 <= cols <= n_cols
    # whole tiles: a side is a multiple of the leaf, or the matrix's whole side
    assert rows % leaf == 0 or rows == n_rows
    assert cols % leaf == 0 or cols == n_cols
    nbytes = rows * cols * itemsize
    # at most the target, unless one tile (leaf x leaf, the matrix's sides at most) exceeds it
    assert nbytes <= max(mib << 20, min(leaf, n_rows) * min(leaf, n_cols) * itemsize)
    # and not needlessly small: a side shorter than the matrix's leaves no room for another leaf
    if rows < n_rows and cols < n_cols:
        assert (rows + leaf) * (cols + leaf) * itemsize > mib << 20


@pytest.mark.parametrize("leaf", [1, 3, 6])
def test_files_grow_with_chunks_not_tiles(tmp_path, leaf):
    """The same 40 x 40 triangle cut into 820, 91 or 28 tiles: while running, one log per
    writer and nothing in the array; finished, one chunk (the matrix is smaller than a chunk);
    with 2 KiB chunks, the chunk grid's blocks that hold a pair."""
    n = 40
    values = np.random.default_rng(leaf).random((n, n))
    for chunk_bytes, name in ((None, "big"), (2048, "small")):
        run = Run(tmp_path / name, Triangle(n), leaf, values, writers=3, chunk_bytes=chunk_bytes,
                  diagonal=1.0)
        assert files_under(run.array_dir(finished=False)) == ["zarr.json"]  # no chunk yet
        assert len(os.listdir(run.driver.staging)) == 3  # a log per writer
        assert len(staged_records(run.driver.staging)) == len(run.tiles)
        run.driver.finalize()
        assert not os.path.exists(run.driver.staging)
        import zarr
        arr = zarr.open_array(run.array_dir(), mode="r")
        rows, cols = arr.chunks
        assert rows % leaf == 0 and cols % leaf == 0 or (rows, cols) == (n, n)
        grid = {(i // rows, j // cols) for i in range(n) for j in range(n)}  # all: diagonal 1.0
        assert files_under(run.array_dir()) == sorted(
            ["zarr.json"] + [os.path.join("c", str(i), str(j)) for i, j in grid])
        if chunk_bytes is None:
            assert (rows, cols) == (n, n)
        else:
            assert rows * cols * 8 <= max(chunk_bytes, leaf * leaf * 8)
        np.testing.assert_array_equal(arr[...], brute_force(values, True, 1.0))


def test_dask_has_one_task_per_chunk(tmp_path):
    values = np.random.default_rng(0).random((50, 30))
    run = Run(tmp_path, Rectangle(50, 30), 4, values, chunk_bytes=12 * 12 * 8)
    path = run.driver.finalize()
    res = AllPairsResult(str(tmp_path), {}, {"dense": path})
    arr = res.dask("value")
    import zarr
    rows, cols = zarr.open_array(run.array_dir(), mode="r").chunks
    n_chunks = -(-50 // rows) * -(-30 // cols)
    assert n_chunks > 1 and arr.npartitions == n_chunks
    assert len(dict(arr.__dask_graph__())) == n_chunks
    np.testing.assert_array_equal(arr.compute(), values)


def test_a_chunk_that_no_longer_reads_sends_back_exactly_its_tiles(tmp_path):
    """A finished chunk cut short decodes no more: every tile with a cell in it (or in its
    mirror) fails verification, the others verify; recomputing those repairs the result."""
    n, leaf = 24, 3
    values = np.random.default_rng(1).random((n, n))
    run = Run(tmp_path, Triangle(n), leaf, values, chunk_bytes=9 * 9 * 8, diagonal=0.0)
    run.driver.finalize()
    import zarr
    rows, cols = zarr.open_array(run.array_dir(), mode="r").chunks
    path, _, _ = cell_span(run.array_dir(), 0, n - 1)  # the top right chunk
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)
    bad = (0, (n - 1) // cols)

    def touches(t):
        blocks = {(i // rows, j // cols) for i in (t.r0, t.r1 - 1) for j in (t.c0, t.c1 - 1)}
        blocks |= {(j, i) for i, j in blocks}
        return bad in blocks
    expected = sorted(t.id for t in run.tiles if touches(t))
    resumed = run.open(resume=True)
    failing = sorted(t for t, es in run.entries.items() if not all(resumed.verify(e) for e in es))
    assert failing == expected and 0 < len(failing) < len(run.tiles)
    for t in run.tiles:
        if t.id in failing:
            run.write(t, resumed)
    assert all(resumed.verify(e) for es in run.entries.values() for e in es)
    resumed.finalize()
    np.testing.assert_array_equal(zarr.open_array(run.array_dir(), mode="r")[...],
                                  brute_force(values, True, 0.0))


def test_a_damaged_record_costs_only_itself(tmp_path):
    """A record whose header is damaged is skipped; the records after it in the same log are
    found again (the reader looks for the next magic)."""
    n, leaf = 12, 3
    values = np.random.default_rng(2).random((n, n))
    run = Run(tmp_path, Triangle(n), leaf, values, writers=1)
    records = staged_records(run.driver.staging)
    victim = records[1]
    flip_byte(victim["path"], victim["start"] + 9)  # its header length
    failing = [t for t, es in run.entries.items() if not all(run.driver.verify(e) for e in es)]
    (tile,) = [t for t in run.tiles if [t.r0, t.r1, t.c0, t.c1] == victim["region"]]
    assert failing == [tile.id]


def test_finalize_refuses_a_tile_whose_every_record_went_bad(tmp_path):
    """Bytes that change between a tile's write and the end of the run (no resume checked
    them) fail the run, naming the log, rather than leave the tile's cells empty."""
    values = np.random.default_rng(3).random((9, 9))
    run = Run(tmp_path, Triangle(9), 3, values)
    (rec,) = tile_records(run.driver.staging, (0, 3, 3, 6), "value")
    flip_byte(rec["path"], rec["payload"] + 5)
    with pytest.raises(PairflowError, match=r"\[0, 3, 3, 6\].*\.log.*resume"):
        run.driver.finalize()
    resumed = run.open(resume=True)  # the resume repairs it
    tile = next(t for t in run.tiles if (t.r0, t.c0) == (0, 3))
    assert not all(resumed.verify(e) for e in run.entries[tile.id])
    run.write(tile, resumed)
    resumed.finalize()
    import zarr
    np.testing.assert_array_equal(zarr.open_array(run.array_dir(), mode="r")[...],
                                  brute_force(values, True, None))


def test_a_retried_tile_on_another_writer_is_one_result(tmp_path):
    """A tile written by two writers (a retry after its first actor seemed lost) has a record
    in each log; both verify, the result holds it once, as brute force says."""
    values = np.random.default_rng(4).random((10, 14))
    run = Run(tmp_path, Rectangle(10, 14), 4, values, writers=2)
    tile = run.tiles[2]
    assert run.write(tile, run.writers[1]) == run.entries[tile.id]
    assert run.write(tile, run.writers[0]) == run.entries[tile.id]
    region = (tile.r0, tile.r1, tile.c0, tile.c1)
    assert len({r["path"] for r in tile_records(run.driver.staging, region)}) == 2
    assert all(run.driver.verify(e) for es in run.entries.values() for e in es)
    run.driver.finalize()
    import zarr
    np.testing.assert_array_equal(zarr.open_array(run.array_dir(), mode="r")[...], values)


def test_a_record_never_holds_python_objects(tmp_path):
    """A planted record claiming an object dtype is not a record: nothing is unpickled, the
    tile it names is simply not there."""
    import json
    import struct
    import zlib
    values = np.random.default_rng(5).random((6, 6))
    run = Run(tmp_path, Rectangle(6, 6), 3, values, writers=1)
    header = json.dumps({"field": "value", "region": [0, 3, 0, 3], "mirror": False,
                         "dtype": "|O", "crc32": 0}).encode()
    with open(os.path.join(run.driver.staging, "planted.log"), "wb") as fh:
        fh.write(b"PFTILE\x00\x01" + struct.pack("<II", len(header), zlib.crc32(header))
                 + header + b"\x00" * 72)
    from pairflow.engine.pairs.sinks.tile_log import StagedTiles
    staged = StagedTiles(run.driver.staging)
    assert all(staged.record(i).dtype.kind == "f" for i in range(len(staged)))
    staged.close()


def test_finalize_reads_what_the_actors_wrote_after_a_resume_verified(tmp_path):
    """A resume verifies the journaled tiles in the driver (reading the logs), then the actors
    (copies of the sink) write the rest: finalize moves those in too (the differential
    harness's interrupted 4-item triangle found them left out)."""
    n, leaf = 8, 2
    values = np.random.default_rng(6).random((n, n))
    run = Run(tmp_path, Triangle(n), leaf, values, writers=1)
    kept = run.tiles[: len(run.tiles) // 2]
    staging = run.driver.staging
    for name in os.listdir(staging):  # the killed run's log held only the first half
        os.remove(os.path.join(staging, name))
    writer = pickle.loads(pickle.dumps(run.driver))
    for t in kept:
        run.write(t, writer)
    resumed = run.open(resume=True)
    assert [all(resumed.verify(e) for e in run.entries[t.id]) for t in run.tiles] == \
        [t in kept for t in run.tiles]
    actor = pickle.loads(pickle.dumps(resumed))
    for t in run.tiles[len(kept):]:
        run.write(t, actor)
    resumed.finalize()
    import zarr
    np.testing.assert_array_equal(zarr.open_array(run.array_dir(), mode="r")[...],
                                  brute_force(values, True, None))


def test_a_writer_writing_a_tile_again_appends_no_second_record(tmp_path):
    """A retry on the writer that already logged the tile (same bytes): one record per tile and
    field in its log; another tile of the same corner's row is still written."""
    values = np.random.default_rng(11).random((9, 9))
    run = Run(tmp_path, Triangle(9), 3, values, writers=1)
    before = staged_records(run.driver.staging)
    for t in list(run.tiles)[:3]:
        run.write(t, run.writers[0])
    after = staged_records(run.driver.staging)
    assert len(after) == len(before) == len(run.tiles)
    run.driver.finalize()
    import zarr
    np.testing.assert_array_equal(zarr.open_array(run.array_dir(), mode="r")[...],
                                  brute_force(values, True, None))
