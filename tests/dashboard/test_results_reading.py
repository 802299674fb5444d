"""The results view's dense reader (dashboard/results_dense.py) on a real dense run (Jaccard of 24
loci, ``engine_runs["allpairs"]``), against an oracle written here from the files alone: zarr read
whole, tiles.json and journal.jsonl.

A live run is the same directory with its journal cut short (the tiles it has not named are
unfinished), and "any chunking" is the same matrix rewritten with chunks that fit no tile.
"""
from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

from pairflow.dashboard.results_dense import DenseResult


def _copy(run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run, tmp_path / "run"))


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def unfinished(run_dir: Path, shape: tuple[int, int]) -> np.ndarray:
    """Cells of planned tiles the journal does not name (and, for a triangle, their mirror)."""
    plan = {str(t["id"]): t for t in json.loads((run_dir / "tiles.json").read_text())}
    done = {str(e["tile"]) for e in _lines(run_dir / "journal.jsonl") if e.get("sink") == "dense"}
    tri = json.loads((run_dir / "meta.json").read_text())["space"]["type"] == "Triangle"
    mask = np.zeros(shape, bool)
    for tid, t in plan.items():
        if tid not in done:
            mask[t["r0"]:t["r1"], t["c0"]:t["c1"]] = True
            if tri:
                mask[t["c0"]:t["c1"], t["r0"]:t["r1"]] = True
    return mask


def oracle(run_dir: Path, field: str) -> np.ndarray:
    """The field with every unfinished cell NaN (an integer field's fill is 0, not missing)."""
    group = zarr.open_group(str(run_dir / "result" / "matrix.zarr"), mode="r")
    m = np.array(group[field][:], dtype=float)
    m[unfinished(run_dir, m.shape)] = np.nan
    return m


def _reader(run_dir: Path) -> DenseResult:
    d = DenseResult(run_dir)
    assert d.refresh(json.loads((run_dir / "tiles.json").read_text()), None, final=True)
    return d


