"""The dashboard's scheduling view on a real run with work stealing.

The run: a ``ray.cluster_utils.Cluster`` with a 0-CPU head and two worker nodes, one of them slow
(the app sleeps there), in a subprocess (this process never imports Ray). Its summary.json is the
oracle the view must show: the steals, local hand-outs and round trips to the head, per node.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.conftest import need_module

AppTest = need_module("streamlit.testing.v1").AppTest
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ray, pytest.mark.multinode, pytest.mark.slow]

DRIVER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np, ray
    from ray.cluster_utils import Cluster
    from engine.pairs.app import FunctionApp
    from engine.pairs.driver import allpairs
    node = dict(object_store_memory=80 * 2**20, node_ip_address="127.0.0.1")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=0, include_dashboard=False, **node))
    for _ in range(2):
        cluster.add_node(num_cpus=1, **node)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)

    def compare(lefts, rights):
        if os.environ.get("PAIRFLOW_ACTOR_ID", "").startswith("node-1/"):
            time.sleep(0.08)
        return np.add.outer(np.array(lefts) * 1000, np.array(rights)).astype(np.float64)

    app = FunctionApp([f"k{i}" for i in range(32)], load=lambda k: int(k[1:]), compare=compare,
                      tile=True)
    res = allpairs(app=app, runs_root=sys.argv[1], leaf_items=2, progress=False, wait=True,
                   steal_batch=8)
    print(json.dumps({"run_dir": res.run_dir}))
    ray.shutdown()
    cluster.shutdown()
""")


@pytest.fixture(scope="module")
def stealing_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("stealing")
    scratch = tempfile.mkdtemp(prefix="pf-", dir="/tmp")
    try:
        (tmp / "driver.py").write_text(DRIVER)
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", PYTHONPATH=str(REPO),
                   TMPDIR=scratch)
        out = subprocess.run([sys.executable, str(tmp / "driver.py"), str(tmp / "runs")],
                             capture_output=True, text=True, env=env, timeout=900, cwd=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert out.returncode == 0, out.stderr[-6000:]
    return Path(json.loads(out.stdout.strip().splitlines()[-1])["run_dir"])


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
