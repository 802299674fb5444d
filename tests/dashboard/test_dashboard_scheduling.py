"""The dashboard's scheduling view on a real run with work stealing.

The run: a ``ray.cluster_utils.Cluster`` with a 0-CPU head and two worker nodes, one of them slow
(the app sleeps there), in a subprocess (this process never imports Ray; tests/dashboard/
engine_producer.py ``cluster``). Its summary.json is the oracle the view must show: the steals,
local hand-outs and round trips to the head, per node.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import need_module

AppTest = need_module("streamlit.testing.v1").AppTest
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]


@pytest.fixture
def stealing_run(cluster_runs) -> Path:
    return cluster_runs["stealing"]


def test_the_scheduling_view_shows_the_runs_steals_and_hand_outs(monkeypatch, stealing_run):
    sch = json.loads((stealing_run / "summary.json").read_text())["scheduling"]
    assert sch["hierarchical"] and sch["steals"] > 0, sch
    monkeypatch.setattr(sys, "argv", [APP, str(stealing_run)])
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["view"] = "scheduling"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]
    text = "\n".join(m.value for m in at.markdown)
    assert f"steals: {sch['steals']}`" in text
    assert f"local hand-outs: {sch['local_handouts']}`" in text
    assert f"head round trips: {sch['head_round_trips']}`" in text
    table = at.dataframe[0].value
    assert sorted(table["node"]) == sorted(sch["per_node"])
    assert int(table["steals"].sum()) == sch["steals"]
    assert int(table["local_handouts"].sum()) == sch["local_handouts"]


@pytest.mark.browser
def test_the_scheduling_view_in_a_browser(stealing_run, tmp_path):
    """Streamlit on 127.0.0.1 and Chromium: the view's headline carries the summary's steals."""
    from tests.dashboard.test_dashboard_browser import (CHROMIUM, CHROMIUM_ARGS, Server,
                                                        playwright_sync)
    sch = json.loads((stealing_run / "summary.json").read_text())["scheduling"]
    run = Path(shutil.copytree(stealing_run, tmp_path / "run"))
    server = Server(run, 1.0)
    try:
        with playwright_sync.sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = b.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(server.url + "?view=scheduling")
            loc = page.locator('[data-testid="stMarkdown"]').filter(has_text="steals:").first
            loc.wait_for(state="visible")
            text = loc.inner_text()
            b.close()
    finally:
        server.stop()
    assert f"steals: {sch['steals']}" in text
    assert f"local hand-outs: {sch['local_handouts']}" in text
