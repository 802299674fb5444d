"""The all-pairs sink contract, run by every sink on every kind of pair space (no Ray).

A sink receives each tile of a run once (and again after a crash or a lost actor), so the contract
is what the journal and resume rely on: every journal entry a tile returns verifies; writing a
tile again leaves the same bytes; a flipped byte in what a tile wrote fails its verification;
a sink reopened with ``resume=True`` keeps what verifies, so rewriting only the corrupt tiles
repairs the result; and the finalized result equals what a brute-force computation of the whole
value matrix gives. The oracle below works from the pair sets spelled out here and numpy, never
from the space's own masks.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import pandas as pd
import pytest

from pairflow.engine.pairs.sinks import DenseMatrix, SinkContext, Threshold, TopK
from pairflow.engine.pairs.space import PairList, Rectangle, Triangle, leaves
from tests.dense_layout import region_spans, tile_records

#: a value the sinks must never see: it stands in every cell of a tile that is not a pair
OUTSIDE = 1e9


def _random_pairs(n_rows, n_cols, count, seed, upper=False):
    rng = np.random.default_rng(seed)
    cells = [(i, j) for i in range(n_rows) for j in range(n_cols) if not upper or i < j]
    pick = rng.choice(len(cells), size=count, replace=False)
    return sorted(cells[p] for p in pick)


SPACES = {
    # id: (space factory, leaf, the wanted pairs spelled out independently of the space)
    "triangle-10-leaf3": (lambda: Triangle(10), 3,
                          [(i, j) for i in range(10) for j in range(10) if i < j]),
    "triangle-7-one-tile": (lambda: Triangle(7), 7,
                            [(i, j) for i in range(7) for j in range(7) if i < j]),
    "triangle-6-leaf1": (lambda: Triangle(6), 1,  # 1x1 diagonal blocks hold no pair at all
                         [(i, j) for i in range(6) for j in range(6) if i < j]),
    "rectangle-7x11-leaf3": (lambda: Rectangle(7, 11), 3,
                             [(i, j) for i in range(7) for j in range(11)]),
    "pairlist-9x12-leaf4": (lambda: PairList(_random_pairs(9, 12, 30, 1), 9, 12), 4,
                            _random_pairs(9, 12, 30, 1)),
    "pairlist-symmetric-10-leaf3": (
        lambda: PairList(_random_pairs(10, 10, 20, 2, upper=True), 10, 10, symmetric=True), 3,
        _random_pairs(10, 10, 20, 2, upper=True)),
}

SINKS = {
    "dense": lambda: DenseMatrix(diagonal=-1.0),
    "topk-largest": lambda: TopK(3),
    "topk-smallest": lambda: TopK(2, largest=False),
    "topk-cols": lambda: TopK(2, per="col"),  # the k best rows of every column
    "threshold-above": lambda: Threshold(6.0),
    "threshold-below": lambda: Threshold(2.0, above=False),
}


@pytest.fixture(params=sorted(SPACES))
def space_case(request):
    make, leaf, pairs = SPACES[request.param]
    space = make()
    # small integers: many ties, so the sinks' tie rules are exercised
    values = np.random.default_rng(len(pairs)).integers(0, 10, (space.n_rows, space.n_cols))
    return space, leaf, sorted(pairs), values.astype(np.float64)


@pytest.fixture(params=sorted(SINKS))
def sink_name(request):
    return request.param


class Written:
    """One sink run tile by tile, as the device actors drive it, with its journal entries."""

    def __init__(self, sink_name, space, leaf, values, out_dir):
        self.sink_name, self.space, self.leaf, self.values = sink_name, space, leaf, values
        self.out_dir = str(out_dir)
        row_keys = [f"r{i}" for i in range(space.n_rows)]
        col_keys = row_keys if space.symmetric else [f"c{j}" for j in range(space.n_cols)]
        self.ctx = SinkContext(self.out_dir, space, leaf, row_keys, col_keys,
                               {"value": "float64"})
        self.tiles = leaves(space, leaf)
        self.sink = self.open(resume=False)
        self.entries = {t.id: self.write(t) for t in self.tiles}

    def open(self, resume):
        sink = SINKS[self.sink_name]()
        sink.open(self.ctx, resume=resume)
        sink.attach()
        sink.before_finalize()
        return sink

    def write(self, tile, sink=None):
        mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        block = np.where(mask, self.values[tile.r0:tile.r1, tile.c0:tile.c1], OUTSIDE)
        return (sink or self.sink).write_tile(tile, {"value": block}, mask)

    def reread(self):
        """The sink as it stands, reading the bytes now on disk (a dense sink keeps its arrays
        open, and zarr may cache what it read)."""
        self.sink._arrays = None
        return self.sink

    def interior_tiles(self):
        """Tiles of the full leaf size (a tile at the matrix's edge may be cut short)."""
        return [t for t in self.tiles if t.r1 - t.r0 == self.leaf and t.c1 - t.c0 == self.leaf]

    def spans_of(self, tile, finished=False):
        """Where what ``tile`` wrote lies: (file, first byte, end) — its part; for the dense
        sink its records in the writers' logs while the run is under way, its cells (and their
        mirror) in the array's chunks once it is finished (tests/dense_layout.py reads the
        format)."""
        if self.sink_name != "dense":
            paths = [os.path.join(self.out_dir, e["location"]) for e in self.entries[tile.id]]
            return [(p, 0, os.path.getsize(p)) for p in paths]
        region = (tile.r0, tile.r1, tile.c0, tile.c1)
        if finished:
            mirror = self.space.symmetric and tile.r0 != tile.c0
            return region_spans(os.path.join(self.sink.path, "value"), region, mirror)
        return [(r["path"], r["start"], r["end"])
                for r in tile_records(self.sink.staging, region, "value")]


def _contents(directory):
    return {os.path.relpath(p, directory): open(p, "rb").read()
            for p in glob.glob(os.path.join(directory, "**", "*"), recursive=True)
            if os.path.isfile(p)}


def _flip_a_byte(path, position=None):
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2 if position is None else position] ^= 0xFF
    open(path, "wb").write(bytes(raw))


