"""The dashboard in a real browser: Streamlit on 127.0.0.1, Debian's Chromium driven by Playwright.

Five run directories, all written by the real engine (tests/dashboard/conftest.py): (a) a Jaccard
run written while the page is open (a live run), (b) a finished all-pairs run, (c) an empty
directory that a finished run is then copied into, (d) a failed run, (e) a finished pipeline.

Screenshots of every view go to tests/artifacts/dashboard/; page-ready time and update latency are
measured, printed in the terminal summary and written to tests/artifacts/dashboard/timings.json —
reported, not asserted as hard limits.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.conftest import need_module, need_program

playwright_sync = need_module("playwright.sync_api")

CHROMIUM = os.environ.get("PAIRFLOW_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWS = ["overview", "devices", "cache", "matrix", "timeline"]  # of an all-pairs run
#: the views the sidebar offers an all-pairs run (no pipelines, no farm)
ALLPAIRS_VIEWS = ["overview", "devices", "cache", "matrix", "timeline", "scheduling", "results"]
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}

pytestmark = pytest.mark.browser
need_program(CHROMIUM)

TIMINGS: dict[str, dict] = {}
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "dashboard"


# --------------------------------------------------------------------------- server and browser


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``pairflow dashboard RUN_DIR`` (via dashboard.cli, which execs Streamlit) on 127.0.0.1."""

    def __init__(self, run_dir: Path, refresh: float = 1.0):
        self.run_dir = run_dir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = open(run_dir.parent / f"streamlit-{self.port}.log", "wb")
        env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
        self.t_launch = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pairflow.dashboard.cli", str(run_dir), "--host", "127.0.0.1", "--port", str(self.port),
             "--refresh", str(refresh)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=Path(__file__).resolve().parents[2])
        self.t_healthy = self._wait_healthy(120)

    def _wait_healthy(self, timeout: float) -> float:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.proc.returncode}: {self.logtext()}")
            try:
                with urllib.request.urlopen(self.url + "_stcore/health", timeout=1) as r:
                    if r.read().strip() == b"ok":
                        return time.time()
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"streamlit not healthy after {timeout} s: {self.logtext()}")

    def logtext(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


@pytest.fixture
def serve():
    servers: list[Server] = []

    def start(run_dir: Path, refresh: float = 1.0) -> Server:
        s = Server(Path(run_dir), refresh)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def browser():
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def context(browser):
    """One context for the module (its HTTP cache keeps Streamlit's scripts between tests)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})

    def loopback_only(route):
        host = urlparse(route.request.url).hostname or ""
        if route.request.url.startswith(("http:", "https:", "ws:", "wss:")) and host not in LOOPBACK:
            route.abort()
        else:
            route.continue_()

    ctx.route("**/*", loopback_only)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context):
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    yield pg
    pg.close()


# --------------------------------------------------------------------------- reading the page

STATUS_RE = {
    "state": re.compile(r"state: ([a-z][a-z ]*?)(?:\s+·|\s*$)", re.M),
    "tiles": re.compile(r"tiles done: (\d+|\?) / (\d+|\?)"),
    "pairs": re.compile(r"pairs done: (\d+|\?) / (\d+|\?)"),
    "R": re.compile(r"(?<![a-z] )\bR: ([0-9.]+|n/a)"),
}


def status_text(page) -> str:
    loc = page.locator('[data-testid="stMarkdown"]').filter(has_text="state:").first
    return loc.inner_text(timeout=5_000)


def parse_status(text: str) -> dict:
    out: dict = {"text": text}
    m = STATUS_RE["state"].search(text)
    out["state"] = m.group(1) if m else None
    for k in ("tiles", "pairs"):
        m = STATUS_RE[k].search(text)
        out[k] = tuple(None if g == "?" else int(g) for g in m.groups()) if m else (None, None)
    m = STATUS_RE["R"].search(text)
    out["R"] = None if not m or m.group(1) == "n/a" else float(m.group(1))
    return out


def read_status(page) -> dict:
    return parse_status(status_text(page))


def wait_status(page, pred, timeout: float, poll: float = 0.05) -> dict:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = read_status(page)
            if pred(last):
                return last
        except playwright_sync.Error:
            pass
        time.sleep(poll)
    raise AssertionError(f"status never satisfied the condition within {timeout} s; last: {last}")


def open_dashboard(page, server: Server) -> dict:
    """Open the page; return timings of readiness (status line visible)."""
    t0 = time.time()
    page.goto(server.url)
    page.locator('[data-testid="stMarkdown"]').filter(has_text="state:").first.wait_for(state="visible")
    t1 = time.time()
    return {"launch_to_healthy_s": round(server.t_healthy - server.t_launch, 3),
            "goto_to_ready_s": round(t1 - t0, 3),
            "launch_to_ready_s": round(t1 - server.t_launch, 3)}


def show_view(page, name: str) -> None:
    page.locator('[data-testid="stSidebar"] label').filter(has_text=re.compile(rf"^\s*{name}\s*$")).first.click()
    page.locator("h3").filter(has_text=re.compile(rf"^\s*{name}\s*$")).first.wait_for(state="visible")
    # charts drawn (vega-embed has rendered its canvas/svg)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.vega-embed')].every(e => e.querySelector('canvas, svg'))",
        timeout=10_000)
    page.wait_for_timeout(150)


def offered_views(page) -> list[str]:
    """The views the sidebar offers, in its order."""
    radios = page.locator('[data-testid="stSidebar"] [role="radiogroup"] label')
    radios.first.wait_for(state="visible")
    return [t.strip() for t in radios.all_inner_texts()]


def wait_offered(page, pred, timeout: float) -> list[str]:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = offered_views(page)
            if pred(last):
                return last
        except playwright_sync.Error:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the sidebar never offered the expected views within {timeout} s; last: {last}")


def assert_no_exception(page) -> None:
    n = page.locator('[data-testid="stException"]').count()
    assert n == 0, page.locator('[data-testid="stException"]').first.inner_text()
    assert "Traceback (most recent call last)" not in page.locator('[data-testid="stMain"]').inner_text() \
        or "state: failed" in status_text(page)


def screenshot_views(page, artifacts: Path, prefix: str, views=VIEWS, checks=None) -> dict:
    """Show each view, check it drew without an exception, run ``checks[view](page)`` if given,
    save ``{prefix}-{view}.png``; returns what the checks returned."""
    out = {}
    t0 = time.time()
    for v in views:
        show_view(page, v)
        assert_no_exception(page)
        if checks and v in checks:
            out[v] = checks[v](page)
        page.screenshot(path=str(artifacts / f"{prefix}-{v}.png"), full_page=True)
    record(prefix, views_screenshot_s=round(time.time() - t0, 2))
    return out


def read_cache_r(page) -> float | None:
    txt = page.locator('[data-testid="stMarkdown"]').filter(has_text="bound R:").first.inner_text()
    m = re.search(r"(?:^|\s)R: ([0-9.]+|n/a)", txt)
    assert m, txt
    return None if m.group(1) == "n/a" else float(m.group(1))


def run_totals(run_dir: Path) -> dict:
    """The run's own numbers: meta.json totals, last metrics line, summary.json."""
    meta = json.loads((run_dir / "meta.json").read_text())
    lines = [ln for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    last = json.loads(lines[-1])
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    return {"meta": meta, "last": last, "summary": summary}


def first_written(run_dir: Path, tiles_done: int) -> float | None:
    """When the run first wrote that ``tiles_done`` tiles were done (metrics.jsonl or tiles.jsonl)."""
    times = []
    for ln in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            r = json.loads(ln)
        except ValueError:
            continue
        if r.get("tiles_done", -1) >= tiles_done:
            times.append(r["t"])
            break
    ends = []
    p = run_dir / "tiles.jsonl"
    if p.exists():
        seen = set()
        for ln in p.read_text().splitlines():
            try:
                r = json.loads(ln)
            except ValueError:
                continue
            if r.get("id") not in seen:
                seen.add(r.get("id"))
                ends.append(r.get("t_end"))
        ends = sorted(e for e in ends if e is not None)
        if len(ends) >= tiles_done:
            times.append(ends[tiles_done - 1])
    return min(times) if times else None


def sample_latency(page, run_dir: Path, last_seen, seconds: float, out: list) -> int | None:
    """Poll the page's tiles-done count for ``seconds`` (or until the run has finished); for every
    new value, append (time seen - time the run first wrote it) to ``out``.  Asserts the count
    never goes backwards.  Returns the last value seen."""
    t_end = time.time() + seconds
    while time.time() < t_end:
        s = read_status(page)
        td = s["tiles"][0]
        assert td is None or last_seen is None or td >= last_seen, "progress went backwards"
        if td is not None and td != last_seen:
            seen_at = time.time()
            w = first_written(run_dir, td)
            if w is not None:
                out.append(seen_at - w)
            last_seen = td
        if s["state"] in ("finished", "failed"):
            break
        time.sleep(0.03)
    return last_seen


def record(name: str, **kw) -> None:
    TIMINGS.setdefault(name, {}).update(kw)
    print(f"[dashboard timings] {name}: {kw}")


@pytest.fixture(scope="module", autouse=True)
def _write_timings(request):
    yield
    if TIMINGS:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2))
        request.config._dashboard_timings = dict(TIMINGS)


