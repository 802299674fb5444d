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

from tests.dense_layout import flip_byte, tile_records

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    out = subprocess.run([sys.executable, "-m", "pairflow.apps.cli", f"data.inputs={good},{bad}",
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

    from pairflow.apps.options import allpairs_options
    from pairflow.engine import PairflowError
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


def _env() -> dict:
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for key in ("PAIRFLOW_DEBUG", "RAY_AUTH_MODE", "RAY_ADDRESS"):
        env.pop(key, None)  # Ray's default start-up, whose token notice must not reach the console
    return env


def _journaled_tiles(run_dir: str) -> dict[int, list[dict]]:
    """The journal read independently of the engine: tile -> its complete entries."""
    tiles: dict[int, list[dict]] = {}
    try:
        with open(os.path.join(run_dir, "journal.jsonl")) as fh:
            for line in fh:
                if line.endswith("\n"):
                    entry = json.loads(line)
                    tiles.setdefault(entry["tile"], []).append(entry)
    except OSError:
        pass
    return tiles


def _where(run_dir: str) -> str:
    """A stuck run's state, last metrics and log tail, for the failure message."""
    def tail(name, n):
        try:
            with open(os.path.join(run_dir, name)) as fh:
                return "".join(fh.readlines()[-n:])
        except OSError:
            return ""
    return (f"status {tail('status.json', 20)}\nmetrics {tail('metrics.jsonl', 1)[:3000]}\n"
            f"run.log {tail('run.log', 30)}")


def _interrupt_when(proc, run_dir: str, tiles: int, timeout: float = 600) -> tuple[str, str]:
    """SIGINT (Ctrl-C) once the run has journaled ``tiles`` tiles; the process's output."""
    try:
        deadline = time.time() + timeout
        while (len(_journaled_tiles(run_dir)) < tiles and proc.poll() is None
               and time.time() < deadline):
            time.sleep(0.2)
        assert proc.poll() is None and len(_journaled_tiles(run_dir)) >= tiles, proc.poll()
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.ray
def test_ctrl_c_then_resume_reuses_the_saved_config_and_reports_what_it_did(tmp_path):
    """Ctrl-C (SIGINT) mid-run ends the command with a clear message, the resume command, exit
    code 130 and status.json "interrupted". The interrupted run, with a host tier of 8 items,
    resumes with 8 though the resume command does not say so (``hydra.run.dir=``, as a fresh
    run takes it), prints and records the tiles it reused, recomputed and repaired (counted here
    from the journal and one corrupted tile), and ends with the right matrix; Ray's chatter
    stays in the run's log. Its 780 compares burn 0.01 CPU seconds each: the Ctrl-C after 8
    tiles leaves nearly all to the resume."""
    import numpy as np
    import zarr
    run_dir = str(tmp_path / "run")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairflow.apps.cli", "app=synthetic", "synthetic.n=40",
         "synthetic.t_cmp=0.01", "cache.host_cache_items=8", f"hydra.run.dir={run_dir}",
         "progress=false", "cluster=local", "cluster.num_cpus=2",
         "cluster.object_store_mb=512"],  # on Ray, whose chatter must stay in the run's log
        cwd=str(tmp_path), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True)
    _, err = _interrupt_when(proc, run_dir, 8)
    assert proc.returncode == 130, err[-3000:]
    assert "pairflow: interrupted" in err and "error: \n" not in err + "\n"
    assert f"pairflow resume=true run_dir={run_dir}" in err
    status = json.load(open(os.path.join(run_dir, "status.json")))
    assert status["state"] == "interrupted" and not status["error"]
    journaled = _journaled_tiles(run_dir)
    # one journaled tile's bytes go bad behind the journal's back
    bad_tile = sorted(journaled)[len(journaled) // 2]
    # (an interrupted run's tiles are records in the writers' logs: tests/dense_layout.py)
    region = journaled[bad_tile][-1]["region"]
    result = os.path.join(run_dir, "result")
    (staging,) = [os.path.join(result, n) for n in os.listdir(result)
                  if n.endswith(".tiles.partial")]
    records = tile_records(staging, region, "value")
    assert records
    for rec in records:
        flip_byte(rec["path"], rec["payload"])
    n_tiles = len(json.load(open(os.path.join(run_dir, "tiles.json"))))

    try:
        out = subprocess.run([sys.executable, "-m", "pairflow.apps.cli", "resume=true",
                              f"hydra.run.dir={run_dir}", "progress=false"],
                             cwd=str(tmp_path), env=_env(), capture_output=True, text=True,
                             timeout=900)
    except subprocess.TimeoutExpired:  # say where it stood
        pytest.fail(f"the resume did not end: {_where(run_dir)}")
    assert out.returncode == 0, out.stderr[-3000:]
    reused, repaired = len(journaled) - 1, 1
    line = (f"resumed: reused {reused} tiles, recomputed {n_tiles - reused - repaired}, "
            f"repaired {repaired}")
    assert line in out.stdout.splitlines(), out.stdout
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    assert summary["resumed"]["reused"] == reused and summary["resumed"]["repaired"] == 1
    assert summary["resumed"]["recomputed"] == n_tiles - reused - repaired
    assert summary["host_cache_items"] == 8
    assert json.load(open(os.path.join(run_dir, "meta.json")))["host_cache_items"] == 8
    assert json.load(open(os.path.join(run_dir, "status.json")))["state"] == "finished"
    value = zarr.open_group(summary["outputs"]["dense"], mode="r")["value"][...]
    i, j = np.triu_indices(40, 1)
    assert np.array_equal(value[i, j], ((i * 7919 + j) % 1000).astype(float))
    for stream in (err, out.stderr, out.stdout):
        assert "Token authentication" not in stream and "pid=" not in stream
    with open(os.path.join(run_dir, "run.log")) as fh:
        assert "Token authentication" in fh.read()


# One Python user's process, two runs on the Ray the first one starts: the first prints from its
# workers and finishes; the second is long enough to be caught with Ctrl-C (the test sends it).
API_SCRIPT = """
import os, sys, time
from pairflow.engine import allpairs
from pairflow.apps.synthetic import SyntheticApp

def shout(a, b):
    import os
    print("compare-says-hi", os.getpid(), flush=True)
    return float(a * b)

printing, interrupted = sys.argv[1], sys.argv[2]
res = allpairs(["1", "2", "3"], load=float, compare=shout, run_dir=printing, progress=False,
               num_cpus=2, object_store_mb=512, wait=True, executor="ray")
deadline = time.time() + 30  # workers' output reaches the driver a moment later
while time.time() < deadline and "compare-says-hi" not in open(printing + "/run.log").read():
    time.sleep(0.2)
print("done", res.matrix()[0, 1], "driver", os.getpid(), flush=True)
handle = allpairs(app=SyntheticApp(60, t_cmp=0.05), run_dir=interrupted, progress=False)
try:
    handle.result()
except KeyboardInterrupt:
    print("KeyboardInterrupt")
    sys.exit(7)
except BaseException as exc:
    print("other", type(exc).__name__, exc)
    sys.exit(8)
"""


@pytest.fixture(scope="module")
def api_runs(tmp_path_factory) -> dict:
    """The two runs of API_SCRIPT, the second stopped by SIGINT after 3 tiles (one Ray start
    for both tests below)."""
    where = tmp_path_factory.mktemp("api")
    printing, interrupted = str(where / "printing"), str(where / "interrupted")
    # output to files, not pipes: nobody reads a pipe while the test waits for the journal, and
    # the driver's own probe prints tens of kilobytes (a full pipe would stop the driver)
    with open(where / "stdout", "w") as out, open(where / "stderr", "w") as err:
        proc = subprocess.Popen([sys.executable, "-c", API_SCRIPT, printing, interrupted],
                                cwd=str(where), env=_env(), stdout=out, stderr=err, text=True,
                                start_new_session=True)
        _interrupt_when(proc, interrupted, 3)
    return dict(returncode=proc.returncode, out=(where / "stdout").read_text(),
                err=(where / "stderr").read_text(), printing=printing, interrupted=interrupted)


@pytest.mark.ray
def test_ctrl_c_in_the_api_marks_the_run_interrupted(api_runs):
    """A Python user's Ctrl-C: KeyboardInterrupt reaches them, and the run directory says
    interrupted (no error) instead of failed with an empty error."""
    out, err = api_runs["out"], api_runs["err"]
    assert api_runs["returncode"] == 7 and "KeyboardInterrupt" in out, (out, err[-3000:])
    status = json.load(open(os.path.join(api_runs["interrupted"], "status.json")))
    assert status["state"] == "interrupted" and status["error"] is None


@pytest.mark.ray
def test_workers_output_and_ray_notices_go_to_the_run_log(api_runs):
    """What a worker prints and Ray's start-up notices land in run.log; the console shows
    neither (errors would still show)."""
    out, err = api_runs["out"], api_runs["err"]
    assert "done 2.0" in out, err[-3000:]
    driver = out.split("driver ")[-1].split()[0]
    # the driver's own probe compares in this process and prints here, as any code of the
    # user's own process does; no worker's line reaches the console
    said = [line.split()[-1] for line in (out + err).splitlines() if "compare-says-hi" in line]
    assert set(said) <= {driver}, said
    assert "Token authentication" not in out + err
    with open(os.path.join(api_runs["printing"], "run.log")) as fh:
        log = fh.read()
    workers = {line.split()[-1] for line in log.splitlines() if "compare-says-hi" in line}
    assert workers - {driver} and "Token authentication" in log
