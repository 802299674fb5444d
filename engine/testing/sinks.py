"""The all-pairs sink contract (``pairflow.engine.pairs.sinks.Sink``) as a base class: every sink,
on every kind of pair space (no Ray).

A sink receives each tile of a run once (and again after a crash or a lost actor), so the
contract is what the journal and resume rely on: every journal entry a tile returns verifies;
writing a tile again leaves the same bytes; a flipped byte in what a tile wrote fails its
verification, and only that tile's; a sink reopened with ``resume=True`` keeps what verifies, so
rewriting only the corrupt tiles repairs the result; and the finalized result equals what a
brute-force computation of the whole value matrix gives. The pair sets are spelled out here,
never taken from the space's own masks, and the oracles below (``expected_dense``,
``expected_topk``, ``expected_edges``) are plain Python over them.

A subclass gives ``make_sink`` (a fixture: a factory of new, unopened sinks; parametrize it for
several configurations) and ``check_result`` (the finalized result against an oracle). A sink
that does not write one file per journal entry (``entry["location"]`` under the output
directory) overrides ``spans_of``: where the bytes a tile wrote lie, read from the files
directly. ``reread`` returns the sink as it stands after bytes were changed beneath it.
"""
from __future__ import annotations

import glob
import os

import numpy as np
import pytest

from pairflow.engine import PairList, Rectangle, Triangle, leaves
from pairflow.engine.pairs.sinks import SinkContext

__all__ = ["SinkTests", "Written", "SPACES", "OUTSIDE", "expected_dense", "expected_topk",
           "expected_edges"]

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


class Written:
    """One sink run tile by tile, as the device actors drive it, with its journal entries."""

    def __init__(self, make_sink, space, leaf, values, out_dir):
        self.make_sink, self.space, self.leaf, self.values = make_sink, space, leaf, values
        self.out_dir = str(out_dir)
        row_keys = [f"r{i}" for i in range(space.n_rows)]
        col_keys = row_keys if space.symmetric else [f"c{j}" for j in range(space.n_cols)]
        self.ctx = SinkContext(self.out_dir, space, leaf, row_keys, col_keys,
                               {"value": "float64"})
        self.tiles = leaves(space, leaf)
        self.sink = self.open(resume=False)
        self.entries = {t.id: self.write(t) for t in self.tiles}

    def open(self, resume):
        sink = self.make_sink()
        sink.open(self.ctx, resume=resume)
        sink.attach()
        sink.before_finalize()
        return sink

    def write(self, tile, sink=None):
        mask = self.space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        block = np.where(mask, self.values[tile.r0:tile.r1, tile.c0:tile.c1], OUTSIDE)
        return (sink or self.sink).write_tile(tile, {"value": block}, mask)

    def interior_tiles(self):
        """Tiles of the full leaf size (a tile at the matrix's edge may be cut short)."""
        return [t for t in self.tiles if t.r1 - t.r0 == self.leaf and t.c1 - t.c0 == self.leaf]


def _contents(directory):
    return {os.path.relpath(p, directory): open(p, "rb").read()
            for p in glob.glob(os.path.join(directory, "**", "*"), recursive=True)
            if os.path.isfile(p)}


def _flip_a_byte(path, position=None):
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2 if position is None else position] ^= 0xFF
    open(path, "wb").write(bytes(raw))


# -- the brute-force oracles --------------------------------------------------------------------

def expected_dense(pairs, values, symmetric, diagonal=-1.0):
    """The whole matrix: NaN where no pair, the value (and its mirror) where one."""
    out = np.full(values.shape, np.nan)
    for i, j in pairs:
        out[i, j] = values[i, j]
        if symmetric:
            out[j, i] = values[i, j]
    if symmetric:
        np.fill_diagonal(out, diagonal)
    return out


def expected_topk(pairs, values, symmetric, k, largest):
    """Per query, its candidates sorted by score (best first), then by lower target index:
    rows of (query, target, score, rank)."""
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
    """Every pair at or beyond the threshold, in (i, j) order: rows of (i, j, value)."""
    return [(i, j, values[i, j]) for i, j in sorted(pairs)
            if (values[i, j] >= t if above else values[i, j] <= t)]


# -- the contract -------------------------------------------------------------------------------

