"""The synthetic app's cheap compare (``kernels/synthetic.py``): its values against the app's
formula in int64 numpy, its top-k and threshold cells against a brute-force selection over the
full block (plain Python sort, ties to the lower index, floors applied), and whole runs of
``app=synthetic`` with no burnt cost (``compare_reduced``, packs) against the formula."""
from __future__ import annotations

import numpy as np
import pytest

from pairflow.kernels.synthetic import synthetic_block, synthetic_threshold, synthetic_topk


def formula(li, ri):
    return ((np.asarray(li, np.int64)[:, None] * 7919 + np.asarray(ri, np.int64)[None, :])
            % 1000).astype(np.float64)


def side(idx, packed):
    idx = np.asarray(idx, np.float64)
    return idx[:, None].copy() if packed else [np.full(3, x) for x in idx]


def brute_topk(vals, mask, k, largest, rows, cols, row_floor, col_floor):
    """(i, j, v, is_col) sorted: each row's / column's k best among allowed cells at least as
    good as its floor (NaN: none), by value then lower index."""
    sign = 1 if largest else -1
    out = []
    nr, nc = vals.shape
    for axis, do, floors in ((0, rows, row_floor), (1, cols, col_floor)):
        if not do:
            continue
        for a in range(nr if axis == 0 else nc):
            fl = None if floors is None or np.isnan(floors[a]) else floors[a]
            cells = []
            for b in range(nc if axis == 0 else nr):
                i, j = (a, b) if axis == 0 else (b, a)
                if mask is not None and not mask[i, j]:
                    continue
                v = vals[i, j]
                if fl is not None and sign * (v - fl) < 0:
                    continue
                cells.append((-sign * v, b, i, j))
            for _, _, i, j in sorted(cells)[:k]:
                out.append((int(i), int(j), float(vals[i, j]), axis == 1))
    return sorted(out)


@pytest.mark.parametrize("packed", [True, False])
def test_block_is_the_formula(packed):
    rng = np.random.default_rng(3)
    li = rng.integers(0, 3_000_000, 37)
    ri = np.concatenate([rng.integers(0, 3_000_000, 40), [0, 999, 1000, 2**31 + 5]])
    assert np.array_equal(synthetic_block(side(li, packed), side(ri, packed)), formula(li, ri))
    from pairflow.apps.synthetic import SyntheticApp
    got = synthetic_block(side(li[:3], packed), side(ri[:3], packed))
    assert got.tolist() == [[SyntheticApp.expected(i, j) for j in ri[:3]] for i in li[:3]]


@pytest.mark.parametrize("seed", range(8))
def test_topk_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    nr, nc = int(rng.integers(1, 70)), int(rng.integers(1, 600))
    li = rng.integers(0, 2_000_000, nr)
    ri = rng.integers(0, 2_000_000, nc)
    vals = formula(li, ri)
    kind = seed % 4
    if kind == 0:
        mask = None
    elif kind == 1:  # a diagonal tile's: i < j
        mask = np.arange(nr)[:, None] < np.arange(nc)[None, :]
    elif kind == 2:
        mask = rng.random((nr, nc)) < 0.7
    else:  # a full block seen through one True
        mask = np.broadcast_to(np.ones((1, 1), bool), (nr, nc))
    k = int(rng.integers(1, 12))
    largest = bool(seed % 3)
    rows, cols = [(True, True), (True, False), (False, True)][seed % 3]
    floors = []
    for n in (nr, nc):
        if seed % 2:
            f = rng.choice([np.nan, 990.0, 999.0, 500.0, 3.0, 0.0], n)
        else:
            f = None
        floors.append(f)
    i, j, v, c = synthetic_topk(side(li, seed % 2 == 0), side(ri, True), mask, k, largest,
                                rows, cols, row_floor=floors[0], col_floor=floors[1])
    got = sorted(zip(i.tolist(), j.tolist(), v.tolist(), c.tolist()))
    m = None if mask is None else np.asarray(mask)
    assert got == brute_topk(vals, m, k, largest, rows, cols, *floors)
    assert (vals[i, j] == v).all()


def test_threshold_cells():
    rng = np.random.default_rng(5)
    li, ri = rng.integers(0, 10**6, 30), rng.integers(0, 10**6, 50)
    vals = formula(li, ri)
    mask = rng.random((30, 50)) < 0.5
    for above, t in ((True, 700.0), (False, 40.0)):
        i, j, v = synthetic_threshold(side(li, True), side(ri, False), t, mask, above)
        want = [(a, b, vals[a, b]) for a in range(30) for b in range(50)
                if mask[a, b] and (vals[a, b] >= t if above else vals[a, b] <= t)]
        assert list(zip(i.tolist(), j.tolist(), v.tolist())) == want


@pytest.mark.parametrize("sink, packs", [("topk", True), ("topk", False), ("threshold", True),
                                         ("dense", True)])
def test_cheap_synthetic_runs_equal_the_formula(sink, packs, tmp_path, monkeypatch):
    """A run with no compare cost burnt: the compiled kernels (top-k and threshold straight
    from ``compare_reduced``), optionally packs, over several tiles; every result cell is the
    formula's, and the top-k is every item's 5 best of the whole run."""
    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs
    n = 90
    app = SyntheticApp(n, t_cmp=0.0, item_floats=1, packs=packs)
    calls = []  # tiles reduced by the kernel (in-process: one process sees every call)
    reduced = SyntheticApp.compare_reduced
    monkeypatch.setattr(SyntheticApp, "compare_reduced",
                        lambda self, *a: calls.append(1) or reduced(self, *a))
    opts = {"topk": {"k": 5}, "threshold": {"t": 900.0}, "dense": {}}[sink]
    res = allpairs(app=app, sink={"type": sink, **opts}, runs_root=str(tmp_path),
                   progress=False, wait=True, executor="inprocess", leaf_items=16)
    assert res.summary["tiles_total"] > 10
    assert len(calls) == (0 if sink == "dense" else res.summary["tiles_total"])
    full = formula(range(n), range(n))
    lo = np.minimum.outer(np.arange(n), np.arange(n))
    hi = np.maximum.outer(np.arange(n), np.arange(n))
    sym = ((lo * 7919 + hi) % 1000).astype(float)
    if sink == "dense":
        got = res.matrix()
        iu = np.triu_indices(n, 1)
        assert np.array_equal(got[iu], full[iu])
    elif sink == "threshold":
        e = res.edges
        got = sorted(zip(e.i.tolist(), e.j.tolist(), e.value.tolist()))
        assert got == [(i, j, full[i, j]) for i in range(n) for j in range(i + 1, n)
                       if full[i, j] >= 900]
    else:
        top = res.topk
        for q in range(n):
            want = sorted((j for j in range(n) if j != q), key=lambda j: (-sym[q, j], j))[:5]
            mine = top[top.qi == q].sort_values("rank")
            assert mine.ti.tolist() == want, q
            assert mine.score.tolist() == [sym[q, j] for j in want]
