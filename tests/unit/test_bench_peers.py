"""The all-pairs peers benchmark's pure parts: the peers' top-k merge against a brute force over
the full matrix, the answers' comparison by key, and the per-row ratio and verdict (hand-set
times)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from tests.benchmark_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # peers.py imports _record and peer_jobs by name
jobs = load_benchmark("peer_jobs")
peers = load_benchmark("peers")


def _blocks(n, size):
    edges = [(a, min(n, a + size)) for a in range(0, n, size)]
    return [(a, b) for i, a in enumerate(edges) for b in edges[i:]]


def test_top_k_merged_from_block_candidates_is_each_items_best_of_the_full_matrix():
    """Blocks of the upper triangle each hand over every cell (a superset of a kernel's
    candidates); merged, each item's 10 best scores over both sides equal the brute force:
    the symmetric matrix's row, sorted, best first."""
    rng = np.random.default_rng(3)
    n = 37
    full = np.round(rng.random((n, n)), 2)  # ties on purpose
    full = np.triu(full, 1) + np.triu(full, 1).T
    ans = jobs.Answer("reads", n)
    for (r0, r1), (c0, c1) in _blocks(n, 8):
        i, j = np.nonzero(jobs._tri_mask(r0, r1, c0, c1))
        ans.add(r0, c0, (i, j, full[r0 + i, c0 + j]))
    off = full + np.diag(np.full(n, -np.inf))
    want = -np.sort(-off, axis=1)[:, :jobs.TOP_K]
    assert np.array_equal(ans.top(), want)


def test_dense_blocks_fill_the_upper_triangle():
    n = 11
    m = np.arange(n * n, dtype=float).reshape(n, n)
    ans = jobs.Answer("genomes", n)
    for (r0, r1), (c0, c1) in _blocks(n, 4):
        ans.add(r0, c0, m[r0:r1, c0:c1] * jobs._tri_mask(r0, r1, c0, c1))
    assert np.array_equal(np.triu(ans.matrix, 1), np.triu(m, 1))


def test_answers_are_compared_by_key_not_by_position():
    m = np.array([[0, 1, 2], [1, 0, 3], [2, 3, 0]], float)
    a = {"keys": ["x", "y", "z"], "matrix": m}
    order = [2, 0, 1]
    b = {"keys": ["z", "x", "y"], "matrix": m[np.ix_(order, order)]}
    assert peers.difference(a, b) == 0.0
    b["matrix"] = b["matrix"] + np.array([[0, 0, 0], [0, 0, 0.5], [0, 0.5, 0]])
    assert peers.difference(a, b) == 0.5
    assert peers.difference(a, {"keys": ["x", "y", "w"], "matrix": m}) == float("inf")


def test_each_row_says_the_ratio_and_whether_pairflow_wins():
    """Medians 4 s (cold), 2 s (warm); peers 5, 3 and one stopped twice at 60 s limits: the
    fastest peer is the 3 s one; cold 3 / 4 = 0.75, loses; warm 3 / 2 = 1.5, wins; the stopped
    one counts as its limits (60 s, a lower bound: 15x cold)."""
    rows = {peers.COLD: {"runs": [4.0, 5.0, 3.0]}, peers.WARM: {"runs": [2.0, 2.0]},
            "multiprocessing": {"runs": [5.0]}, "dask.array": {"runs": [3.0, 3.0]},
            "dask.bag": {"runs": [None, None], "limits": [60.0, 60.0]}}
    s = peers.summarise("genomes", rows)
    assert s["fastest_peer"] == "dask.array"
    assert s["cold_ratios"] == {"multiprocessing": 1.25, "dask.array": 0.75, "dask.bag": 15.0}
    assert s["cold_vs_fastest"] == 0.75 and not s["cold_wins"]
    assert s["warm_vs_fastest"] == 1.5 and s["warm_wins"]
    assert rows["dask.bag"]["timed_out"] == 2 and rows["dask.bag"]["censored"]
    assert rows["dask.bag"]["median_s"] == 60.0 and not rows["dask.array"]["censored"]


def test_a_runs_limit_is_a_multiple_of_the_fastest_so_far_within_bounds():
    """Medians so far 2 s and 10 s (median of the two: 6 s): 4 x 6 = 24 s, raised to the
    60 s floor; 30 s and 50 s: 160 s; capped at 100 s; nothing finished yet: the cap."""
    rows = {"a": {"runs": [2.0]}, "b": {"runs": [10.0, None]}, "c": {"runs": []}}
    assert peers.limit_for(rows, 600.0) == 60.0
    rows = {"a": {"runs": [30.0]}, "b": {"runs": [50.0]}}
    assert peers.limit_for(rows, 600.0) == 160.0 and peers.limit_for(rows, 100.0) == 100.0
    assert peers.limit_for({"a": {"runs": [None]}}, 600.0) == 600.0
