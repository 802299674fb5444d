"""The results view in a real browser (Streamlit on 127.0.0.1, Debian's Chromium through Playwright)
on run directories written by real runs: Jaccard dense (``engine_runs``) and top-k, phylogeny,
forensics, align and hep (tests/dashboard/results_runs.py, the ``pairflow`` command), and a live
Jaccard run on Ray whose heatmap fills in while the page is open.

Each view's numbers are held against the run's own files read here (zarr, Parquet, CSV, JSON,
Newick through dendropy), never through the dashboard's code. Screenshots go to
tests/artifacts/dashboard/results-*.png (docs/img/ holds copies).
"""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import need_module, need_program
from tests.dashboard import test_dashboard_browser as b
from tests.dashboard.results_runs import BROWSER, make

playwright_sync = need_module("playwright.sync_api")
zarr = need_module("zarr")
pd = need_module("pandas")

pytestmark = pytest.mark.browser
need_program(b.CHROMIUM)

# the browser fixtures of the other browser tests (imported by name: their tests are not)
serve, browser, context, page = b.serve, b.browser, b.context, b.page


@pytest.fixture(scope="module")
def result_runs(tmp_path_factory) -> dict[str, Path]:
    return make(tmp_path_factory.mktemp("result-runs"), BROWSER)


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def current_text(page) -> str:
    """The main area's text of this script run's elements only: while a rerun draws, the
    elements of the run before stay on the page, marked stale, until replaced (a "first row"
    of the top-k part read just after choosing the hits part: clean-clone CI)."""
    return "\n".join(page.locator('[data-testid="stMain"] [data-testid="stElementContainer"]'
                                   ':not([data-stale="true"])').all_inner_texts())


def fact(page, key: str, timeout: float = 30) -> str:
    """The value of ``key: value`` in the view's facts lines, as this script run drew them
    (waits for it to appear)."""
    deadline = time.time() + timeout
    while True:
        m = re.search(rf"(?:^|[\s·]){re.escape(key)}: ([^·\n]+)", current_text(page))
        if m:
            return m.group(1).strip()
        if time.time() > deadline:
            raise AssertionError(f"no '{key}:' on the page:\n{main_text(page)[:2000]}")
        time.sleep(0.1)


def open_results(page, server, part: str | None = None) -> None:
    page.goto(server.url + "?view=results")
    page.locator("h3").filter(has_text=re.compile(r"^\s*results\s*$")).first.wait_for()
    if part:
        page.locator('[data-testid="stMain"] label').filter(
            has_text=re.compile(rf"^\s*{re.escape(part)}\s*$")).first.click()
    wait_drawn(page)


def wait_drawn(page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('.vega-embed')].every(e => e.querySelector('canvas, svg'))",
        timeout=30_000)
    page.wait_for_timeout(300)
    b.assert_no_exception(page)


def shot(page, artifacts: Path, name: str) -> None:
    page.wait_for_timeout(1500)  # the previous part's elements go once the rerun has finished
    page.screenshot(path=str(artifacts / f"results-{name}.png"))


def redrawn(action, tries: int = 4):
    """``action()`` again when the view's live refresh redrew what it held between finding an
    element and using it (on a loaded machine: 'not attached to the DOM', a download
    cancelled by the rerun, a cell not found in the chart being redrawn); any other error, or
    the last try's, is the test's."""
    from playwright.sync_api import Error
    for attempt in range(tries):
        try:
            return action()
        except Error as err:
            if attempt == tries - 1 or not any(
                    s in str(err) for s in ("not attached to the DOM", "canceled", "Timeout")):
                raise


def download(page, label: str, nth: int = 0) -> bytes:
    def once():
        with page.expect_download() as d:
            page.locator('[data-testid="stDownloadButton"] button').filter(
                has_text=re.compile(rf"^\s*{label}\s*$")).nth(nth).click()
        return Path(d.value.path()).read_bytes()
    return redrawn(once)


def hover_cell(page, r: int, c: int) -> dict:
    """Hover the heatmap cell covering row ``r``, column ``c`` (positions in the shown order)
    and read its tooltip."""
    return redrawn(lambda: _hover_cell(page, r, c), tries=6)


# a cell's SVG element is the rect whose bound datum covers the position; a histogram's bars
# (rect marks too, and first on the page in a full suite's CI) carry no such datum
_COVERS = """([r, c]) => {
    const els = document.querySelectorAll('.vega-embed g.mark-rect.marks path');
    for (let i = 0; i < els.length; i++) {
        const d = els[i].__data__ && els[i].__data__.datum;
        if (d && d.shown !== undefined && d.r0 <= r && r < d.r1 && d.c0 <= c && c < d.c1)
            return {index: i, row: String(d.row), column: String(d.column), value: String(d.shown)};
    }
    return {rects: els.length};
}"""