def _cut_journal(run_dir: Path, keep: int) -> None:
    lines = (run_dir / "journal.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "journal.jsonl").write_text("".join(lines[:keep]))


def _rechunk(run_dir: Path, chunks: tuple[int, int]) -> None:
    """Rewrite matrix.zarr with ``chunks`` (same values, attributes and fill)."""
    path = run_dir / "result" / "matrix.zarr"
    old = zarr.open_group(str(path), mode="r")
    arrays = {name: (a[:], a.dtype, a.fill_value) for name, a in old.arrays()}
    attrs = dict(old.attrs)
    shutil.rmtree(path)
    new = zarr.open_group(str(path), mode="w", zarr_format=3)
    for name, (data, dtype, fill) in arrays.items():
        a = new.create_array(name, shape=data.shape, chunks=chunks, dtype=dtype, fill_value=fill)
        a[:] = data
    new.attrs.update(attrs)


def block_means(m: np.ndarray, f: int) -> np.ndarray:
    n0, n1 = m.shape
    out = np.full((math.ceil(n0 / f), math.ceil(n1 / f)), np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = np.nanmean(m[i * f:(i + 1) * f, j * f:(j + 1) * f])
    return out


@pytest.mark.parametrize("keep", [None, 7, 0])
@pytest.mark.parametrize("chunks", [None, (7, 5)])
def test_cells_blocks_and_missing_match_the_files(engine_runs, tmp_path, keep, chunks):
    run_dir = _copy(engine_runs["allpairs"], tmp_path)
    if keep is not None:
        _cut_journal(run_dir, keep)
    if chunks:
        _rechunk(run_dir, chunks)
    d = _reader(run_dir)
    assert d.fields == ["distance", "intersection", "similarity"]
    plan = json.loads((run_dir / "tiles.json").read_text())
    journaled = {str(e["tile"]) for e in _lines(run_dir / "journal.jsonl")}
    assert d.tiles() == (len(journaled), len(plan))
    for field in ("similarity", "intersection"):  # a float and an integer field (fill 0)
        want = oracle(run_dir, field)
        n = want.shape[0]
        assert d.missing_cells() == int(unfinished(run_dir, want.shape).sum())
        got = d.grid(field, max_side=n)  # whole field, cell by cell
        assert got.factor == 1
        np.testing.assert_array_equal(got.values, want)
        for side in (5, 10):  # block means of f x f (f = ceil(24 / side))
            g = d.grid(field, max_side=side)
            f = math.ceil(n / side)
            assert g.factor == f
            np.testing.assert_allclose(g.values, block_means(want, f), equal_nan=True)
        # a region larger than max_side: blocks of its size on the whole field's block grid
        g = d.grid(field, max_side=5, region=(3, 20, 5, 22))
        f = math.ceil(17 / 5)
        assert g.factor == f and g.r_edges[0] == 0 and g.c_edges[0] == f
        np.testing.assert_allclose(g.values, block_means(want, f)[0:5, 1:6], equal_nan=True)
        i, j = 3, n - 2
        got_cell = d.cell(field, i, j)
        assert (np.isnan(got_cell) and np.isnan(want[i, j])) or got_cell == want[i, j]
        edges, counts, cells = d.histogram(field)
        finite = want[np.isfinite(want)]
        assert cells == finite.size == counts.sum()
        if finite.size:
            assert edges[0] == finite.min() and edges[-1] == finite.max()


def test_a_live_reader_takes_tiles_in_as_the_journal_grows(engine_runs, tmp_path):
    """One reader kept across refreshes (as the server keeps it): its block grid, refreshed only
    where new tiles landed, equals a fresh computation at every step."""
    run_dir = _copy(engine_runs["allpairs"], tmp_path)
    full = (run_dir / "journal.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "journal.jsonl").write_text("")
    plan = json.loads((run_dir / "tiles.json").read_text())
    d = DenseResult(run_dir)
    d.refresh(plan, None)
    missing_before = None
    for upto in [*range(0, len(full), 5), len(full)]:
        (run_dir / "journal.jsonl").write_text("".join(full[:upto]))
        d.refresh(plan, None)
        want = oracle(run_dir, "similarity")
        np.testing.assert_allclose(d.grid("similarity", 6).values, block_means(want, 4), equal_nan=True)
        missing = d.missing_cells()
        assert missing_before is None or missing <= missing_before
        missing_before = missing
    assert d.tiles()[0] == d.tiles()[1]


def test_clustered_order_shows_the_field_in_that_order(engine_runs, tmp_path):
    """The clustered order permutes rows and columns (one order: the space is symmetric) and
    the grid, whole or a region, holds the field in that order."""
    run_dir = _copy(engine_runs["allpairs"], tmp_path)
    d = _reader(run_dir)
    want = oracle(run_dir, "similarity")
    g = d.grid("similarity", max_side=24, order="clustered")
    assert sorted(g.rows) == list(range(24)) and list(g.rows) == list(g.cols)
    np.testing.assert_array_equal(g.values, want[np.ix_(g.rows, g.cols)])
    region = d.grid("similarity", max_side=24, order="clustered", region=(2, 9, 4, 20))
    np.testing.assert_array_equal(region.values, want[np.ix_(g.rows[2:9], g.cols[4:20])])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clustering_puts_planted_groups_together(tmp_path, seed):
    """A matrix of planted groups (alike within, unlike across), its items shuffled: each
    group's items are contiguous in the clustered order, rows and columns alike."""
    rng = np.random.default_rng(seed)
    sizes = [5, 9, 3, 7]
    label = np.repeat(np.arange(len(sizes)), sizes)
    perm = rng.permutation(len(label))
    label = label[perm]
    m = np.where(label[:, None] == label[None, :], 0.9, 0.1) + rng.normal(0, 0.01, (len(label),) * 2)
    m = (m + m.T) / 2
    group = zarr.open_group(str(tmp_path / "result" / "matrix.zarr"), mode="w", zarr_format=3)
    a = group.create_array("x", shape=m.shape, chunks=(6, 6), dtype="f8", fill_value=np.nan)
    a[:] = m
    group.attrs.update({"space": {"type": "Triangle"}, "row_keys": [f"k{i}" for i in range(len(m))],
                        "col_keys": [f"k{i}" for i in range(len(m))]})
    d = DenseResult(tmp_path)
    assert d.refresh(None, None, final=True)
    rows, cols = d.order("x", max_side=100)
    for order in (rows, cols):
        seq = label[order]
        runs = 1 + int((seq[1:] != seq[:-1]).sum())
        assert runs == len(sizes), seq
