"""Align's tile sizing on a thin rectangle (few queries x many targets): tiles are cut by the
weight budget, not by a square leaf (engine/pairs/plan/sizing.py, ``_leaf``).

Oracle: the tiles' weights summed from the lengths here, against the budget the plan records.
"""
from __future__ import annotations

import numpy as np

from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.plan.sizing import plan_run
from pairflow.engine.pairs.space import PairWeights, Rectangle

NODE = {"node_id": "n0", "address": "127.0.0.1", "head": True, "cpus": 2, "gpus": 0,
        "object_store": 2 * 10**9}


def _plan(n_rows, n_cols, seed=0):
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.integers(100, 600, n_rows)).astype(float)
    cols = np.sort(rng.integers(50, 900, n_cols)).astype(float)
    measured = {"t_pair": 2e-5, "t_parse": 1e-5, "item_bytes": 350.0}
    plan = plan_run(measured, Rectangle(n_rows, n_cols), PairWeights(rows, cols), [NODE],
                    AllPairsConfig(), items=ItemMap.disjoint(n_rows, n_cols),
                    probe_weight=300.0 ** 2)
    return plan, rows, cols


def test_thin_rectangle_tiles_fill_the_weight_budget():
    plan, rows, cols = _plan(40, 20_000)
    budget = plan.measured["max_weight"]
    covered = np.zeros((40, 20_000), np.int8)
    weights = []
    for t in plan.tiles:
        covered[t.r0:t.r1, t.c0:t.c1] += 1
        weights.append(rows[t.r0:t.r1].sum() * cols[t.c0:t.c1].sum())
    assert (covered == 1).all()                       # every pair once
    assert max(weights) <= budget * (1 + 1e-9)        # no tile over the budget
    # tiles are not held to a square leaf: the body tiles (all but the split tail) hold at
    # least a quarter of the budget on average, so the run is about total / budget tiles
    total = rows.sum() * cols.sum()
    assert len(plan.tiles) <= 8 * total / budget + 16


def _square_block(plan, rows, cols):
    """The side of a square block of mean pairs within 80 % of the budget."""
    mean_w = rows.sum() * cols.sum() / (len(rows) * len(cols))
    return (0.8 * plan.measured["max_weight"] / mean_w) ** 0.5


def test_the_leaf_grows_on_a_thin_rectangle_only():
    thin, rows, cols = _plan(40, 20_000)
    assert thin.leaf > _square_block(thin, rows, cols) + 1
    square, rows, cols = _plan(2_000, 2_000)
    assert square.leaf <= _square_block(square, rows, cols) + 1


def _strips(n_rows, n_cols, row_calls=True, seed=1, **cfg):
    rng = np.random.default_rng(seed)
    rows = rng.integers(250, 351, n_rows).astype(float)
    cols = rng.integers(250, 351, n_cols).astype(float)
    measured = {"t_pair": 1.25e-5, "t_parse": 1e-5, "item_bytes": 365.0}
    plan = plan_run(measured, Rectangle(n_rows, n_cols), PairWeights(rows, cols), [NODE],
                    AllPairsConfig(**cfg), items=ItemMap.disjoint(n_rows, n_cols),
                    probe_weight=300.0 ** 2, row_calls=row_calls)
    return plan, rows, cols


def test_row_calls_cut_strips_as_wide_as_the_space():
    """An app making a kernel call per row of a tile (Opal) gets strips of whole rows: every
    pair once, every tile every column, none over the budget, one call per row in all."""
    plan, rows, cols = _strips(400, 2_000)
    budget = plan.measured["max_weight"]
    covered = np.zeros((400, 2_000), np.int8)
    for t in plan.tiles:
        covered[t.r0:t.r1, t.c0:t.c1] += 1
        assert (t.c0, t.c1) == (0, 2_000)
        assert rows[t.r0:t.r1].sum() * cols.sum() <= budget * (1 + 1e-9)
        assert t.pairs == (t.r1 - t.r0) * 2_000
    assert (covered == 1).all()
    assert sum(t.r1 - t.r0 for t in plan.tiles) == 400   # a call per row, not per row and tile
    # the tail is split into row blocks: the last tiles are thinner than the first
    assert plan.tiles[-1].r1 - plan.tiles[-1].r0 < plan.tiles[0].r1 - plan.tiles[0].r0
    # without the hint, the same run gets square tiles: more calls per row
    square, _, _ = _strips(400, 2_000, row_calls=False)
    assert sum(t.r1 - t.r0 for t in square.tiles) > 400


def test_row_strips_cut_a_heavy_row_across_its_columns():
    from pairflow.engine.pairs.space import row_strips
    rows = np.array([1.0, 1.0, 50.0, 1.0])
    cols = np.ones(10)
    tiles = row_strips(Rectangle(4, 10), PairWeights(rows, cols), max_weight=20.0)
    covered = np.zeros((4, 10), np.int8)
    for t in tiles:
        covered[t.r0:t.r1, t.c0:t.c1] += 1
        assert rows[t.r0:t.r1].sum() * cols[t.c0:t.c1].sum() <= 20.0 or t.c1 - t.c0 == 1
    assert (covered == 1).all()
    # rows 0-1 one strip, row 2 (500) in pieces of 20 at most (one column: 50), row 3 alone
    assert [(t.r0, t.r1) for t in tiles if t.c1 - t.c0 == 10] == [(0, 2), (3, 4)]
    assert sum(1 for t in tiles if t.r0 == 2) == 10


def test_row_calls_keep_square_tiles_when_the_leaf_is_set():
    plan, _, _ = _strips(400, 2_000, leaf_items=100)
    assert max(t.c1 - t.c0 for t in plan.tiles) <= 100
