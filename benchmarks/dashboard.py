"""Dashboard benchmark: how soon a big dense result opens in the results view, and the server's memory.

    .venv/bin/python benchmarks/dashboard.py                # n = 20,000 (200 M pairs, 3 GB of zarr)
    .venv/bin/python benchmarks/dashboard.py --quick        # n = 2,000: proves it runs
    .venv/bin/python benchmarks/dashboard.py --run-dir D    # reuse a finished run directory

A real run first: ``pairflow app=synthetic synthetic.n=N sink=dense`` (one field, ``value``;
compare costs nothing, so the run is the sink's writing), leaf 1,000. Then ``pairflow dashboard
RUN_DIR`` on 127.0.0.1 and Debian's Chromium (Playwright) open ``?view=results``:

* **open**: from the page's navigation, right after the server answers its health check, to
  the heatmap drawn (facts line and chart on the page) — what a user waits after
  ``pairflow dashboard``; target <= 5 s. Also the same on the warm server (a second page).
* **region**: a 120 x 120 region typed in, to the heatmap redrawn cell by cell.
* **memory**: the server's peak resident set (VmHWM of its process) at the end; target < 1 GiB.

Results go to benchmarks/out/dashboard.json.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from _record import out_path, target, write  # noqa: E402

CHROMIUM = os.environ.get("PAIRFLOW_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def make_run(run_dir: str, n: int) -> float:
    shutil.rmtree(run_dir, ignore_errors=True)
    exe = os.path.join(os.path.dirname(sys.executable), "pairflow")
    t0 = time.time()
    subprocess.run([exe, "app=synthetic", f"synthetic.n={n}", "synthetic.t_cmp=0", "synthetic.item_floats=1",
                    "sink=dense", "scheduler.leaf_items=1000", "cluster=inprocess", f"run_dir={run_dir}",
                    "progress=false"], cwd=ROOT, check=True,
                   env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    return time.time() - t0


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def serve(run_dir: str, log) -> tuple[subprocess.Popen, str, float]:
    import urllib.request
    port = _free_port()
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "pairflow.dashboard.cli", run_dir, "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    while time.time() - t0 < 120:
        try:
            with urllib.request.urlopen(url + "_stcore/health", timeout=1) as r:
                if r.read().strip() == b"ok":
                    return proc, url, time.time() - t0
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the dashboard did not come up in 120 s")


def drawn(page, shown: str | None = None, timeout_ms: int = 120_000) -> None:
    """The heatmap's facts line (with ``shown`` if given) and its chart on the page."""
    loc = page.locator('[data-testid="stMarkdown"]').filter(has_text="tiles finished:")
    if shown:
        loc = loc.filter(has_text=f"shown: {shown}")
    loc.first.wait_for(timeout=timeout_ms)
    page.wait_for_function("() => { const e = document.querySelector('.vega-embed');"
                           " return e && e.querySelector('canvas, svg g.mark-rect.marks path'); }", timeout=timeout_ms)


def measure(run_dir: str, side: int = 120) -> dict:
    from playwright.sync_api import sync_playwright
    work = tempfile.mkdtemp(prefix="pairflow-bench-dashboard-")
    log = open(os.path.join(work, "streamlit.log"), "wb")
    proc, url, healthy_s = serve(run_dir, log)
    out: dict = {"healthy_s": round(healthy_s, 3)}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.time()
            page.goto(url + "?view=results")
            drawn(page)
            out["open_s"] = round(time.time() - t0, 3)
            print(f"open: {out['open_s']} s", flush=True)
            text = page.locator('[data-testid="stMarkdown"]').filter(has_text="tiles finished:").first.inner_text()
            out["facts"] = text
            second = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.time()
            second.goto(url + "?view=results")
            drawn(second)
            out["open_warm_s"] = round(time.time() - t0, 3)
            print(f"open (warm server): {out['open_warm_s']} s", flush=True)
            n = int(re.search(r"items: (\d+)", text).group(1))
            lo = n // 2
            t0 = time.time()
            for label, v in (("rows from", lo), ("rows to", lo + side), ("columns from", lo),
                             ("columns to", lo + side)):
                box = second.get_by_label(label, exact=True)
                box.fill(str(v))
                box.press("Enter")
            drawn(second, shown=f"{side} × {side} cells")
            out["region_s"] = round(time.time() - t0, 3)
            browser.close()
        out["server_peak_rss_mib"] = round(vm_hwm_mib(proc.pid) or float("nan"), 1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="n = 2,000")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--run-dir", default=None, help="a finished dense run to open (made if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory made here")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    n = args.n or (2000 if args.quick else 20000)
    started = time.time()
    made = args.run_dir is None or not os.path.exists(os.path.join(args.run_dir, "summary.json"))
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="pairflow-bench-dense-")
    run_s = make_run(run_dir, n) if made else None
    try:
        res = {"n": n, "run_s": None if run_s is None else round(run_s, 1), **measure(run_dir)}
        du = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(run_dir, "result"))
                 for f in fs)
        res["matrix_bytes"] = du
    finally:
        if made and not args.keep and args.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(res, flush=True)
    write(out_path("dashboard.json", args.out), res, "dashboard", quick=args.quick, started=started,
          targets=[target(f"open the results view of n = {n:,} (navigation to heatmap drawn)",
                          res.get("open_s"), "<=", 5.0, "s"),
                   target("dashboard server's peak memory", res.get("server_peak_rss_mib"), "<", 1024.0,
                          "MiB")])


if __name__ == "__main__":
    main()
