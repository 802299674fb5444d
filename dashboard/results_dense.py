"""Reading a run's dense result (``result/matrix.zarr``, one array per field) for the results view.

No Streamlit and nothing of pairflow: zarr and dask read the arrays, whatever their chunking (a
chunk may hold one tile or many; nothing here assumes either), and the journal says which tiles
are finished. The rules:

* **Missing, not zero.** A cell inside a planned tile (``tiles.json``; for a ``Triangle`` also
  the mirrored region, which the sink writes too) that ``journal.jsonl`` has not yet named is
  missing (NaN), whatever the array holds there (its fill value, 0 for an integer field). Cells
  outside every tile (a 1x1 diagonal block of a triangle) hold what the sink wrote at start.
* **Big matrices by blocks.** Above ``max_side`` items a side, the heatmap shows the mean of
  f x f blocks of the finished cells, f = ceil(n / max_side) (one dask task per stored chunk
  sums and counts its cells by block: ``_chunk_sums``); a region zoomed to at most
  ``max_side`` items a side is read cell by cell. The block grid is kept per field and factor and
  only the blocks that newly finished tiles touch are read again, so a live run's refresh reads
  what changed, not the matrix.
* **Order.** Rows and columns may be ordered by average-linkage clustering (scipy) of their
  profiles (Euclidean distance between rows of the field, missing cells as the column mean): of
  the cells themselves up to ``CLUSTER_MAX`` items, of the block grid beyond.
"""
from __future__ import annotations

import math
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pairflow.dashboard.results_staged import StagedTiles
from pairflow.dashboard.rundir import JsonlTailer

DEFAULT_SIDE = 120  # heatmap cells a side unless the page asks for another
CLUSTER_MAX = 3000  # items a side clustered cell by cell; beyond, the block grid is clustered
HIST_BINS = 60


def find_matrix(result_dir: Path) -> Path | None:
    """``matrix.zarr`` once the run finished, ``matrix.zarr.partial`` while it writes (a zarr
    group: its ``zarr.json`` exists)."""
    for name in ("matrix.zarr", "matrix.zarr.partial"):
        p = result_dir / name
        if (p / "zarr.json").is_file():
            return p
    return None


@dataclass
class Grid:
    """A heatmap's cells: ``values[i, j]`` covers rows ``r_edges[i]:r_edges[i+1]`` of the shown
    order and columns ``c_edges[j]:c_edges[j+1]``; ``factor`` items a side per cell (1: cells)."""
    values: np.ndarray
    factor: int
    r_edges: np.ndarray
    c_edges: np.ndarray
    rows: np.ndarray  # item index of each shown row position (the order)
    cols: np.ndarray


@dataclass
class _BlockCache:
    values: np.ndarray
    stale: set = field(default_factory=set)  # (block row, block col) to read again


