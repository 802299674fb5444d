"""The cache view's L3 panel, fed by a real run: Jaccard on a two-node Ray cluster with the L3
directory on (tests/dashboard/engine_producer.py ``cluster``). The reading layer's hits per hop are
summary.json's, read here with plain json, and the cache view draws them (streamlit.testing and
a real browser)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import need_module

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "dashboard" / "app.py")
pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.multinode]


@pytest.fixture
def l3_run(cluster_runs) -> Path:
    return cluster_runs["l3"]


def test_the_reading_layer_gives_summary_hits_per_hop(l3_run):
    from pairflow.dashboard.rundir import RunView
    l3 = json.loads((l3_run / "summary.json").read_text())["l3"]
    assert l3["enabled"] and l3["hits"] > 0
    view = RunView(l3_run)
    view.refresh()
    df = view.cache.l3_hops()
    hops = df[df["hop"] == "1"]
    assert dict(zip(hops["node"], hops["hits"])) == \
        {n: part["hits_per_hop"][0] for n, part in l3["nodes"].items()}
    misses = df[df["hop"] == "miss"]
    assert int(misses["hits"].sum()) == l3["misses"]
    assert view.cache.l3_totals()["hits_per_hop"] == l3["hits_per_hop"]


def test_the_cache_view_draws_the_l3_panel(monkeypatch, l3_run):
    AppTest = need_module("streamlit.testing.v1").AppTest
    l3 = json.loads((l3_run / "summary.json").read_text())["l3"]
    monkeypatch.setattr(sys, "argv", [APP, str(l3_run)])
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["view"] = "cache"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    text = "\n".join(m.value for m in at.markdown)
    assert "L3 directory" in text and f"hop 1: {l3['hits_per_hop'][0]:,}" in text, text
    assert not at.warning


@pytest.mark.browser
@pytest.mark.timeout(900)
def test_the_l3_panel_in_a_browser(l3_run, tmp_path):
    """Streamlit on 127.0.0.1 and Chromium (the fixtures and helpers of the browser tests)."""
    import tests.dashboard.test_dashboard_browser as b
    l3 = json.loads((l3_run / "summary.json").read_text())["l3"]
    b.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = b.Server(l3_run)
    try:
        with b.playwright_sync.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=b.CHROMIUM, headless=True,
                                        args=b.CHROMIUM_ARGS)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(60_000)
                b.open_dashboard(page, server)
                got = b.screenshot_views(page, b.ARTIFACTS, "l3", views=["cache"], checks={
                    "cache": lambda pg: pg.locator('[data-testid="stMarkdown"]').filter(
                        has_text="L3 directory").first.inner_text()})
            finally:
                browser.close()
    finally:
        server.stop()
    assert f"hop 1: {l3['hits_per_hop'][0]:,}" in got["cache"], got
    assert f"misses: {l3['misses']:,}" in got["cache"], got
