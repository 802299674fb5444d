"""Sinks written tile by tile (as the actors do) against a dense brute-force matrix; no Ray."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.pairs.sinks import DenseMatrix, SinkContext, Threshold, TopK
from pairflow.engine.pairs.space import PairList, Rectangle, Triangle, leaves


def run_sink(sink, space, leaf, values, tmp_path, fields=("value",)):
    keys_r = [f"r{i}" for i in range(space.n_rows)]
    keys_c = keys_r if space.symmetric else [f"c{j}" for j in range(space.n_cols)]
    ctx = SinkContext(str(tmp_path), space, leaf, keys_r, keys_c, {f: "float64" for f in fields})
    sink.open(ctx)
    entries = []
    for t in leaves(space, leaf):
        mask = space.mask(t.r0, t.r1, t.c0, t.c1)
        block = {f: values[t.r0:t.r1, t.c0:t.c1] for f in fields}
        entries += sink.write_tile(t, block, mask)
    assert all(sink.verify(e) for e in entries)
    return sink.finalize(), entries


@pytest.mark.parametrize("n,leaf", [(10, 3), (7, 7), (12, 1), (9, 4)])
def test_dense_triangle_mirrors_and_fills_the_diagonal(tmp_path, n, leaf):
    rng = np.random.default_rng(n)
    v = rng.random((n, n))
    v = np.triu(v, 1) + np.triu(v, 1).T
    sink = DenseMatrix(diagonal=1.0)
    path, _ = run_sink(sink, Triangle(n), leaf, v, tmp_path)
    import zarr
    got = zarr.open_group(path, mode="r")["value"][...]
    expected = v.copy()
    np.fill_diagonal(expected, 1.0)
    assert np.array_equal(got, expected)
    import dask.array as da
    assert np.array_equal(da.from_zarr(f"{path}/value").compute(), expected)


def test_dense_rectangle_and_crc_detects_a_flipped_byte(tmp_path):
    v = np.arange(5 * 8, dtype=float).reshape(5, 8)
    sink = DenseMatrix()
    _, entries = run_sink(sink, Rectangle(5, 8), 2, v, tmp_path)
    import zarr
    assert np.array_equal(zarr.open_group(sink.path, mode="r")["value"][...], v)
    sink2 = DenseMatrix()
    sink2.ctx = sink.ctx
    sink2.filename = sink.filename
    # reopen the finished array under its partial name to check verification
    import os
    os.replace(sink.path, sink.partial)
    arr = zarr.open_group(sink.partial, mode="r+")["value"]
    arr[0, 0] = -1.0
    sink2._arrays = None
    flags = [sink2.verify(e) for e in entries]
    assert flags.count(False) == 1


def test_topk_equals_a_brute_force_sort(tmp_path):
    n = 17
    rng = np.random.default_rng(1)
    v = rng.integers(0, 5, (n, n)).astype(float)  # many ties
    v = np.triu(v, 1) + np.triu(v, 1).T
    sink = TopK(3)
    path, _ = run_sink(sink, Triangle(n), 4, v, tmp_path)
    got = pd.read_parquet(path)
    for q in range(n):
        cands = sorted(((-v[q, t], t) for t in range(n) if t != q))[:3]
        rows = got[got.qi == q]
        assert list(rows.ti) == [t for _, t in cands], q
        assert list(rows["rank"]) == [1, 2, 3]
    assert set(got.columns) >= {"query", "target", "score", "rank"}
    # the keys come back as plain strings (stored dictionary-encoded), one per row
    assert list(got["query"]) == [f"r{q}" for q in got.qi]
    assert list(got["target"]) == [f"r{t}" for t in got.ti]
    assert all(type(x) is str for x in got["query"]) and got["query"].dtype != "category"
    # in the file: the keys dictionary-encoded, min / max kept for the numeric columns (what a
    # reader filters a top-k by), as pyarrow reads the file's own metadata
    import pyarrow.parquet as pq
    meta = pq.ParquetFile(path).metadata.row_group(0)
    chunks = {meta.column(c).path_in_schema: meta.column(c) for c in range(meta.num_columns)}
    assert "RLE_DICTIONARY" in chunks["query"].encodings
    score = chunks["score"].statistics
    assert score.has_min_max and (score.min, score.max) == (got.score.min(), got.score.max())


def test_threshold_edges_and_pairlist(tmp_path):
    n = 12
    v = np.add.outer(np.arange(n), np.arange(n)).astype(float)
    space = PairList([(0, 5), (3, 4), (11, 2), (7, 7)], n_rows=n, n_cols=n)
    path, _ = run_sink(Threshold(8), space, 4, v, tmp_path)
    got = pd.read_parquet(path)
    assert list(zip(got.i, got.j)) == [(7, 7), (11, 2)]
    assert list(got.value) == [14.0, 13.0]


def test_rewriting_a_tile_is_idempotent(tmp_path):
    v = np.ones((6, 6))
    sink = DenseMatrix()
    keys = [str(i) for i in range(6)]
    sink.open(SinkContext(str(tmp_path), Rectangle(6, 6), 3, keys, keys, {"value": "float64"}))
    t = leaves(Rectangle(6, 6), 3)[0]
    mask = np.ones((3, 3), bool)
    a = sink.write_tile(t, {"value": v[:3, :3]}, mask)
    b = sink.write_tile(t, {"value": v[:3, :3]}, mask)
    assert a == b


@settings(derandomize=True, max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9), st.integers(-3, 3)),
                max_size=60),
       st.integers(1, 4), st.booleans(), st.sampled_from(["int32", "float64", "uint8"]))
def test_topk_select_equals_a_brute_force_sort(rows, k, largest, dtype):
    q = np.array([r[0] for r in rows], dtype=np.int64)
    t = np.array([r[1] for r in rows], dtype=np.int64)
    v = np.array([r[2] + (3 if dtype == "uint8" else 0) for r in rows], dtype=dtype)
    sink = TopK(k, largest=largest)
    gq, gt, gv, rank = sink._select(q, t, v)
    want = []
    for qi in sorted(set(q.tolist())):
        mine = [(float(vv), int(tt)) for qq, tt, vv in zip(q, t, v) if qq == qi]
        mine.sort(key=lambda x: ((-x[0]) if largest else x[0], x[1]))
        want += [(qi, tt, vv, r + 1) for r, (vv, tt) in enumerate(mine[:k])]
    got = list(zip(gq.tolist(), gt.tolist(), [float(x) for x in gv], rank.tolist()))
    assert got == want


@settings(derandomize=True, max_examples=150, deadline=None)
@given(st.integers(1, 7), st.integers(1, 12), st.integers(1, 5), st.booleans(),
       st.sampled_from(["int16", "float32", "uint8"]), st.integers(0, 2**31))
def test_topk_row_candidates_keep_every_rows_k_best(rows, cols, k, largest, dtype, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, (rows, cols)).astype(dtype)  # many ties at the k-th place
    sink = TopK(k, largest=largest)
    mask = np.ones((rows, cols), bool)
    qa, ta = np.nonzero(mask)
    want = sink._select(qa, ta, values[qa, ta])
    cand = sink._row_candidates(values, mask)
    if cols <= k:
        assert cand is None
        return
    qc, tc = cand
    got = sink._select(qc, tc, values[qc, tc])
    for w, g in zip(want, got):
        assert np.array_equal(w, g)


def test_parts_of_different_dtypes_merge_and_a_short_part_is_refused(tmp_path):
    """Tiles whose values came as integers in one tile and floats in another still merge (as
    ``np.concatenate`` promotes them); a part cut shorter than its header says is an error,
    not a silent short read."""
    space, leaf = Triangle(6), 3
    v = np.arange(36, dtype=float).reshape(6, 6)
    v = np.triu(v, 1) + np.triu(v, 1).T
    sink = Threshold(10.0)
    ctx = SinkContext(str(tmp_path), space, leaf, [f"r{i}" for i in range(6)],
                      [f"r{i}" for i in range(6)], {"value": "float64"})
    sink.open(ctx)
    tiles = leaves(space, leaf)
    for n, t in enumerate(tiles):
        block = v[t.r0:t.r1, t.c0:t.c1]
        sink.write_tile(t, {"value": block.astype(np.int64) if n % 2 else block},
                        space.mask(t.r0, t.r1, t.c0, t.c1))
    got = pd.read_parquet(sink.finalize())
    i, j = np.triu_indices(6, 1)
    keep = v[i, j] >= 10.0
    assert list(zip(got["i"], got["j"], got["value"])) == \
        list(zip(i[keep], j[keep], v[i, j][keep]))
    # the same tiles all as floats, then the largest part loses its last value
    out = tmp_path / "floats"
    out.mkdir()
    sink = Threshold(10.0)
    sink.open(SinkContext(str(out), space, leaf, ctx.row_keys, ctx.col_keys, ctx.fields))
    for t in tiles:
        sink.write_tile(t, {"value": v[t.r0:t.r1, t.c0:t.c1]},
                        space.mask(t.r0, t.r1, t.c0, t.c1))
    part = max((out / "edges.parquet.parts").iterdir(), key=lambda f: f.stat().st_size)
    part.write_bytes(part.read_bytes()[:-8])
    with pytest.raises(OSError, match="shorter than its header"):
        sink.finalize()


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.integers(1, 4), st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9),
                                                      st.sampled_from([0.0, 0.25, 0.5, 1.0])),
                                            max_size=25), min_size=1, max_size=5),
       st.booleans())
def test_merging_runs_ordered_by_query_equals_a_sort(k, runs, largest):
    """``topk_merge_runs`` (the final merge of the TopK parts, each ordered by query) against
    a lexsort of all candidates by (query, value, target): same rows, ranks and ties; a run
    out of query order is refused, not merged wrongly."""
    from pairflow.engine.pairs.sinks.topk_passes import topk_merge_runs
    runs = [sorted(r, key=lambda c: c[0]) for r in runs]
    cand = [c for r in runs for c in r]
    q = np.array([c[0] for c in cand], np.int64)
    t = np.array([c[1] for c in cand], np.int64)
    v = np.array([c[2] for c in cand], float)
    starts = np.r_[0, np.cumsum([len(r) for r in runs])].astype(np.int64)
    sign = 1.0 if largest else -1.0
    gq, gt, gx, grank, ok = topk_merge_runs(q, t, v, starts, k, sign)
    assert ok
    order = np.lexsort((t, -sign * v, q))  # stable: equal candidates keep input order
    keep = [x for n, x in enumerate(order)
            if sum(q[y] == q[x] for y in order[:n]) < k]
    assert list(gx) == keep and list(gq) == list(q[keep]) and list(gt) == list(t[keep])
    ranks = [sum(q[y] == q[x] for y in keep[:n]) + 1 for n, x in enumerate(keep)]
    assert list(grank) == ranks
    if len(runs[0]) > 1 and runs[0][0][0] != runs[0][-1][0]:
        back = starts.copy()
        q2 = q.copy()
        q2[:len(runs[0])] = q2[:len(runs[0])][::-1]  # the first run, queries descending
        assert not topk_merge_runs(q2, t, v, back, k, sign)[4]


@settings(derandomize=True, max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(0, 2**32 - 1), st.booleans())
def test_unordered_candidates_select_as_a_sort_does(k, seed, largest):
    """Candidates in no order by query (more runs than ``MERGE_RUNS_MAX``: grouped by query
    first) against a lexsort by (query, value, target): the same rows and ranks."""
    rng = np.random.default_rng(seed)
    n = 400
    q = rng.integers(0, 30, n)
    t = rng.integers(0, 50, n)
    v = rng.choice([0.0, 0.5, 1.0, 2.0], n)  # ties on purpose
    sink = TopK(k, largest=largest)
    assert np.sum(q[1:] < q[:-1]) >= sink.MERGE_RUNS_MAX
    gq, gt, gv, grank = sink._select(q, t, v)
    order = np.lexsort((t, -v if largest else v, q))
    sq, st_, sv = q[order], t[order], v[order]
    rank = np.array([np.sum(sq[:m] == sq[m]) for m in range(n)]) + 1
    keep = rank <= k
    assert list(gq) == list(sq[keep]) and list(gv) == list(sv[keep])
    assert list(grank) == list(rank[keep])
    # a target is decided by value, then by lower index: equal (query, value) keep t order
    assert list(gt) == list(st_[keep])
