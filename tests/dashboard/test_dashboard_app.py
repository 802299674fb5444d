"""The Streamlit app run in-process with streamlit.testing (no server, no browser): every view of
real finished, pipeline and failed runs (made by the engine) draws without an exception."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import need_module
AppTest = need_module("streamlit.testing.v1").AppTest
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
VIEWS = ["overview", "devices", "cache", "matrix", "timeline", "pipelines", "farm"]


def _run(monkeypatch, run_dir, view="overview", env=None):
    monkeypatch.setattr(sys, "argv", [APP, str(run_dir)])
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["view"] = view
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _text(at) -> str:
    return "\n".join(m.value for m in at.markdown)


@pytest.mark.parametrize("view", VIEWS)
def test_views_of_finished_run(monkeypatch, finished_run, view):
    at = _run(monkeypatch, finished_run, view)
    assert "state: finished" in _text(at)
    assert at.radio(key="view").value == view
    assert not at.warning, [w.value for w in at.warning]  # no view fell back to its error message


@pytest.mark.parametrize("view", ["overview", "pipelines"])
def test_views_of_pipeline_run(monkeypatch, pipeline_run, view):
    at = _run(monkeypatch, pipeline_run, view)
    assert "state: finished" in _text(at)
    assert not at.warning, [w.value for w in at.warning]


def test_failed_run(monkeypatch, failed_run):
    at = _run(monkeypatch, failed_run)
    assert "state: failed" in _text(at)
    assert any("cannot compare k3 with k9" in e.value for e in at.error)


@pytest.mark.parametrize("view", ["overview", "matrix"])
def test_empty_dir_waits(monkeypatch, tmp_path, view):
    at = _run(monkeypatch, tmp_path / "nothing-yet", view)
    assert "state: waiting for run" in _text(at)
    assert any("waiting for run" in i.value for i in at.info)


def test_large_matrix_is_binned(monkeypatch, finished_run):
    at = _run(monkeypatch, finished_run, "matrix", env={"PAIRFLOW_DASHBOARD_MAX_RECTS": "5"})
    assert any("drawn as a" in c.value for c in at.caption)


def test_failed_run_without_error_text(monkeypatch, tmp_path):
    import json

    (tmp_path / "status.json").write_text(json.dumps({"state": "failed", "error": None, "updated": 1.0}))
    at = _run(monkeypatch, tmp_path)
    assert "state: failed" in _text(at)
    assert any("no error text" in e.value for e in at.error)
