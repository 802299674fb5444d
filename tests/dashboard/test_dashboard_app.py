"""The Streamlit app run in-process with streamlit.testing (no server, no browser): every view of
real finished, pipeline and failed runs (made by the engine) draws without an exception."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import need_module
AppTest = need_module("streamlit.testing.v1").AppTest
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
# the views of an all-pairs run (the views each kind of run is offered: test_views_offered_*)
VIEWS = ["overview", "devices", "cache", "matrix", "timeline", "scheduling"]


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


def _offered(at) -> list[str]:
    return list(at.radio(key="view").options)


def test_views_offered_to_an_all_pairs_run(monkeypatch, finished_run):
    """An all-pairs run (meta.json kind "allpairs", no pipeline.jsonl nor farm.jsonl) is not
    offered the pipelines or farm view; asked for one by its address, the page shows the
    overview."""
    import json

    assert json.loads((finished_run / "meta.json").read_text())["kind"] == "allpairs"
    assert not (finished_run / "pipeline.jsonl").exists() and not (finished_run / "farm.jsonl").exists()
    at = _run(monkeypatch, finished_run, "farm")
    assert _offered(at) == VIEWS + ["results"]
    assert at.radio(key="view").value == "overview"
    assert any(h.value == "overview" for h in at.subheader)


def test_views_offered_to_a_pipeline_run(monkeypatch, pipeline_run):
    """A pipeline run has no quadtree, actors, tiers, spans or tool farm: it is offered its
    pipelines view and what every run has."""
    import json

    assert json.loads((pipeline_run / "meta.json").read_text())["kind"] == "pipeline"
    at = _run(monkeypatch, pipeline_run, "matrix")
    assert _offered(at) == ["overview", "pipelines", "results"]
    assert at.radio(key="view").value == "overview"


def test_views_offered_before_the_run_says_what_it_is(monkeypatch, tmp_path, finished_run):
    """An empty directory may become any kind of run: every view is offered (each one waits);
    once the run's files are there, the same page offers only the all-pairs views. A directory
    whose meta.json says no kind (status.json alone here) is offered every view as well."""
    import shutil

    run_dir = tmp_path / "later"
    at = _run(monkeypatch, run_dir, "farm")
    assert _offered(at) == VIEWS[:5] + ["pipelines", "farm", "scheduling", "results"]
    assert at.radio(key="view").value == "farm"
    shutil.copytree(finished_run, run_dir)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _offered(at) == VIEWS + ["results"]
    assert "state: finished" in _text(at)
    (run_dir / "meta.json").unlink()
    (run_dir / "summary.json").unlink()
    at.run()
    assert _offered(at) == VIEWS[:5] + ["pipelines", "farm", "scheduling", "results"]


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


def test_large_numbers_in_compact_units(monkeypatch, large_run):
    """49,995,000 pairs do not fit a headline box digit by digit: 50.0 M, and the rate in K/s
    (60 s for the pairs: about 833 K/s on average); the exact figures are in the status line
    and the help."""
    from pairflow.dashboard.rundir import RunView
    at = _run(monkeypatch, large_run)
    assert "pairs done: 49995000 / 49995000" in _text(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["pairs"] == "50.0 M / 50.0 M"
    assert metrics["tiles"] == "36 / 36"
    view = RunView(str(large_run))
    view.refresh()
    thr = view.overview()["throughput"]
    rate = thr["pairs_per_s"] if thr.get("pairs_per_s") is not None else thr["pairs_per_s_avg"]
    assert 500e3 < rate < 1e6  # 60 s for the pairs, the recent window a little faster
    assert metrics["throughput"] == f"{rate / 1e3:.1f} K/s"


def test_format_count_by_hand():
    from pairflow.dashboard.rundir import format_count
    assert [format_count(x) for x in (0, 866, 999, 1000, 866_860, 999_960, 49_009_236, 2.5e9)] == \
        ["0", "866", "999", "1.0 K", "866.9 K", "1.0 M", "49.0 M", "2.5 G"]
    assert format_count(None) == "?" and format_count(float("nan")) == "?"


def test_pipeline_view_shows_the_written_and_the_chosen_order(monkeypatch, pipeline_run):
    import json
    rep = json.loads((pipeline_run / "summary.json").read_text())["order_report"]
    at = _run(monkeypatch, pipeline_run, "pipelines")
    assert any("written and chosen order" in m.value for m in at.markdown)
    tables = [d.value for d in at.dataframe if "measured per event" in d.value.columns]
    assert len(tables) == 1
    table = tables[0].set_index("")
    assert table.loc["written", "order"] == " → ".join(rep["written"]["order"])
    assert table.loc["chosen", "order"] == " → ".join(rep["chosen"]["order"])
    assert table.loc["as run", "events"] == rep["as_run"]["events"]


def test_format_seconds_by_hand():
    from pairflow.dashboard.rundir import format_seconds
    assert [format_seconds(x) for x in (None, 2.5, 0.0042, 0.000302, 5.31e-5, 1.25e-7)] == \
        ["—", "2.50 s", "4.200 ms", "302.0 µs", "53.1 µs", "125.0 ns"]