class SinkTests:
    """Subclass, give ``make_sink`` and ``check_result``; see the module's docstring."""

    @pytest.fixture
    def make_sink(self):
        raise NotImplementedError("a subclass gives a factory of new, unopened sinks")

    def check_result(self, written: Written, result, pairs) -> None:
        """Assert that ``result`` (what ``finalize`` returned) is the oracle's for ``pairs`` of
        ``written.values``."""
        raise NotImplementedError

    def spans_of(self, written: Written, tile, finished=False) -> list[tuple[str, int, int]]:
        """Where what ``tile`` wrote lies: (file, first byte, end); here each journal entry's
        whole file."""
        paths = [os.path.join(written.out_dir, e["location"]) for e in written.entries[tile.id]]
        return [(p, 0, os.path.getsize(p)) for p in paths]

    def reread(self, written: Written):
        """The sink as it stands, reading the bytes now on disk (override when it caches)."""
        return written.sink

    @pytest.fixture(params=sorted(SPACES))
    def space_case(self, request):
        make, leaf, pairs = SPACES[request.param]
        space = make()
        # small integers: many ties, so the sinks' tie rules are exercised
        values = np.random.default_rng(len(pairs)).integers(0, 10, (space.n_rows, space.n_cols))
        return space, leaf, sorted(pairs), values.astype(np.float64)

    def test_every_entry_verifies_and_finalize_equals_brute_force(self, tmp_path, make_sink,
                                                                  space_case):
        space, leaf, pairs, values = space_case
        w = Written(make_sink, space, leaf, values, tmp_path)
        entries = [e for es in w.entries.values() for e in es]
        assert entries and all(e["length"] > 0 and 0 <= e["crc32"] < 2 ** 32 for e in entries)
        assert all(w.sink.verify(e) for e in entries)
        self.check_result(w, w.sink.finalize(), pairs)

    def test_rewriting_a_tile_gives_the_same_bytes(self, tmp_path, make_sink, space_case):
        space, leaf, pairs, values = space_case
        w = Written(make_sink, space, leaf, values, tmp_path)
        before = _contents(w.out_dir)
        for tile in w.tiles:
            assert w.write(tile) == w.entries[tile.id], tile
        assert _contents(w.out_dir) == before
        self.check_result(w, w.sink.finalize(), pairs)

    def test_a_flipped_byte_fails_verification_of_that_tile_only(self, tmp_path, make_sink,
                                                                 space_case):
        space, leaf, _, values = space_case
        w = Written(make_sink, space, leaf, values, tmp_path)
        victim = w.interior_tiles()[0]
        spans = self.spans_of(w, victim)
        assert spans

        def verifies(tile_id):
            return all(self.reread(w).verify(e) for e in w.entries[tile_id])
        for path, start, end in spans:
            pristine = open(path, "rb").read()
            for position in range(start, end):  # any byte of what the tile wrote
                _flip_a_byte(path, position)
                assert not verifies(victim.id), (path, position)
                open(path, "wb").write(pristine)
            _flip_a_byte(path, (start + end) // 2)
            failing = {t for t in w.entries if not verifies(t)}
            assert failing == {victim.id}, (path, failing)
            open(path, "wb").write(pristine)
        assert all(verifies(t) for t in w.entries)

    @pytest.mark.parametrize("finished", [False, True], ids=["killed-mid-run", "finished"])
    def test_resume_keeps_what_verifies_and_repairs_a_corrupt_tile(self, tmp_path, make_sink,
                                                                   space_case, finished):
        space, leaf, pairs, values = space_case
        w = Written(make_sink, space, leaf, values, tmp_path)
        if finished:
            w.sink.finalize()
        victim = w.interior_tiles()[-1]
        spans = self.spans_of(w, victim, finished=finished)
        assert spans
        path, start, end = spans[len(spans) // 2]
        _flip_a_byte(path, (start + end) // 2)
        resumed = w.open(resume=True)  # a new process, as after a restart
        failing = [t for t, es in w.entries.items() if not all(resumed.verify(e) for e in es)]
        assert failing == [victim.id]
        assert w.write(victim, resumed) == w.entries[victim.id]
        assert all(resumed.verify(e) for es in w.entries.values() for e in es)
        w.sink = resumed
        self.check_result(w, resumed.finalize(), pairs)

    def test_an_empty_space_finalizes_to_an_empty_result(self, tmp_path, make_sink):
        w = Written(make_sink, PairList([], 4, 5), 2, np.zeros((4, 5)), tmp_path)
        assert w.tiles == []
        self.check_result(w, w.sink.finalize(), [])