# --------------------------------------------------------------------------- tests


# The time limits here guard against a hung browser or server; they are sized for a 2-core
# machine shared with other test runs, and the first test to use the engine fixtures also waits
# for their runs (several minutes under load).
@pytest.mark.timeout(900)
def test_live_run(tmp_path, producer, serve, page, artifacts_dir):
    run_dir = tmp_path / "live"
    name = "live-engine"
    # tiles of 4 records (~900 tiles), held (each tile 50 ms longer) until the latency samples
    # are taken: the run must outlast the views' screenshots and the samples, and unheld its
    # compute phase could end during the screenshots
    handle = producer(run_dir, leaf_items=4, hold=True)
    server = serve(run_dir)
    ready = open_dashboard(page, server)
    record(name, **ready)

    # progress increases between two reads
    first = wait_status(page, lambda s: s["state"] in ("running", "starting") and s["tiles"][1], 180)
    p1 = first["pairs"][0] or 0
    second = wait_status(page, lambda s: (s["pairs"][0] or 0) > p1, 120)
    assert second["pairs"][0] > p1

    # update latency: the run writes a new tiles_done -> the page shows it (sampled for a few
    # seconds now, while the run is surely live, and again after the screenshots until it ends)
    lat: list[float] = []
    sample_latency(page, run_dir, second["tiles"][0], 3.0, lat)

    # every view, live
    screenshot_views(page, artifacts_dir, name)
    show_view(page, "overview")
    sample_latency(page, run_dir, read_status(page)["tiles"][0], 4.0, lat)
    handle.release()

    # ends at the run's own totals
    assert handle.wait(300), "producer did not finish"
    assert handle.error is None, handle.error
    tot = run_totals(run_dir)
    t_fin = time.time()
    final = wait_status(page, lambda s: s["state"] == "finished" and s["tiles"][0] == s["tiles"][1], 60)
    finish_seen = time.time() - t_fin
    meta, last, summary = tot["meta"], tot["last"], tot["summary"]
    assert final["tiles"] == (meta["tiles_total"], meta["tiles_total"]) == (last["tiles_done"], last["tiles_total"])
    assert final["pairs"] == (meta["pairs_total"], meta["pairs_total"]) == (last["pairs_done"], last["pairs_total"])
    assert final["R"] == pytest.approx(summary["R"], abs=5.1e-4)
    page.screenshot(path=str(artifacts_dir / f"{name}-final-overview.png"), full_page=True)
    show_view(page, "cache")
    r_shown = read_cache_r(page)
    assert r_shown == pytest.approx(summary["R"], abs=5.1e-4)
    page.screenshot(path=str(artifacts_dir / f"{name}-final-cache.png"), full_page=True)
    lat_sorted = sorted(lat)
    record(name, update_latency_samples=len(lat),
           update_latency_median_s=round(lat_sorted[len(lat) // 2], 3) if lat else None,
           update_latency_max_s=round(lat_sorted[-1], 3) if lat else None,
           finished_visible_after_producer_done_s=round(finish_seen, 3))
    assert lat, "no update was observed while the run was live"


@pytest.mark.timeout(900)
def test_finished_run(finished_run, serve, page, artifacts_dir):
    server = serve(finished_run)
    ready = open_dashboard(page, server)
    record("finished", **ready)
    tot = run_totals(finished_run)
    s = wait_status(page, lambda s: s["state"] == "finished", 30)
    assert s["tiles"] == (tot["meta"]["tiles_total"],) * 2
    assert s["pairs"] == (tot["meta"]["pairs_total"],) * 2
    assert s["R"] == pytest.approx(tot["summary"]["R"], abs=5.1e-4)
    assert "ETA" not in s["text"]
    assert offered_views(page) == ALLPAIRS_VIEWS
    got = screenshot_views(page, artifacts_dir, "finished", checks={
        "cache": read_cache_r,
        "matrix": lambda p: p.locator('[data-testid="stMarkdown"]').filter(has_text="leaves:").first.inner_text(),
    })
    assert got["cache"] == pytest.approx(tot["summary"]["R"], abs=5.1e-4)
    assert f"done: {tot['meta']['tiles_total']}" in got["matrix"] and "pending: 0" in got["matrix"]


@pytest.mark.timeout(900)
def test_pipeline_run_shows_its_operator_order(pipeline_run, serve, page, artifacts_dir):
    server = serve(pipeline_run)
    record("pipeline", **open_dashboard(page, server))
    wait_status(page, lambda s: s["state"] == "finished", 30)
    plans = [json.loads(ln) for ln in (pipeline_run / "pipeline.jsonl").read_text().splitlines() if ln.strip()]
    assert offered_views(page) == ["overview", "pipelines", "results"]
    got = screenshot_views(page, artifacts_dir, "pipeline", views=["overview", "pipelines"], checks={
        "pipelines": lambda p: p.locator('[data-testid="stMain"]').inner_text()})
    assert "order: " + " → ".join(plans[-1]["order"]) in got["pipelines"]


@pytest.mark.timeout(900)
def test_empty_directory_then_run_appears(tmp_path, finished_run, serve, page, artifacts_dir):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    server = serve(run_dir)
    ready = open_dashboard(page, server)
    record("empty", **ready)
    s = read_status(page)
    assert s["state"] == "waiting for run"
    assert {"pipelines", "farm"} <= set(offered_views(page))  # nothing says yet what the run is
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "waiting for run" in main and "Traceback" not in main
    assert_no_exception(page)
    page.screenshot(path=str(artifacts_dir / "empty-overview.png"), full_page=True)
    for v in ("cache", "matrix"):  # other views wait as well, without errors
        page.locator('[data-testid="stSidebar"] label').filter(has_text=re.compile(rf"^\s*{v}\s*$")).first.click()
        page.wait_for_timeout(300)
        assert read_status(page)["state"] == "waiting for run"
        assert_no_exception(page)
    # a run appears in the directory: the open page picks it up by itself
    t0 = time.time()
    for name in ("config.yaml", "status.json", "tiles.json", "meta.json"):  # the engine's order
        shutil.copy2(finished_run / name, run_dir / name)
    for path in sorted(finished_run.iterdir()):
        if not (run_dir / path.name).exists():
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, run_dir / path.name)
    s = wait_status(page, lambda s: s["state"] == "finished", 60)
    record("empty", run_appeared_visible_after_s=round(time.time() - t0, 3))
    # before, any view could apply; now the sidebar offers the all-pairs run's views only
    wait_offered(page, lambda v: v == ALLPAIRS_VIEWS, 30)
    assert s["tiles"][0] == s["tiles"][1] == json.loads((run_dir / "meta.json").read_text())["tiles_total"]


@pytest.mark.timeout(900)
def test_failed_run_shows_error(failed_run, serve, page, artifacts_dir):
    server = serve(failed_run)
    ready = open_dashboard(page, server)
    record("failed", **ready)
    s = wait_status(page, lambda s: s["state"] == "failed", 30)
    meta = json.loads((failed_run / "meta.json").read_text())
    done = {json.loads(ln)["id"] for ln in (failed_run / "tiles.jsonl").read_text().splitlines() if ln.strip()}
    assert s["tiles"] == (len(done), meta["tiles_total"])
    err = page.locator('[data-testid="stAlert"]').filter(has_text="run failed").first.inner_text()
    assert "cannot compare k3 with k9" in err
    code = page.locator('[data-testid="stCode"]').filter(has_text="ValueError: cannot compare k3 with k9").first
    code.wait_for(state="visible")  # the full error text (with the traceback) is on the page
    assert page.locator('[data-testid="stException"]').count() == 0  # the run's error, not the app's
    page.screenshot(path=str(artifacts_dir / "failed-overview.png"), full_page=True)
    show_view(page, "matrix")
    page.screenshot(path=str(artifacts_dir / "failed-matrix.png"), full_page=True)


@pytest.mark.timeout(900)
def test_headline_numbers_fit_their_boxes(large_run, serve, page, artifacts_dir):
    """49,995,000 pairs and ~833 K pairs/s: every headline value is shown whole in compact
    units, none cut off with an ellipsis (the box is as wide as its text needs)."""
    server = serve(large_run)
    open_dashboard(page, server)
    wait_status(page, lambda s: s["state"] == "finished", 30)
    show_view(page, "overview")
    values = page.locator('[data-testid="stMetricValue"]')
    values.first.wait_for()
    boxes = values.evaluate_all(
        "els => els.map(e => ({text: e.innerText, scroll: e.scrollWidth, client: e.clientWidth,"
        " inner: [...e.querySelectorAll('*')].map(c => [c.scrollWidth, c.clientWidth])}))")
    page.screenshot(path=str(artifacts_dir / "large-overview.png"), full_page=True)
    texts = [b["text"].strip() for b in boxes]
    assert "50.0 M / 50.0 M" in texts and "36 / 36" in texts, texts
    assert any(re.fullmatch(r"\d{3}\.\d K/s", t) for t in texts), texts
    for b in boxes:
        assert "…" not in b["text"]
        assert b["scroll"] <= b["client"], b
        assert all(sw <= cw for sw, cw in b["inner"] if cw), b
