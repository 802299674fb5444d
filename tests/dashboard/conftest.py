"""Fixtures of the dashboard tests: run directories in the documented format (docs/run-directory.md).

The run-directory *producer* is swappable: ``start_producer(run_dir)`` returns a handle with
``wait(timeout)`` and ``error``; the default writes a synthetic run from a thread.  A test module
can override the ``producer`` fixture (e.g. with a real Jaccard run on a local Ray) without
changing the tests.
"""

from __future__ import annotations

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


@pytest.fixture
def producer():
    """A function ``start_producer(run_dir) -> handle`` (override to use a real engine run)."""
    handles = []

    def start(run_dir, **kw):
        h = start_synthetic_producer(run_dir, **kw)
        handles.append(h)
        return h

    yield start
    for h in handles:
        h.wait(30)


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