def _cell(page, r: int, c: int, wait_s: float = 30):
    """The element of the heatmap cell covering (r, c), once the page has drawn it."""
    from playwright.sync_api import Error
    deadline = time.time() + wait_s
    while time.time() < deadline:
        got = page.evaluate(_COVERS, [r, c])
        if "index" in got:
            return page.locator(".vega-embed g.mark-rect.marks path").nth(got["index"])
        page.wait_for_timeout(500)
    raise Error(f"Timeout: no heatmap cell covers ({r}, {c}) yet (a page being redrawn): {_census(page)}")


def _census(page) -> list:
    """What the page's charts are, for a failure's message: renderer, rect marks, a datum's keys."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.vega-embed')).map(e => {
        const ps = e.querySelectorAll('g.mark-rect.marks path');
        const d = ps.length && ps[0].__data__ && ps[0].__data__.datum;
        return {svg: !!e.querySelector('svg'), canvas: !!e.querySelector('canvas'), rects: ps.length,
                w: e.clientWidth, h: e.clientHeight, datum: d ? Object.keys(d).join(',') : null};
    })""")


def cell_datum(page, r: int, c: int, wait_s: float = 120) -> dict:
    """The heatmap cell covering (r, c): its row, column and value as its tooltip shows them,
    read from the data row Vega's SVG renderer binds to the cell's element (``__data__``),
    without a hover. For the live page, redrawn every second: no hover to lose to a redraw, and
    the cell found by the positions its datum covers, in any chart and drawing order (clean-clone
    CI at 0f3ff1d: "no chart with a cell 11" when it was the k-th rect of the first chart)."""
    deadline, got = time.time() + wait_s, None
    while time.time() < deadline:
        got = page.evaluate(_COVERS, [r, c])
        if "index" in got:
            return {key: got[key] for key in ("row", "column", "value")}
        page.wait_for_timeout(500)
    raise AssertionError(f"no heatmap cell covers ({r}, {c}) in {wait_s:.0f} s (last look: {got}; "
                         f"charts: {_census(page)})")


def _hover_cell(page, r: int, c: int) -> dict:
    cell = _cell(page, r, c)
    page.mouse.move(0, 0)  # off the chart: the tooltip goes
    page.wait_for_timeout(200)
    cell.scroll_into_view_if_needed(timeout=15_000)  # a redrawn chart: found again by the retry
    box = cell.bounding_box()
    if box is None:  # the cell went between the scroll and the look: a live run's redraw
        from playwright.sync_api import Error
        raise Error("not attached to the DOM (no bounding box)")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tip = page.locator("#vg-tooltip-element")
    tip.wait_for(state="visible")
    page.wait_for_timeout(200)
    return dict(re.findall(r"(row|column|value)\s+([^\n]+)", tip.inner_text()))


def assert_shown(text: str, value) -> None:
    """A tooltip's value (6 significant digits, "none" for a cell without one) is the stored one."""
    import math
    if text == "none":
        assert math.isnan(float(value))
    else:
        assert float(text) == pytest.approx(float(value), rel=1e-5, abs=1e-12)


def _zarr_field(run_dir: Path, field: str):
    g = zarr.open_group(str(run_dir / "result" / "matrix.zarr"), mode="r")
    return g[field][:], list(g.attrs["row_keys"]), list(g.attrs["col_keys"])


# --------------------------------------------------------------------------- dense


