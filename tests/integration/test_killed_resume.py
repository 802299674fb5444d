"""A run killed (SIGKILL, by its process id) at a drawn point, resumed, killed again, resumed to
the end, loses no result: the finished matrix is exactly the synthetic app's formula
((i * 7919 + j) % 1000, i < j, mirrored), computed here without pairflow. Issue 58 part 3: the
journal read as columns and the dense sink's staged tiles verified as arrays must keep what
the record-by-record replay kept. In-process runs (no Ray), a few thousand tiles of leaf 2."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N, LEAF = 150, 2  # 75 blocks: 2,850 tiles

CHILD = textwrap.dedent("""
    import sys
    from pairflow.engine import allpairs
    from pairflow.apps.synthetic import SyntheticApp
    run_dir, resume = sys.argv[1], sys.argv[2] == "1"
    h = allpairs(app=SyntheticApp(%d, item_floats=1, t_cmp=4e-4, wait=True), sink="dense",
                 run_dir=run_dir, leaf_items=%d, executor="inprocess", progress=False,
                 resume=resume, num_cpus=2, silent_after_s=120)
    h.result()
""" % (N, LEAF))


def journal_lines(run_dir: str) -> int:
    try:
        with open(os.path.join(run_dir, "journal.jsonl"), "rb") as fh:
            return fh.read().count(b"\n")
    except OSError:
        return 0


def run_and_kill(run_dir: str, resume: bool, at_lines: int) -> bool:
    """The run in a process of its own, killed once its journal has ``at_lines`` lines;
    False when it finished first."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, run_dir, "1" if resume else "0"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        if journal_lines(run_dir) >= at_lines:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.01)
    err = proc.communicate()[1].decode(errors="replace")
    assert proc.returncode == 0, err[-3000:]
    return False


def expected() -> np.ndarray:
    out = np.full((N, N), np.nan)
    for i in range(N):
        for j in range(i + 1, N):
            out[i, j] = out[j, i] = (i * 7919 + j) % 1000
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_twice_then_resumed_is_exact(tmp_path, seed):
    import zarr

    from pairflow.apps.synthetic import SyntheticApp
    from pairflow.engine import allpairs
    rng = random.Random(seed)
    tiles = (N // LEAF) * (N // LEAF + 1) // 2
    first = rng.randrange(tiles // 10, tiles // 2)
    second = rng.randrange(first + tiles // 10, tiles * 9 // 10)
    run_dir = str(tmp_path / "run")
    killed = [run_and_kill(run_dir, False, first), run_and_kill(run_dir, True, second)]
    res = allpairs(app=SyntheticApp(N, item_floats=1, t_cmp=4e-4, wait=True), sink="dense",
                   run_dir=run_dir, leaf_items=LEAF, executor="inprocess", progress=False,
                   resume=True, num_cpus=2, wait=True)
    resumed = res.summary["resumed"]
    assert any(killed), "the runs finished before their kills: nothing was tested"
    # what the kills left was reused, not recomputed: at least what was journaled last
    assert resumed["reused"] >= first and resumed["repaired"] == 0
    assert resumed["reused"] + resumed["recomputed"] == tiles
    got = zarr.open_group(os.path.join(run_dir, "result", "matrix.zarr"), mode="r")["value"][...]
    np.testing.assert_array_equal(got, expected())
    with open(os.path.join(run_dir, "summary.json")) as fh:
        assert json.load(fh)["tiles_journaled"] == tiles