# -- the brute-force oracle ---------------------------------------------------------------------

def expected_dense(pairs, values, symmetric, diagonal=-1.0):
    out = np.full(values.shape, np.nan)
    for i, j in pairs:
        out[i, j] = values[i, j]
        if symmetric:
            out[j, i] = values[i, j]
    if symmetric:
        np.fill_diagonal(out, diagonal)
    return out


def expected_topk(pairs, values, symmetric, k, largest):
    """Per query, its candidates sorted by score (best first), then by lower target index."""
    cands: dict[int, list] = {}
    for i, j in pairs:
        cands.setdefault(i, []).append((j, values[i, j]))
        if symmetric:
            cands.setdefault(j, []).append((i, values[i, j]))
    rows = []
    for q in sorted(cands):
        best = sorted(cands[q], key=lambda tv: (-tv[1] if largest else tv[1], tv[0]))[:k]
        rows += [(q, t, v, rank) for rank, (t, v) in enumerate(best, start=1)]
    return rows


def expected_edges(pairs, values, t, above):
    return [(i, j, values[i, j]) for i, j in sorted(pairs)
            if (values[i, j] >= t if above else values[i, j] <= t)]


def check_result(w: Written, result, pairs):
    sink, symmetric = w.sink, w.space.symmetric
    if isinstance(sink, DenseMatrix):
        import dask.array as da
        import zarr
        want = expected_dense(pairs, w.values, symmetric)
        np.testing.assert_array_equal(zarr.open_group(result, mode="r")["value"][...], want)
        np.testing.assert_array_equal(da.from_zarr(f"{result}/value").compute(), want)
        assert not os.path.exists(sink.partial)
    elif isinstance(sink, TopK):
        got = pd.read_parquet(result)
        qkeys, tkeys = w.ctx.row_keys, w.ctx.col_keys
        if sink.per == "col" and not symmetric:  # the transposed matrix's rows
            pairs = [(j, i) for i, j in pairs]
            want = expected_topk(pairs, w.values.T, symmetric, sink.k, sink.largest)
            qkeys, tkeys = tkeys, qkeys
        else:
            want = expected_topk(pairs, w.values, symmetric, sink.k, sink.largest)
        assert list(zip(got.qi, got.ti, got.score, got["rank"])) == want
        assert list(got["query"]) == [qkeys[q] for q, *_ in want]
        assert list(got["target"]) == [tkeys[t] for _, t, *_ in want]
    else:
        got = pd.read_parquet(result)
        want = expected_edges(pairs, w.values, sink.t, sink.above)
        assert list(zip(got.i, got.j, got.value)) == want
        assert list(got.a) == [w.ctx.row_keys[i] for i, *_ in want]
        assert list(got.b) == [w.ctx.col_keys[j] for _, j, *_ in want]


