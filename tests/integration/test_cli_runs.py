"""The ``pairflow`` command around a real run: Ctrl-C in the middle of one, and bad input that
only the workers find."""
import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state(run_dir: str) -> str | None:
    try:
        with open(os.path.join(run_dir, "status.json")) as fh:
            return json.load(fh).get("state")
    except (OSError, ValueError):
        return None


def test_ctrl_c_mid_run_says_interrupted_and_marks_the_run(tmp_path):
    """A synthetic run long enough to be caught running; SIGINT (what Ctrl-C sends) must end it
    with a clear message, the resume command, exit code 130 and status.json "interrupted"."""
    run_dir = str(tmp_path / "run")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "apps.cli", "app=synthetic", "synthetic.n=60",
         "synthetic.t_cmp=0.05", f"run_dir={run_dir}", "progress=false",
         "cluster.num_cpus=2", "cluster.object_store_mb=512"],
        cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 600
        while _state(run_dir) != "running" and proc.poll() is None and time.time() < deadline:
            time.sleep(0.5)
        assert proc.poll() is None and _state(run_dir) == "running", proc.poll()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "pairflow: interrupted" in err and "error: \n" not in err + "\n"
    assert f"resume=true run_dir={run_dir}" in err
    assert _state(run_dir) == "interrupted"


def test_bad_input_found_on_the_workers_is_one_message(tmp_path):
    """A file that fails only when Ray's workers read it (item=file: the app does not read it
    up front): one error line naming it, no worker traceback."""
    good, bad = tmp_path / "good.fa", tmp_path / "trunc.fa.gz"
    good.write_text(">x\n" + "ACGT" * 20 + "\n")
    bad.write_bytes(gzip.compress(b">y\n" + b"ACGT" * 200 + b"\n")[:30])
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PAIRFLOW_DEBUG", None)
    env.pop("RAY_IGNORE_UNHANDLED_ERRORS", None)
    out = subprocess.run([sys.executable, "-m", "apps.cli", f"data.inputs={good},{bad}",
                          f"runs_root={tmp_path / 'runs'}", "cluster.num_cpus=2",
                          "cluster.object_store_mb=512"],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("pairflow: error:")]
    assert len(errors) == 1 and str(bad) in errors[0] and "truncated" in out.stderr
    assert "Traceback" not in out.stderr and "Unhandled error" not in out.stderr


def test_config_groups_to_allpairs_options():
    """The cluster, cache and scheduler groups become engine.allpairs options (checked against
    AllPairsConfig, whose module imports Ray: hence an integration test, though no run starts)."""
    from omegaconf import OmegaConf

    from apps.options import allpairs_options
    from engine import PairflowError
    cfg = OmegaConf.create({"cluster": {"ray_address": None, "num_cpus": 2,
                                        "object_store_mb": 512, "devices": "cpu"},
                            "cache": {"host_cache_items": 4}, "scheduler": {"plan": "zorder"},
                            "progress": False, "preflight": True, "runs_root": "r",
                            "resume": False, "validate": 0.0, "max_retries": 2, "seed": 0})
    opts = allpairs_options(cfg)
    assert opts["devices"] == "cpu" and opts["host_cache_items"] == 4 and opts["plan"] == "zorder"
    assert opts["num_cpus"] == 2 and opts["progress"] is False
    cfg.cache.host_cache_itemz = 3
    with pytest.raises(PairflowError, match="cache.host_cache_itemz"):
        allpairs_options(cfg)
