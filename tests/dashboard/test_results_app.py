"""The results view's parts the browser tests do not open, run in-process (streamlit.testing, no
server, no browser) on real runs made by the ``pairflow`` command (tests/dashboard/results_runs.py):
microscopy's fused particle and a tool farm's streams, their facts held against the run's files."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import need_module
from tests.dashboard.results_runs import make

AppTest = need_module("streamlit.testing.v1").AppTest
pd = need_module("pandas")
APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    return make(tmp_path_factory.mktemp("result-runs-app"), ("microscopy", "farm"))


def _results(monkeypatch, run_dir: Path, part: str):
    monkeypatch.setattr(sys, "argv", [APP, str(run_dir)])
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["view"] = "results"
    at.run()
    radio = at.radio(key="results_part")
    if radio.value != part:
        radio.set_value(part).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]
    return "\n".join(m.value for m in at.markdown)


def _fact(text: str, key: str) -> str:
    m = re.search(rf"`{re.escape(key)}: ([^`]+)`", text)
    assert m, f"no {key!r} in {text}"
    return m.group(1)


def test_fused_particle(monkeypatch, runs):
    run_dir = runs["microscopy"]
    fused = pd.read_csv(run_dir / "result" / "fused.csv")
    text = _results(monkeypatch, run_dir, "fused particle")
    assert _fact(text, "localisations") == str(len(fused))
    assert _fact(text, "particles") == str(fused["particle"].nunique())


def test_farm_streams(monkeypatch, runs):
    run_dir = runs["farm"]
    units = json.loads((run_dir / "units.json").read_text())
    runs_ = [json.loads(x) for x in (run_dir / "farm.jsonl").read_text().splitlines() if x.strip()]
    text = _results(monkeypatch, run_dir, "streams")
    assert _fact(text, "units") == str(len(units["units"]))
    assert _fact(text, "tool runs") == str(len(runs_))
    assert _fact(text, "units ok") == str(len({r["unit"] for r in runs_ if r["ok"]}))
    assert _fact(text, "streams") == str(len(units["streams"]))
