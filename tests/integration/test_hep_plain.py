"""pairflow's HEP pipeline selects exactly the events the plain columnar script selects.

benchmarks/hep_plain.py is the user's alternative the pipeline benchmark measures against: one
awkward/numpy script over all events, in the written order, imported from neither pairflow's
operators nor its app. It is the oracle here, run as a user runs it (its own process), on the
bundled events read twice (event numbers continue across the copies, as in the benchmark's
replicated 10^6 events). pairflow runs adaptively, in batches that do not divide the file, so
equality also says the selection does not depend on order or batching. Every selected row and
column must match, not only the count.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import need_module

need_module("awkward")
need_module("uproot")
need_module("skhep_testdata")
pd = need_module("pandas")

from pairflow.apps.hep import hep_pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_pipeline_selects_the_plain_scripts_events(tmp_path):
    plain = tmp_path / "plain.parquet"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hep_plain.py"),
                           "--repeat", "2", "--out", str(plain)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["events"] == 2 * 2421

    res = hep_pipeline(repeat=2, step_size=1000, executor="local", progress=False,
                       runs_root=str(tmp_path / "runs")).run()
    assert res.summary["records_in"] == 2 * 2421
    got = pd.read_parquet(res.outputs["parquet"]).sort_values("event").reset_index(drop=True)
    want = pd.read_parquet(plain).sort_values("event").reset_index(drop=True)
    assert len(want) == info["selected"] == res.n_selected
    assert len(want) > 0
    # the two copies of the file select the same events, numbered one file apart
    ev = want["event"].to_numpy()
    assert np.array_equal(ev[ev >= 2421] - 2421, ev[ev < 2421])
    pd.testing.assert_frame_equal(got[list(want.columns)], want, check_dtype=False)


def test_batches_sized_from_the_work_on_threads_select_the_same_rows(tmp_path):
    """As `pairflow app=hep data.repeat=20` runs: batches of the file's 2,421 events, which the
    engine merges (the fixed costs per call ask for bigger batches; 8 batches at least) into
    batches spanning copies of the file, read once per batch, run in this process on two
    worker threads with freed memory kept: the same rows as the script's."""
    plain = tmp_path / "plain.parquet"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "hep_plain.py"),
                           "--repeat", "20", "--out", str(plain)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = hep_pipeline(repeat=20, step_size=2421, executor="local", threads=2, progress=False,
                       runs_root=str(tmp_path / "runs")).run()
    with open(Path(res.run_dir) / "meta.json") as f:
        sizing = json.load(f)["batch_sizing"]
    assert sizing["merged"] and sizing["records"] >= 2 * 2421
    assert res.summary["threads"] == 2 and res.summary["batches"] < 20
    got = pd.read_parquet(res.outputs["parquet"]).sort_values("event").reset_index(drop=True)
    want = pd.read_parquet(plain).sort_values("event").reset_index(drop=True)
    assert len(want) == res.n_selected > 0
    pd.testing.assert_frame_equal(got[list(want.columns)], want, check_dtype=False)