@pytest.mark.timeout(900)
def test_heatmap_of_a_dense_jaccard_run(finished_run, serve, page, artifacts_dir):
    server = serve(finished_run)
    open_results(page, server)
    meta = json.loads((finished_run / "meta.json").read_text())
    n = meta["n_items"]
    field = fact(page, "field")
    m, rows, cols = _zarr_field(finished_run, field)
    assert fact(page, "items") == f"{n} × {n}" and m.shape == (n, n)
    assert fact(page, "tiles finished") == f"{meta['tiles_total']} / {meta['tiles_total']}"
    assert fact(page, "missing cells") == "0"
    assert fact(page, "shown") == f"{n} × {n} cells"
    # a cell by name: the first row item against the last column item
    fact(page, "cell")  # (drawn after the heatmap)
    cell = re.search(r"cell: (\w+)\[(.+?), (.+?)\] = (\S+)", main_text(page))
    assert cell and cell.group(1) == field
    i, j = rows.index(cell.group(2)), cols.index(cell.group(3))
    assert float(cell.group(4)) == float(m[i, j])
    # hover: the tooltip of a cell names its items and holds its value
    for k in (0, 5 * n + 17, n * n - 1):
        r, c = divmod(k, n)
        tip = hover_cell(page, r, c)
        assert (tip["row"], tip["column"]) == (rows[r], cols[c]), (r, c, tip)
        assert_shown(tip["value"], m[r, c])
    shot(page, artifacts_dir, "matrix")
    # exports: the picture as PNG and SVG, the cells as CSV (the field's values)
    assert download(page, "PNG").startswith(b"\x89PNG")
    assert b"<svg" in download(page, "SVG")[:400]
    csv = pd.read_csv(__import__("io").BytesIO(download(page, "CSV")))
    assert len(csv) == n * n
    for row in csv.sample(10, random_state=0).itertuples():
        assert row.value == pytest.approx(float(m[row.r0, row.c0]), rel=1e-12, nan_ok=True)
    # a region: rows 2-9 x columns 4-20, cell by cell
    for label, v in (("rows from", 2), ("rows to", 9), ("columns from", 4), ("columns to", 20)):
        box = page.get_by_label(label, exact=True)
        box.fill(str(v))
        box.press("Enter")
        page.wait_for_timeout(400)
    deadline = time.time() + 30
    while fact(page, "shown") != "7 × 16 cells" and time.time() < deadline:
        time.sleep(0.2)
    assert fact(page, "shown") == "7 × 16 cells"
    wait_drawn(page)
    tip = hover_cell(page, 2, 4)  # (positions stay the whole matrix's)
    assert (tip["row"], tip["column"]) == (rows[2], cols[4])
    # clustered order: the same cells, permuted
    page.get_by_role("button", name="whole matrix").click()
    page.locator('[data-testid="stMain"] label').filter(has_text=re.compile(r"^\s*clustered\s*$")).first.click()
    deadline = time.time() + 30
    while fact(page, "order") != "clustered" and time.time() < deadline:
        time.sleep(0.2)
    wait_drawn(page)
    tip = hover_cell(page, 3, 11)
    assert_shown(tip["value"], m[rows.index(tip["row"]), cols.index(tip["column"])])
    shot(page, artifacts_dir, "matrix-clustered")


LIVE_CPU_SLOWDOWN = 4.0  # the live page's browser: Chromium's CPU throttling (DevTools protocol)


