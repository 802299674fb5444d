"""Tiles reduced in the kernel (``compare_reduced``: a sink's top-k or threshold kept while the
tile is computed) against brute force over Python k-mer sets, and against the sinks' own pass
over the full fields (the same bytes); no Ray."""
from __future__ import annotations

import os
import random

import numpy as np
import pandas as pd
import pytest

from pairflow.apps.jaccard import JaccardApp
from pairflow.engine.pairs.sinks import (SinkContext, Threshold, ThresholdReduction, TileCandidates, TopK,
                                TopKReduction)
from pairflow.engine.pairs.space import Rectangle, Tile, Triangle, leaves
from pairflow.kernels.bitset import bitset_jaccard_threshold, bitset_jaccard_topk, kmer_bitsets
from tests.conftest import need
from tests.oracles import READS, jaccard, kmer_set


def _reads(n: int, seed: int, length=(0, 30)) -> list[str]:
    """Short random reads over a small alphabet: many equal J values (ties at the k-th place),
    empty sets (an N in every window) and duplicates."""
    rng = random.Random(seed)
    out = ["".join(rng.choice("ACGTN") for _ in range(rng.randrange(*length)))
           for _ in range(n)]
    return out + out[: n // 5]


def _brute_topk(sets_a, sets_b, mask, k, largest, rows, cols):
    """Each row's / column's k best (i, j) by J (largest or smallest), ties to the lower index,
    from a sort of every allowed pair."""
    want = set()
    sgn = -1 if largest else 1
    cells = [(i, j, jaccard(a, b)) for i, a in enumerate(sets_a) for j, b in enumerate(sets_b)
             if mask[i, j]]
    if rows:
        for i in range(len(sets_a)):
            mine = sorted((sgn * v, j) for ii, j, v in cells if ii == i)[:k]
            want |= {(i, j, False) for _, j in mine}
    if cols:
        for j in range(len(sets_b)):
            mine = sorted((sgn * v, i) for i, jj, v in cells if jj == j)[:k]
            want |= {(i, j, True) for _, i in mine}
    return want


@pytest.mark.parametrize("count", ["dense", "sparse"])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("kk", [1, 3, 10])
@pytest.mark.parametrize("largest", [True, False])
def test_kernel_topk_equals_a_sort_of_every_pair(seed, kk, largest, count):
    k = 3
    left, right = _reads(40, seed), _reads(33, seed + 100)
    a, b = kmer_bitsets([s.encode() for s in left], k), kmer_bitsets([s.encode() for s in right], k)
    sa, sb = [kmer_set(s, k) for s in left], [kmer_set(s, k) for s in right]
    rng = np.random.default_rng(seed)
    masks = [None, rng.random((len(a), len(b))) < 0.7,
             np.arange(len(a))[:, None] < np.arange(len(b))[None, :]]
    for mask in masks:
        m = np.ones((len(a), len(b)), bool) if mask is None else mask
        for rows, cols in ((True, True), (True, False), (False, True)):
            i, j, v, col = bitset_jaccard_topk(a, b, mask, kk, largest, rows, cols,
                                               count=count)
            assert set(zip(i.tolist(), j.tolist(), col.tolist())) == \
                _brute_topk(sa, sb, m, kk, largest, rows, cols)
            assert len(set(zip(i.tolist(), j.tolist(), col.tolist()))) == len(i)
            for ii, jj, vv in zip(i, j, v):
                assert vv == jaccard(sa[ii], sb[jj])  # the same double as the full matrix's


def _brute_topk_floored(sets_a, sets_b, mask, k, largest, row_floor, col_floor):
    """Each row's / column's k best (i, j) among its cells at least as good as its floor
    (NaN: no floor), ties to the lower index, from a sort of every allowed pair."""
    sgn = -1 if largest else 1
    cells = [(i, j, jaccard(a, b)) for i, a in enumerate(sets_a) for j, b in enumerate(sets_b)
             if mask[i, j]]

    def ok(v, f):
        return np.isnan(f) or (v >= f if largest else v <= f)
    want = set()
    for i in range(len(sets_a)):
        mine = sorted((sgn * v, j) for ii, j, v in cells if ii == i and ok(v, row_floor[i]))
        want |= {(i, j, False) for _, j in mine[:k]}
    for j in range(len(sets_b)):
        mine = sorted((sgn * v, i) for i, jj, v in cells if jj == j and ok(v, col_floor[j]))
        want |= {(i, j, True) for _, i in mine[:k]}
    return want


@pytest.mark.parametrize("count", ["dense", "sparse"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("largest", [True, False])
def test_kernel_topk_with_floors_keeps_the_k_best_at_least_as_good_as_each_floor(seed, largest,
                                                                                 count):
    k, kk = 3, 3
    left, right = _reads(40, seed), _reads(33, seed + 100)
    a, b = kmer_bitsets([s.encode() for s in left], k), kmer_bitsets([s.encode() for s in right], k)
    sa, sb = [kmer_set(s, k) for s in left], [kmer_set(s, k) for s in right]
    rng = np.random.default_rng(seed)
    # floors drawn from the tile's own J values (ties at the floor are kept), some absent
    values = sorted({jaccard(x, y) for x in sa for y in sb})
    row_floor = rng.choice(values, len(a))
    col_floor = rng.choice(values, len(b))
    row_floor[rng.random(len(a)) < 0.3] = np.nan
    col_floor[rng.random(len(b)) < 0.3] = np.nan
    mask = rng.random((len(a), len(b))) < 0.8
    i, j, v, col = bitset_jaccard_topk(a, b, mask, kk, largest, True, True, count=count,
                                       row_floor=row_floor, col_floor=col_floor)
    assert set(zip(i.tolist(), j.tolist(), col.tolist())) == \
        _brute_topk_floored(sa, sb, mask, kk, largest, row_floor, col_floor)
    with pytest.raises(ValueError, match="row_floor has shape"):
        bitset_jaccard_topk(a, b, mask, kk, largest, True, True, row_floor=row_floor[:-1])


@pytest.mark.parametrize("largest", [True, False])
def test_floors_from_earlier_tiles_keep_the_whole_runs_top_k(largest, tmp_path):
    """Tiles reduced one after another, as a device actor does, each with the floors the sink
    learnt from the tiles before: the merged top-k equals a sort of every pair, and the floors
    made later tiles keep fewer candidates."""
    k, kk, n, leaf = 3, 4, 150, 30
    reads = _reads(n, 5, length=(0, 14))[:n]
    bits = kmer_bitsets([s.encode() for s in reads], k)
    sets = [kmer_set(s, k) for s in reads]
    space = Triangle(n)
    keys = [f"r{x}" for x in range(n)]
    sink = TopK(kk, field="similarity", largest=largest)
    sink.open(SinkContext(str(tmp_path), space, leaf, keys, keys, {"similarity": "float64"}))
    kept = unfloored = 0
    for tile in leaves(space, leaf):
        mask = space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        red = sink.tile_reduction(tile, sink.reduction())
        args = (bits[tile.r0:tile.r1], bits[tile.c0:tile.c1], mask, red.k, red.largest,
                red.rows, red.cols)
        i, j, v, col = bitset_jaccard_topk(*args, row_floor=red.row_floor,
                                           col_floor=red.col_floor)
        kept += len(i)
        unfloored += len(bitset_jaccard_topk(*args)[0])
        sink.write_reduced(tile, TileCandidates(i, j, v, col))
    sink.before_finalize()
    got = pd.read_parquet(sink.finalize())
    sgn = -1 if largest else 1
    for x in range(n):
        mine = sorted((sgn * jaccard(sets[x], sets[y]), y) for y in range(n) if y != x)[:kk]
        row = got[got.qi == x].sort_values("rank")
        assert row.ti.tolist() == [y for _, y in mine]
        assert row.score.tolist() == [sgn * v for v, _ in mine]
    assert kept <= unfloored
    if largest:  # (the smallest J of these reads is a 0 that most pairs tie at: all kept)
        assert kept < 0.8 * unfloored


@pytest.mark.parametrize("count", ["dense", "sparse"])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("above,t", [(True, 0.25), (False, 0.1), (True, 0.0), (True, 1.0)])
def test_kernel_threshold_equals_every_passing_pair_in_row_order(seed, above, t, count):
    k = 3
    left, right = _reads(60, seed), _reads(50, seed + 7)
    a, b = kmer_bitsets([s.encode() for s in left], k), kmer_bitsets([s.encode() for s in right], k)
    sa, sb = [kmer_set(s, k) for s in left], [kmer_set(s, k) for s in right]
    mask = np.random.default_rng(seed).random((len(a), len(b))) < 0.8
    i, j, v = bitset_jaccard_threshold(a, b, t, mask, above, count=count)
    want = [(x, y, jaccard(p, q)) for x, p in enumerate(sa) for y, q in enumerate(sb)
            if mask[x, y] and (jaccard(p, q) >= t if above else jaccard(p, q) <= t)]
    assert list(zip(i.tolist(), j.tolist(), v.tolist())) == want


def _tile_payloads(app, sink, space, tile, items):
    """(the sink's part from the full fields, its part from the app's reduced tile)."""
    left, right = items[tile.r0:tile.r1], items[tile.c0:tile.c1]
    mask = space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
    fields = app.postprocess(app.compare(left, right, mask, "cpu"), tile, mask)
    found = app.compare_reduced(left, right, mask, "cpu", [sink.reduction()])
    assert found is not None and isinstance(found[0], TileCandidates)
    return sink.encode_tile(tile, fields, mask), sink.encode_reduced(tile, found[0])


@pytest.mark.parametrize("k", [5, 7])
def test_reduced_tiles_of_real_reads_write_the_same_bytes(k, tmp_path):
    path = os.path.join(READS, "reads_1.fq.gz")
    need(path)
    app = JaccardApp([path], k=k, item="record", kernel="bitset")
    keys = app.keys()[:700]
    items = [app.parse(key, None) for key in keys]
    for space, tiles in ((Triangle(len(keys)), [Tile(0, 0, 300, 0, 300, 0),
                                                 Tile(1, 0, 300, 300, 700, 0)]),
                         (Rectangle(300, 400), [Tile(2, 0, 300, 0, 400, 0)])):
        if isinstance(space, Rectangle):
            sides = items[:300] + items[300:700]
            tile_items = sides
        else:
            tile_items = items
        sinks = [TopK(10, field="similarity"), TopK(4, field="similarity", largest=False),
                 TopK(3, field="similarity", per="col"), Threshold(0.2, field="similarity"),
                 Threshold(0.05, field="similarity", above=False)]
        for sink in sinks:
            sink.open(SinkContext(str(tmp_path / sink.name), space, 300, keys, keys,
                                  app.fields()))
            for tile in tiles:
                if isinstance(space, Rectangle):  # columns are the items after the rows
                    tile = Tile(tile.id, 0, 300, 300, 700, 0)
                    full, reduced = _rect_payloads(app, sink, tile_items)
                else:
                    full, reduced = _tile_payloads(app, sink, space, tile, tile_items)
                assert full == reduced, (type(sink).__name__, sink.reduction(), tile)


def _rect_payloads(app, sink, items):
    left, right = items[:300], items[300:700]
    tile = Tile(0, 0, 300, 0, 400, 300 * 400)
    mask = np.ones((300, 400), bool)
    fields = app.postprocess(app.compare(left, right, mask, "cpu"), tile, mask)
    found = app.compare_reduced(left, right, mask, "cpu", [sink.reduction()])
    return sink.encode_tile(tile, fields, mask), sink.encode_reduced(tile, found[0])


def test_reductions_say_what_each_sink_keeps(tmp_path):
    tri, rect = Triangle(5), Rectangle(3, 4)
    for space, per, rows, cols in ((tri, "row", True, True), (tri, "col", True, True),
                                   (rect, "row", True, False), (rect, "col", False, True)):
        sink = TopK(2, field="x", largest=False, per=per)
        sink.open(SinkContext(str(tmp_path / f"{per}{space.symmetric}"), space, 2,
                              [f"r{i}" for i in range(space.n_rows)],
                              [f"c{j}" for j in range(space.n_cols)], {"x": "float64"}))
        assert sink.reduction() == TopKReduction("x", 2, False, rows, cols)
    assert Threshold(0.5, field="x", above=False).reduction() == \
        ThresholdReduction("x", 0.5, False)


def test_the_app_declines_what_its_kernel_cannot_keep(tmp_path):
    path = tmp_path / "r.fq"
    path.write_text("@a\nACGTACGTAA\n+\nIIIIIIIIII\n@b\nACGTTCGTAA\n+\nIIIIIIIIII\n")
    bits = JaccardApp([str(path)], k=3, item="record", kernel="bitset")
    merge = JaccardApp([str(path)], k=3, item="record", kernel="merge")
    top = TopKReduction("similarity", 1, True, True, True)
    one = [bits.parse(key, None) for key in bits.keys()]
    mask = np.ones((2, 2), bool)
    (kept,) = bits.compare_reduced(one, one, mask, "cpu", [top])
    reads = ["ACGTACGTAA", "ACGTTCGTAA"]
    want = [[jaccard(kmer_set(a, 3), kmer_set(b, 3)) for b in reads] for a in reads]
    assert isinstance(kept, TileCandidates) and len(kept.i) > 0
    assert kept.values.tolist() == [want[i][j] for i, j in zip(kept.i, kept.j)]
    assert bits.compare_reduced(one, one, mask, "cpu",
                                [TopKReduction("distance", 1, True, True, True)]) is None
    two = [merge.parse(key, None) for key in merge.keys()]
    assert merge.compare_reduced(two, two, mask, "cpu", [top]) is None
