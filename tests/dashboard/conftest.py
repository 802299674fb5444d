"""Fixtures of the dashboard tests: run directories made by the real engine.

Every test that asserts what a run shows reads a directory the engine wrote: ``engine_runs``
makes a finished all-pairs run, a finished pipeline run and a failed all-pairs run once per
session (tests/dashboard/engine_producer.py, in a subprocess so that this process never imports
Ray), and the live browser test watches a real Jaccard run. The synthetic writer
(dashboard_synth.py) is left for what the engine cannot be made to do on cue: exact timing,
partial lines, a directory reused by a new run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_synth import SyntheticRun  # noqa: E402

PRODUCER = Path(__file__).with_name("engine_producer.py")
REPO = Path(__file__).resolve().parents[2]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives a real Chromium (Playwright) against a Streamlit server")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    timings = getattr(config, "_dashboard_timings", None)
    if timings:
        terminalreporter.section("dashboard timings (measured, not asserted)")
        for name, kv in timings.items():
            terminalreporter.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in kv.items()))
        terminalreporter.write_line(f"(also in {ARTIFACTS / 'timings.json'})")


class ProducerHandle:
    """What a test needs from a run that writes a run directory in the background."""

    def __init__(self, run_dir: Path, thread: SyntheticRun):
        self.run_dir = run_dir
        self.thread = thread

    def wait(self, timeout: float) -> bool:
        return self.thread.done.wait(timeout)

    @property
    def error(self):
        return self.thread.error


def start_synthetic_producer(run_dir: Path, **kw) -> ProducerHandle:
    """Start a synthetic live run writing into ``run_dir`` (36 tiles over ~``duration_s`` s)."""
    kw.setdefault("duration_s", 9.0)
    kw.setdefault("snapshot_s", 0.25)
    t = SyntheticRun(run_dir, **kw)
    t.start()
    return ProducerHandle(Path(run_dir), t)


class EngineProducerHandle:
    """A real Jaccard run on a local Ray, in a subprocess (tests/dashboard/engine_producer.py)."""

    def __init__(self, run_dir: Path, n_records: int = 0, leaf_items: int = 8, hold: bool = False):
        self.run_dir = Path(run_dir)
        self.log = open(self.run_dir.parent / (self.run_dir.name + "-producer.log"), "wb")
        # held: the run's tiles go slower until release() (engine_producer.HOLD_S)
        self.hold = self.run_dir.parent / (self.run_dir.name + "-hold")
        args = [str(n_records), str(leaf_items)]
        if hold:
            self.hold.touch()
            args.append(str(self.hold))
        self.proc = subprocess.Popen(
            [sys.executable, str(PRODUCER), "allpairs", str(run_dir), *args],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO)

    def release(self) -> None:
        """The run goes on at its own pace."""
        self.hold.unlink(missing_ok=True)

    def wait(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    @property
    def error(self):
        rc = self.proc.poll()
        if rc in (None, 0):
            return None
        self.log.flush()
        return f"engine producer exited with {rc}: " + Path(self.log.name).read_text(errors="replace")[-2000:]

    def log_tail(self, chars: int = 1500) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        self.release()
        if self.proc.poll() is None:
            self.proc.terminate()
            self.wait(20) or self.proc.kill()
        self.log.close()


def start_engine_producer(run_dir: Path, n_records: int = 0, leaf_items: int = 8,
                          hold: bool = False) -> EngineProducerHandle:
    return EngineProducerHandle(Path(run_dir), n_records, leaf_items, hold)


def _producer(start_fn):
    handles = []

    def start(run_dir, **kw):
        h = start_fn(run_dir, **kw)
        handles.append(h)
        return h

    yield start
    for h in handles:
        if hasattr(h, "release"):  # a held run (a test that failed before releasing it)
            h.release()
        if hasattr(h, "stop"):
            h.wait(60)
            h.stop()
        else:
            h.wait(30)


@pytest.fixture
def synthetic_producer():
    """The synthetic writer alone: for tests of the reading layer that need exact timing."""
    yield from _producer(start_synthetic_producer)


@pytest.fixture
def producer():
    """A function ``start_producer(run_dir) -> handle`` with ``wait(timeout)`` and ``error``: a
    real Jaccard run on a local Ray, written while the test watches."""
    yield from _producer(start_engine_producer)


def _produce(kind: str, out: Path, names: tuple[str, ...], **env) -> dict[str, Path]:
    """engine_producer.py ``kind`` writing under ``out``; {name: out / name}."""
    proc = subprocess.run([sys.executable, str(PRODUCER), kind, str(out)], cwd=REPO,
                          env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, \
        f"engine producer failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return {name: out / name for name in names}


@pytest.fixture(scope="session")
def engine_runs(tmp_path_factory) -> dict[str, Path]:
    """Real runs, written once per session: {"allpairs", "pipeline", "failed"} -> run directory."""
    return _produce("suite", tmp_path_factory.mktemp("engine-runs"),
                    ("allpairs", "pipeline", "failed"))


@pytest.fixture(scope="session")
def cluster_runs(tmp_path_factory) -> dict[str, Path]:
    """Real runs on one multi-node cluster, written once per session: {"l3", "stealing"} -> run
    directory (engine_producer.py ``cluster``)."""
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")  # short: Ray's socket paths
    try:
        return _produce("cluster", tmp_path_factory.mktemp("cluster-runs"), ("l3", "stealing"),
                        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", TMPDIR=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    """A private copy, so that a test (or the Streamlit server's log beside it) changes nothing
    another test reads."""
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


@pytest.fixture
def finished_run(engine_runs, tmp_path) -> Path:
    return _copy(engine_runs["allpairs"], tmp_path)


@pytest.fixture
def pipeline_run(engine_runs, tmp_path) -> Path:
    return _copy(engine_runs["pipeline"], tmp_path)


@pytest.fixture
def failed_run(engine_runs, tmp_path) -> Path:
    return _copy(engine_runs["failed"], tmp_path)


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def _large_run_once(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("large-once") / "large"
    SyntheticRun(run_dir, n_items=10_000, leaf_items=1250, duration_s=60.0, snapshot_s=5.0,
                 host_cache_items=2000, realtime=False, t_start=1_700_000_000.0).run()
    return run_dir


@pytest.fixture
def large_run(_large_run_once, tmp_path) -> Path:
    """A finished run of 10,000 items (49,995,000 pairs in 60 s, about 833 K pairs/s) written
    at once by the synthetic writer (once per session, about 6 s; each test reads a copy): headline
    numbers no engine run in a test suite reaches."""
    return _copy(_large_run_once, tmp_path)