@pytest.mark.timeout(900)
def test_live_heatmap_fills_in(tmp_path, producer, serve, page, artifacts_dir):
    """A Jaccard run on Ray, held slow until the page has shown it part done twice. The journal
    is append-only, so what the page has taken in at any moment is a prefix of the final
    journal: each (tiles finished, missing cells) the page showed is checked, after the run,
    against the cells the first that many journaled tiles leave missing. The end shows every
    tile and no missing cell."""
    run_dir = tmp_path / "live"
    # 60 records: 3,600 cells, a chart the live refresh redraws fast enough to hover between
    # redraws on a loaded machine (14,400 at 120 records: a hover timed out in 1 CI run of 3)
    handle = producer(run_dir, n_records=60, leaf_items=4, hold=True)
    server = serve(run_dir)
    # a slow browser, as on a loaded CI machine: it applies several reruns at once, so a widget
    # may mount from a later rerun's element than the one that set its value (the heatmap drawn
    # as ONE cell before results_view.region_inputs; reproduced here at 4x and 10x)
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": LIVE_CPU_SLOWDOWN})
    page.goto(server.url + "?view=results")
    facts_line = page.locator('[data-testid="stMarkdown"]').filter(has_text="tiles finished:").first
    deadline = time.time() + 300  # a wait for the run and the page, not a speed check
    while not facts_line.is_visible() and time.time() < deadline:
        assert handle.error is None, handle.error  # a producer that died says why, not a timeout
        time.sleep(1)
    assert facts_line.is_visible(), (f"no facts line in 300 s; the page: {main_text(page)[:600]!r}; "
                                     f"the producer's log: {handle.log_tail()!r}")
    shown: list[tuple[int, int]] = []
    hovered: list[tuple[int, int, dict]] = []
    deadline = time.time() + 300
    while len({d for d, _ in shown if 0 < d}) < 2 and time.time() < deadline:
        m = re.search(r"tiles finished: (\d+) / (\d+) · missing cells: (\d+)", main_text(page))
        if m:
            done, planned, missing = map(int, m.groups())
            assert not shown or done >= shown[-1][0], "finished tiles went backwards"
            if 0 < done < planned and done not in {d for d, _ in shown}:
                wait_drawn(page)
                if not hovered:  # a finished tile's cell shows its value while the run goes on
                    first = _journal_order(run_dir)[0]
                    t = next(t for t in json.loads((run_dir / "tiles.json").read_text()) if str(t["id"]) == first)
                    r, c = t["r0"], t["c1"] - 1
                    tip = cell_datum(page, r, c)
                    hovered.append((r, c, tip))
                if not shown or shown[-1][0] == 0:
                    page.locator(".vega-embed g.mark-rect.marks path").first.wait_for()
                    page.wait_for_timeout(1000)  # (a refresh redraws the chart)
                    shot(page, artifacts_dir, "matrix-live")
            shown.append((done, missing))
        time.sleep(0.3)
    handle.release()
    assert len({d for d, _ in shown if d > 0}) >= 2, f"the heatmap never showed the run part done twice ({shown})"
    assert handle.wait(300), "producer did not finish"
    assert handle.error is None, handle.error
    meta = json.loads((run_dir / "meta.json").read_text())
    deadline = time.time() + 60  # a wait for the page, not a speed check
    done = f"{meta['tiles_total']} / {meta['tiles_total']}"
    while fact(page, "tiles finished") != done and time.time() < deadline:
        time.sleep(0.3)
    assert fact(page, "tiles finished") == done
    assert fact(page, "missing cells") == "0"
    order = _journal_order(run_dir)
    assert len(order) == meta["tiles_total"]
    m, rows, cols = _zarr_field(run_dir, fact(page, "field"))
    assert hovered and all(tip["value"] != "none" for _, _, tip in hovered)
    for r, c, tip in hovered:
        assert (tip["row"], tip["column"]) == (rows[r], cols[c]), (r, c, tip)
        assert_shown(tip["value"], m[r, c])
    for done, missing in shown:
        if done < meta["tiles_total"]:  # (a partial last line is not a finished tile)
            assert missing == _missing_after(run_dir, order[:done]), (done, missing)


def _journal_order(run_dir: Path) -> list[str]:
    """Tile ids in the order the journal first names them."""
    order, seen = [], set()
    for ln in (run_dir / "journal.jsonl").read_text().splitlines():
        tid = str(json.loads(ln)["tile"])
        if tid not in seen:
            seen.add(tid)
            order.append(tid)
    return order


def _missing_after(run_dir: Path, done: list[str]) -> int:
    """Cells of planned tiles (and their mirrors: a triangle) not among ``done``."""
    import numpy as np
    plan = json.loads((run_dir / "tiles.json").read_text())
    n = json.loads((run_dir / "meta.json").read_text())["n_items"]
    mask = np.zeros((n, n), bool)
    finished = set(done)
    for t in plan:
        if str(t["id"]) not in finished:
            mask[t["r0"]:t["r1"], t["c0"]:t["c1"]] = True
            mask[t["c0"]:t["c1"], t["r0"]:t["r1"]] = True
    return int(mask.sum())


# --------------------------------------------------------------------------- tables, tree, apps


@pytest.mark.timeout(900)
def test_topk_table(result_runs, tmp_path, serve, page, artifacts_dir):
    run_dir = _copy(result_runs["topk"], tmp_path)
    df = pd.read_parquet(run_dir / "result" / "topk.parquet")
    server = serve(run_dir)
    open_results(page, server)
    assert fact(page, "rows") == str(len(df))
    strongest = df.sort_values("score", ascending=False, kind="mergesort").iloc[0]
    first = fact(page, "first row")
    assert f"query={strongest['query']}" in first and f"target={strongest['target']}" in first
    assert float(re.search(r"score=([^,\s]+)", first).group(1)) == pytest.approx(strongest["score"])
    shot(page, artifacts_dir, "pairs")
    # one item's neighbours
    item = df["query"].iloc[7]
    page.get_by_role("combobox", name="neighbours of").click()
    page.keyboard.type(item)
    page.keyboard.press("Enter")
    want = int(((df["query"] == item) | (df["target"] == item)).sum())
    deadline = time.time() + 30
    while fact(page, "matching") != str(want) and time.time() < deadline:
        time.sleep(0.2)
    assert fact(page, "matching") == str(want)
    csv = pd.read_csv(__import__("io").BytesIO(download(page, "CSV")))
    assert len(csv) == want and set(csv["query"]) | set(csv["target"]) >= {item}


