"""A finished run's page is drawn once and then left alone (no periodic rerun racing a hover), yet
still picks up a run that changes after finishing (resumed): real Streamlit, real Chromium.

The oracle for "reran" is the page's own ``refreshed HH:MM:SS`` caption, written at every draw:
with ``--refresh 0.5`` a page that still reran would show a new second within 4 s.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import need_program
from tests.dashboard import test_dashboard_browser as b

pytestmark = pytest.mark.browser
need_program(b.CHROMIUM)

# the browser fixtures of the other browser tests (imported by name: their tests are not)
serve, browser, context, page = b.serve, b.browser, b.context, b.page


def refreshed(page) -> str:
    loc = page.locator('[data-testid="stCaptionContainer"]').filter(has_text="refreshed").first
    return loc.inner_text(timeout=10_000)


def test_finished_run_is_drawn_once_then_resume_is_seen(finished_run, serve, page):
    server = serve(finished_run, refresh=0.5)
    b.open_dashboard(page, server)
    assert b.read_status(page)["state"] == "finished"
    time.sleep(1.5)  # past any first-load rerun
    first = refreshed(page)
    time.sleep(4.0)  # eight periods of --refresh 0.5
    assert refreshed(page) == first, "a finished run's page kept rerunning"
    b.assert_no_exception(page)

    # resumed: status.json says running again; the slow watcher (app.WATCH_S) reruns the page
    status = json.loads((finished_run / "status.json").read_text())
    status.update(state="running")
    (finished_run / "status.json").write_text(json.dumps(status))
    b.wait_status(page, lambda s: s["state"] == "running", timeout=20)
    # and live again: the page reruns every --refresh seconds
    now = refreshed(page)
    deadline = time.time() + 5
    while refreshed(page) == now and time.time() < deadline:
        time.sleep(0.2)
    assert refreshed(page) != now, "a resumed run's page did not refresh"