# -- the contract -------------------------------------------------------------------------------

def test_every_entry_verifies_and_finalize_equals_brute_force(tmp_path, sink_name, space_case):
    space, leaf, pairs, values = space_case
    w = Written(sink_name, space, leaf, values, tmp_path)
    entries = [e for es in w.entries.values() for e in es]
    assert entries and all(e["length"] > 0 and 0 <= e["crc32"] < 2 ** 32 for e in entries)
    assert all(w.sink.verify(e) for e in entries)
    check_result(w, w.sink.finalize(), pairs)


def test_rewriting_a_tile_gives_the_same_bytes(tmp_path, sink_name, space_case):
    space, leaf, pairs, values = space_case
    w = Written(sink_name, space, leaf, values, tmp_path)
    before = _contents(w.out_dir)
    for tile in w.tiles:
        assert w.write(tile) == w.entries[tile.id], tile
    assert _contents(w.out_dir) == before
    check_result(w, w.sink.finalize(), pairs)


def test_a_flipped_byte_fails_verification_of_that_tile_only(tmp_path, sink_name, space_case):
    space, leaf, _, values = space_case
    w = Written(sink_name, space, leaf, values, tmp_path)
    victim = w.interior_tiles()[0]
    spans = w.spans_of(victim)
    assert spans
    for path, start, end in spans:
        pristine = open(path, "rb").read()
        for position in range(start, end):  # any byte of what the tile wrote
            _flip_a_byte(path, position)
            assert not all(w.reread().verify(e) for e in w.entries[victim.id]), (path, position)
            open(path, "wb").write(pristine)
        _flip_a_byte(path, (start + end) // 2)
        failing = {t for t, es in w.entries.items() if not all(w.reread().verify(e) for e in es)}
        assert failing == {victim.id}, (path, failing)
        open(path, "wb").write(pristine)
    assert all(w.reread().verify(e) for es in w.entries.values() for e in es)


@pytest.mark.parametrize("finished", [False, True], ids=["killed-mid-run", "finished"])
def test_resume_keeps_what_verifies_and_repairs_a_corrupt_tile(tmp_path, sink_name, space_case,
                                                               finished):
    space, leaf, pairs, values = space_case
    w = Written(sink_name, space, leaf, values, tmp_path)
    if finished:
        w.sink.finalize()
    victim = w.interior_tiles()[-1]
    spans = w.spans_of(victim, finished=finished)
    assert spans
    path, start, end = spans[len(spans) // 2]
    _flip_a_byte(path, (start + end) // 2)
    resumed = w.open(resume=True)  # a new process, as after a restart
    failing = [t for t, es in w.entries.items() if not all(resumed.verify(e) for e in es)]
    assert failing == [victim.id]
    assert w.write(victim, resumed) == w.entries[victim.id]
    assert all(resumed.verify(e) for es in w.entries.values() for e in es)
    w.sink = resumed
    check_result(w, resumed.finalize(), pairs)


def test_an_empty_space_finalizes_to_an_empty_result(tmp_path, sink_name):
    w = Written(sink_name, PairList([], 4, 5), 2, np.zeros((4, 5)), tmp_path)
    assert w.tiles == []
    check_result(w, w.sink.finalize(), [])