@pytest.mark.timeout(900)
def test_tree(result_runs, tmp_path, serve, page, artifacts_dir):
    dendropy = need_module("dendropy")
    run_dir = _copy(result_runs["phylogeny"], tmp_path)
    tree = dendropy.Tree.get(path=str(run_dir / "result" / "tree.nwk"), schema="newick", preserve_underscores=True)
    leaves = len(tree.leaf_nodes())
    server = serve(run_dir)
    open_results(page, server, "tree")
    assert fact(page, "leaves") == str(leaves) == str(json.loads((run_dir / "meta.json").read_text())["n_items"])
    assert fact(page, "shown leaves") == str(leaves)
    texts = page.locator(".vega-embed").first.locator("g.mark-text.role-mark text")
    texts.first.wait_for()  # (the part's chart replaces the matrix's)
    labels = texts.all_text_contents()
    assert sorted(labels) == sorted(n.taxon.label for n in tree.leaf_nodes())
    shot(page, artifacts_dir, "tree")
    # collapse a clade: its k leaves become one
    page.get_by_role("combobox", name="collapse clades").click()
    option = page.locator('[role="option"]').nth(1)
    k = int(re.search(r"\((\d+)\)\s*$", option.inner_text()).group(1))
    option.click()
    page.keyboard.press("Escape")
    deadline = time.time() + 30
    while fact(page, "shown leaves") != str(leaves - k + 1) and time.time() < deadline:
        time.sleep(0.2)
    assert fact(page, "shown leaves") == str(leaves - k + 1)


@pytest.mark.timeout(900)
def test_forensics_clusters_against_truth(result_runs, tmp_path, serve, page, artifacts_dir):
    run_dir = _copy(result_runs["forensics"], tmp_path)
    clusters = pd.read_csv(run_dir / "result" / "clusters.csv")
    server = serve(run_dir)
    open_results(page, server, "clusters")
    truth = pd.read_csv(fact(page, "truth"))
    truth["image"] = truth["file"].str.replace(r"\.jpg$", "", regex=True)
    assert fact(page, "clusters") == str(clusters["camera"].nunique())
    assert fact(page, "true groups") == str(truth["camera"].nunique())
    m = clusters.merge(truth, on="image", suffixes=("_found", "_true"))
    same = {frozenset(g["image"]) for _, g in m.groupby("camera_found")} == \
        {frozenset(g["image"]) for _, g in m.groupby("camera_true")}
    assert (fact(page, "adjusted Rand") == "1.000") == same
    shot(page, artifacts_dir, "clusters")


@pytest.mark.timeout(900)
def test_align_hits(result_runs, tmp_path, serve, page, artifacts_dir):
    run_dir = _copy(result_runs["align"], tmp_path)
    hits = pd.read_parquet(run_dir / "result" / "hits.parquet")
    server = serve(run_dir)
    open_results(page, server, "hits")
    assert fact(page, "hits") == str(len(hits))
    first = fact(page, "first row")
    assert f"qseqid={hits['qseqid'].iloc[0]}" in first and f"sseqid={hits['sseqid'].iloc[0]}" in first
    assert float(re.search(r"evalue=([^,\s]+)", first).group(1)) == pytest.approx(hits["evalue"].iloc[0])
    shot(page, artifacts_dir, "hits")


@pytest.mark.timeout(900)
def test_hep_cutflow_and_histograms(result_runs, tmp_path, serve, page, artifacts_dir):
    run_dir = _copy(result_runs["hep"], tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    server = serve(run_dir)
    open_results(page, server)
    assert fact(page, "records in") == str(summary["records_in"])
    assert fact(page, "selected") == str(summary["records_selected"])
    for p in sorted((run_dir / "result").glob("hist-*.json")):
        h = json.loads(p.read_text())
        pattern = rf"histogram {h['name']}: entries (\d+) · sum of weights (\S+)"
        deadline = time.time() + 30  # a wait for the page to draw it, not a speed check
        while not re.search(pattern, main_text(page)) and time.time() < deadline:
            time.sleep(0.2)
        shown = re.search(pattern, main_text(page))
        assert shown and int(shown.group(1)) == h["entries"]
        assert float(shown.group(2)) == pytest.approx(sum(h["counts"]), rel=1e-5)
    shot(page, artifacts_dir, "cutflow")