class DenseResult:
    """One run directory's dense matrix; shared by the dashboard's sessions (thread-safe)."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._lock = threading.RLock()
        self._journal = JsonlTailer(self.run_dir / "journal.jsonl")
        self._finished: set = set()  # tile ids journaled by the dense sink
        self._plan: dict = {}  # tile id -> (r0, r1, c0, c1)
        self._plan_version = None
        self._path: Path | None = None
        self._staged: StagedTiles | None = None  # a live run's tiles (the chunks are written at the end)
        self._group = None
        self._blocks: dict = {}  # (field, factor) -> _BlockCache
        self._memo: dict = {}  # small derived results keyed by what they depend on
        self.symmetric = False
        self._resets = 0
        self.generation = 0  # bumps when the finished set or the arrays change

    # ------------------------------------------------------------------ refresh

    def refresh(self, plan: list[dict] | None, space: dict | None, final: bool = False) -> bool:
        """Take in the plan (tiles.json rows), newly journaled tiles and a moved array (the
        ``.partial`` renamed at the end). Returns whether there is a matrix to show."""
        with self._lock:
            path = find_matrix(self.run_dir / "result")
            if path != self._path:
                self._path, self._group = path, None
                self._staged = StagedTiles(path.with_name(path.name[:-len(".partial")] + ".tiles.partial")) \
                    if path is not None and path.name.endswith(".partial") else None
                self._blocks.clear()
                self._memo.clear()
                self.generation += 1
            if path is None:
                return False
            if self._group is None:
                import zarr
                self._group = zarr.open_group(str(path), mode="r")
            space = space or dict(self._group.attrs.get("space") or {})
            self.symmetric = space.get("type") == "Triangle"
            if plan is not None and len(plan) != len(self._plan):
                self._plan = {str(t["id"]): (int(t["r0"]), int(t["r1"]), int(t["c0"]), int(t["c1"]))
                              for t in plan if all(k in t for k in ("id", "r0", "r1", "c0", "c1"))}
                self._mark_all_stale()
            recs = self._journal.poll(final=final)
            if self._staged is not None:  # after the journal: a journaled tile is staged already
                self._staged.poll()
            if self._journal.resets != self._resets:  # journal replaced: a new run here
                self._resets = self._journal.resets
                self._finished.clear()
                self._blocks.clear()
                self.generation += 1
            new = []
            for rec in recs:
                if rec.get("sink") != "dense" or "tile" not in rec:
                    continue
                tid = str(rec["tile"])
                if tid not in self._finished:
                    self._finished.add(tid)
                    reg = rec.get("region")
                    if tid not in self._plan and isinstance(reg, list) and len(reg) == 4:
                        self._plan[tid] = tuple(int(x) for x in reg)
                    new.append(tid)
            if new:
                self.generation += 1
                for tid in new:
                    self._mark_stale(self._plan.get(tid))
            return True

    def _regions(self, tid) -> list:
        reg = self._plan.get(tid)
        if reg is None:
            return []
        out = [reg]
        r0, r1, c0, c1 = reg
        if self.symmetric and (r0, r1) != (c0, c1):
            out.append((c0, c1, r0, r1))
        return out

    def _unfinished_regions(self) -> np.ndarray:
        regs = [r for tid in self._plan if tid not in self._finished for r in self._regions(tid)]
        return np.array(regs, dtype=np.int64).reshape(-1, 4)

    def _mark_stale(self, reg) -> None:
        if reg is None:
            return
        r0, r1, c0, c1 = reg
        for (fname, f), cache in self._blocks.items():
            for a0, a1, b0, b1 in [(r0, r1, c0, c1)] + ([(c0, c1, r0, r1)] if self.symmetric else []):
                for bi in range(a0 // f, (a1 - 1) // f + 1):
                    for bj in range(b0 // f, (b1 - 1) // f + 1):
                        cache.stale.add((bi, bj))

    def _mark_all_stale(self) -> None:
        self._blocks.clear()

    # ------------------------------------------------------------------ facts

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def fields(self) -> list[str]:
        with self._lock:
            if self._group is None:
                return []
            return sorted(name for name, _ in self._group.arrays())

    def array(self, name: str):
        return self._group[name]

    @property
    def shape(self) -> tuple[int, int]:
        f = self.fields
        return tuple(self.array(f[0]).shape) if f else (0, 0)

    def keys(self) -> tuple[list, list]:
        a = dict(self._group.attrs) if self._group is not None else {}
        n_rows, n_cols = self.shape
        rows = list(a.get("row_keys") or range(n_rows))
        cols = list(a.get("col_keys") or range(n_cols))
        return [str(k) for k in rows], [str(k) for k in cols]

    def tiles(self) -> tuple[int, int]:
        """(finished, planned) tiles."""
        with self._lock:
            return len(self._finished & set(self._plan)), len(self._plan)

    def missing_cells(self) -> int:
        """Cells of planned tiles the journal has not named yet (each cell once)."""
        with self._lock:
            regs = self._unfinished_regions()
            if not len(regs):
                return 0
            n_rows, n_cols = self.shape
            mask = np.zeros((n_rows, n_cols), bool) if n_rows * n_cols <= 50_000_000 else None
            if mask is None:  # regions of one plan do not overlap, nor do a triangle's mirrors
                return int(((regs[:, 1] - regs[:, 0]) * (regs[:, 3] - regs[:, 2])).sum())
            for r0, r1, c0, c1 in regs:
                mask[r0:r1, c0:c1] = True
            return int(mask.sum())

    # ------------------------------------------------------------------ reading

    def _dask(self, name: str):
        import dask.array as da
        arr = self.array(name)
        return da.from_zarr(arr).astype(np.float64)

    def _masked(self, x, a0: int, b0: int):
        """``x`` (a dask slab whose top-left cell is (a0, b0)) with unfinished cells NaN."""
        regs = self._unfinished_regions()
        if not len(regs):
            return x

        def mask_block(block, block_info=None):
            (r0, _), (c0, _) = block_info[0]["array-location"]
            r0, c0 = r0 + a0, c0 + b0
            r1, c1 = r0 + block.shape[0], c0 + block.shape[1]
            hit = regs[(regs[:, 0] < r1) & (regs[:, 1] > r0) & (regs[:, 2] < c1) & (regs[:, 3] > c0)]
            if not len(hit):
                return block
            block = block.copy()
            for g0, g1, h0, h1 in hit:
                block[max(g0, r0) - r0:min(g1, r1) - r0, max(h0, c0) - c0:min(h1, c1) - c0] = np.nan
            return block
        return x.map_blocks(mask_block, dtype=np.float64)

    def _block_means(self, name: str, f: int, bi0: int, bi1: int, bj0: int, bj1: int) -> np.ndarray:
        """Means of blocks [bi0, bi1) x [bj0, bj1) of side f: each chunk of the array (as zarr
        stores it, however it is cut) is reduced to its blocks' sums and counts by one dask
        task, and the parts are added up (no rechunking to the blocks, which copied the matrix)."""
        import dask
        n_rows, n_cols = self.shape
        a0, a1 = bi0 * f, min(bi1 * f, n_rows)
        b0, b1 = bj0 * f, min(bj1 * f, n_cols)
        x = self._dask(name)[a0:a1, b0:b1]
        if x.npartitions > 4096:  # many small chunks: fewer, larger tasks
            x = x.rechunk((max(x.chunks[0][0], (a1 - a0) // 32 + 1), max(x.chunks[1][0], (b1 - b0) // 32 + 1)))
        regs = self._unfinished_regions()
        r_off = np.concatenate([[0], np.cumsum(x.chunks[0])]) + a0
        c_off = np.concatenate([[0], np.cumsum(x.chunks[1])]) + b0
        blocks = x.to_delayed()
        staged = (self._staged, name) if self._staged is not None else None
        tasks = [dask.delayed(_chunk_sums)(blocks[i, j], int(r_off[i]), int(c_off[j]), f, regs, staged)
                 for i in range(blocks.shape[0]) for j in range(blocks.shape[1])]
        sums = np.zeros((bi1 - bi0, bj1 - bj0))
        counts = np.zeros((bi1 - bi0, bj1 - bj0))
        for (i0, j0, s, k) in dask.compute(*tasks, scheduler="threads"):
            sums[i0 - bi0:i0 - bi0 + s.shape[0], j0 - bj0:j0 - bj0 + s.shape[1]] += s
            counts[i0 - bi0:i0 - bi0 + s.shape[0], j0 - bj0:j0 - bj0 + s.shape[1]] += k
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)

    def block_grid(self, name: str, f: int) -> np.ndarray:
        """Block means of side ``f`` over the whole field in item order, refreshed where tiles
        finished since the last call."""
        with self._lock:
            n_rows, n_cols = self.shape
            gr, gc = math.ceil(n_rows / f), math.ceil(n_cols / f)
            cache = self._blocks.get((name, f))
            if cache is None:
                cache = self._blocks[(name, f)] = _BlockCache(self._block_means(name, f, 0, gr, 0, gc))
                return cache.values
            stale = set(cache.stale)  # cleared only once read: a chunk caught mid-write is read again
            if len(stale) > 0.25 * gr * gc:
                cache.values = self._block_means(name, f, 0, gr, 0, gc)
            else:
                for bi, bj in stale:
                    if bi < gr and bj < gc:
                        cache.values[bi, bj] = self._block_means(name, f, bi, bi + 1, bj, bj + 1)[0, 0]
            cache.stale -= stale
            return cache.values

    def cells(self, name: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The cells rows x cols (item indices, any order), unfinished ones NaN."""
        with self._lock:
            rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
            arr = self.array(name)
            if len(rows) and len(cols) and np.all(np.diff(rows) == 1) and np.all(np.diff(cols) == 1):
                out = np.asarray(arr[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1], dtype=np.float64)
            else:
                ro, co = np.argsort(rows), np.argsort(cols)
                got = np.asarray(arr.get_orthogonal_selection((rows[ro], cols[co])), dtype=np.float64)
                out = np.empty_like(got)
                out[np.ix_(ro, co)] = got
            if self._staged is not None:
                self._staged.overlay(name, out, rows, cols)
            for r0, r1, c0, c1 in self._unfinished_regions():
                ri = (rows >= r0) & (rows < r1)
                ci = (cols >= c0) & (cols < c1)
                if ri.any() and ci.any():
                    out[np.ix_(ri, ci)] = np.nan
            return out

    def cell(self, name: str, i: int, j: int) -> float:
        return float(self.cells(name, np.array([i]), np.array([j]))[0, 0])

    # ------------------------------------------------------------------ views

    def grid(self, name: str, max_side: int, order: str = "items",
             region: tuple[int, int, int, int] | None = None) -> Grid:
        """What the heatmap draws: ``region`` (r0, r1, c0, c1 in shown positions) or the whole
        field, cell by cell when it fits ``max_side`` a side, else block means."""
        n_rows, n_cols = self.shape
        rows, cols = self.order(name, max_side) if order == "clustered" else (
            np.arange(n_rows), np.arange(n_cols))
        r0, r1, c0, c1 = region or (0, n_rows, 0, n_cols)
        r0, r1 = max(0, r0), min(n_rows, max(r1, r0 + 1))
        c0, c1 = max(0, c0), min(n_cols, max(c1, c0 + 1))
        if max(r1 - r0, c1 - c0) <= max_side:
            vals = self.cells(name, rows[r0:r1], cols[c0:c1])
            return Grid(vals, 1, np.arange(r0, r1 + 1), np.arange(c0, c1 + 1), rows, cols)
        if order == "items":  # blocks of the region's own size, on the grid of the whole field
            f = math.ceil(max(r1 - r0, c1 - c0) / max_side)
            bi0, bi1, bj0, bj1 = r0 // f, math.ceil(r1 / f), c0 // f, math.ceil(c1 / f)
            if region is None:  # kept and refreshed where tiles finish
                vals = self.block_grid(name, f)
            else:  # only the chunks the region touches are read
                vals = self._memoised(("region", name, f, bi0, bi1, bj0, bj1),
                                      lambda: self._block_means(name, f, bi0, bi1, bj0, bj1))
            r_edges = np.minimum(np.arange(bi0 * f, bi1 * f + 1, f), n_rows)
            c_edges = np.minimum(np.arange(bj0 * f, bj1 * f + 1, f), n_cols)
            return Grid(vals, f, r_edges, c_edges, rows, cols)
        f = math.ceil(max(n_rows, n_cols) / max_side)
        vals = self._memoised(("grid", name, f, order, r0, r1, c0, c1),  # an order: read for this view
                              lambda: self._shown_blocks(name, f, rows[r0:r1], cols[c0:c1]))
        r_edges = np.minimum(np.arange(r0, r1 + f, f), r1)[: vals.shape[0] + 1]
        c_edges = np.minimum(np.arange(c0, c1 + f, f), c1)[: vals.shape[1] + 1]
        return Grid(vals, f, r_edges, c_edges, rows, cols)

    def _shown_blocks(self, name: str, f: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Block means over items in a given order: whole row bands are read one at a time."""
        gr, gc = math.ceil(len(rows) / f), math.ceil(len(cols) / f)
        out = np.full((gr, gc), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for bi in range(gr):
                band = self.cells(name, rows[bi * f:(bi + 1) * f], cols)
                for bj in range(gc):
                    out[bi, bj] = np.nanmean(band[:, bj * f:(bj + 1) * f])
        return out

    def _memoised(self, key, build):
        with self._lock:
            k = (key, self.generation)
            if k not in self._memo:
                if len(self._memo) > 64:
                    self._memo.clear()
                self._memo[k] = build()
            return self._memo[k]

    def order(self, name: str, max_side: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and columns ordered by average-linkage clustering of the field's profiles."""
        return self._memoised(("order", name, max_side), lambda: self._cluster(name, max_side))

    def _cluster(self, name: str, max_side: int) -> tuple[np.ndarray, np.ndarray]:
        n_rows, n_cols = self.shape
        if max(n_rows, n_cols) <= CLUSTER_MAX:
            x, f = self.cells(name, np.arange(n_rows), np.arange(n_cols)), 1
        else:
            f = math.ceil(max(n_rows, n_cols) / max_side)
            x = self.block_grid(name, f).copy()
        ro = _leaf_order(x)
        co = ro if self.symmetric else _leaf_order(x.T)
        if f == 1:
            return ro, co
        expand = lambda order, n: np.concatenate(  # noqa: E731 - block order -> item order
            [np.arange(b * f, min((b + 1) * f, n)) for b in order])
        return expand(ro, n_rows), expand(co, n_cols)

    @property
    def large(self) -> bool:
        """Too many items a side to read the field whole on every view (block means instead)."""
        return max(self.shape) > CLUSTER_MAX

    def histogram(self, name: str, bins: int = HIST_BINS) -> tuple[np.ndarray, np.ndarray, int]:
        """(edges, counts, cells counted) of the finished cells' values (non-finite left out)."""
        return self._memoised(("hist", name, bins), lambda: self._histogram(name, bins))

    def _histogram(self, name: str, bins: int):
        import dask.array as da
        n_rows, n_cols = self.shape
        if max(n_rows, n_cols) <= CLUSTER_MAX:
            v = self.cells(name, np.arange(n_rows), np.arange(n_cols)).ravel()
            v = v[np.isfinite(v)]
            if not len(v):
                return np.array([0.0, 1.0]), np.array([0]), 0
            counts, edges = np.histogram(v, bins=bins)
            return edges, counts, int(len(v))
        x = self._masked(self._dask(name), 0, 0)
        x = da.where(da.isfinite(x), x, np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi, n = da.compute(da.nanmin(x), da.nanmax(x), da.isfinite(x).sum(), scheduler="threads")
        if not n:
            return np.array([0.0, 1.0]), np.array([0]), 0
        hi = hi if hi > lo else lo + 1.0
        # missing cells moved below the range: np.histogram leaves values outside it out
        counts, edges = da.histogram(da.nan_to_num(x, nan=lo - 1.0), bins=bins, range=(lo, hi))
        return np.asarray(edges), np.asarray(counts.compute(scheduler="threads")), int(n)


def warm(run_dir: str | Path, plan: list[dict] | None, space: dict | None, final: bool) -> None:
    """The first field's heatmap at the default size, computed while the server starts
    (dashboard/serve.py), so the results view of a big matrix opens without reading it."""
    d = shared_dense(run_dir)
    if d.refresh(plan, space, final) and d.fields:
        n = max(d.shape)
        if n > DEFAULT_SIDE:
            d.block_grid(d.fields[0], math.ceil(n / DEFAULT_SIDE))


def _chunk_sums(c: np.ndarray, r0: int, c0: int, f: int, regs: np.ndarray, staged=None):
    """(first block row, first block column, sums, counts) of the finite cells of chunk ``c``
    (top-left cell (r0, c0)) per block of side f it overlaps; cells of unfinished tiles
    (``regs``) left out; a live run's staged tiles (``staged``: (StagedTiles, field)) put in."""
    c = np.array(c, dtype=np.float64)
    h, w = c.shape
    if staged is not None:
        staged[0].overlay(staged[1], c, np.arange(r0, r0 + h), np.arange(c0, c0 + w))
    hit = regs[(regs[:, 0] < r0 + h) & (regs[:, 1] > r0) & (regs[:, 2] < c0 + w) & (regs[:, 3] > c0)] \
        if len(regs) else regs
    if len(hit):
        for g0, g1, e0, e1 in hit:
            c[max(g0, r0) - r0:min(g1, r0 + h) - r0, max(e0, c0) - c0:min(e1, c0 + w) - c0] = np.nan
    ri = np.unique(np.r_[0, np.arange((r0 // f + 1) * f, r0 + h, f) - r0])
    ci = np.unique(np.r_[0, np.arange((c0 // f + 1) * f, c0 + w, f) - c0])
    finite = np.isfinite(c)
    if finite.all():
        sums = np.add.reduceat(np.add.reduceat(c, ri, axis=0), ci, axis=1)
        counts = np.outer(np.diff(np.r_[ri, h]), np.diff(np.r_[ci, w])).astype(np.float64)
    else:
        sums = np.add.reduceat(np.add.reduceat(np.where(finite, c, 0.0), ri, axis=0), ci, axis=1)
        counts = np.add.reduceat(np.add.reduceat(finite.astype(np.float64), ri, axis=0), ci, axis=1)
    return r0 // f, c0 // f, sums, counts


def _leaf_order(x: np.ndarray) -> np.ndarray:
    """Leaves of average linkage over Euclidean distances between the rows of ``x`` (missing
    values as their column's mean, a column of none as 0)."""
    from scipy.cluster.hierarchy import leaves_list, linkage
    from scipy.spatial.distance import squareform
    x = np.array(x, dtype=np.float64)
    if x.shape[0] < 3:
        return np.arange(x.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(x, axis=0)
    mean = np.where(np.isfinite(mean), mean, 0.0)
    bad = ~np.isfinite(x)
    x[bad] = np.take(mean, np.nonzero(bad)[1])
    sq = (x * x).sum(axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)  # one GEMM
    np.fill_diagonal(d2, 0.0)
    d = np.sqrt((d2 + d2.T) / 2.0)
    return leaves_list(linkage(squareform(d, checks=False), method="average"))


_SHARED: dict[str, DenseResult] = {}
_SHARED_LOCK = threading.Lock()


def shared_dense(run_dir: str | Path) -> DenseResult:
    """One :class:`DenseResult` per run directory per server process."""
    key = str(Path(run_dir).resolve())
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = DenseResult(key)
        return _SHARED[key]

