"""Fixtures of the dashboard tests: run directories in the documented format (docs/run-directory.md).

The run-directory *producer* is swappable: ``start_producer(run_dir)`` returns a handle with
``wait(timeout)`` and ``error``. By default the live test watches a real Jaccard run on a local Ray (in a subprocess);
``PAIRFLOW_DASHBOARD_PRODUCER=synthetic`` swaps in a synthetic writer.
A test module can also override the ``producer`` fixture without changing the tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dashboard_synth import SyntheticRun, write_run  # noqa: E402

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

    def __init__(self, run_dir: Path, n_records: int = 0, leaf_items: int = 8):
        import subprocess

        self.run_dir = Path(run_dir)
        self.log = open(self.run_dir.parent / (self.run_dir.name + "-producer.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("engine_producer.py")), str(run_dir), str(n_records),
             str(leaf_items)], stdout=self.log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])

    def wait(self, timeout: float) -> bool:
        import subprocess

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.wait(20) or self.proc.kill()
        self.log.close()


def start_engine_producer(run_dir: Path, **_ignored) -> EngineProducerHandle:
    return EngineProducerHandle(Path(run_dir))


def _producer(start_fn):
    handles = []

    def start(run_dir, **kw):
        h = start_fn(run_dir, **kw)
        handles.append(h)
        return h

    yield start
    for h in handles:
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
    """A function ``start_producer(run_dir, **kw) -> handle`` with ``wait(timeout)`` and ``error``.

    A real Jaccard run on a local Ray by default (PAIRFLOW_DASHBOARD_PRODUCER=synthetic: a
    synthetic writer of the same files, for quick iteration). The real run is
    slower: Ray start plus ~10 s of compute.  Override this fixture for other runs."""
    kind = os.environ.get("PAIRFLOW_DASHBOARD_PRODUCER", "engine")
    yield from _producer({"synthetic": start_synthetic_producer,
                          "engine": start_engine_producer}[kind])


@pytest.fixture
def finished_run(tmp_path) -> Path:
    d = tmp_path / "finished"
    write_run(d, with_pipeline=True, convert_trace=True)
    return d


@pytest.fixture
def failed_run(tmp_path) -> Path:
    d = tmp_path / "failed"
    write_run(d, fail_after=7)
    return d


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
