"""``pairflow bench --quick --only peers --out DIR``: the report it writes agrees with its JSON.

The oracle is the benchmark's own JSON, read here with ``json`` and compared with numbers parsed
back out of the markdown (this test does not import the report generator): every target's
measured value and verdict, every contender's wall time, the command and the code version; and
every plot the report references exists and opens as a PNG. The repository's own
benchmarks/out, RESULTS.md, plots and README are never touched (``--out``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _number(text: str) -> float:
    """A figure as the report prints it: '0.412', '1,234', '2.45e-05', '13.2 s', '3.10x'."""
    m = re.search(r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?", text)
    assert m, f"no number in {text!r}"
    return float(m.group(0).replace(",", ""))


def _close(printed: float, value: float) -> bool:
    """Equal to the precision the report prints: 3 decimals below 1, 2 below 100, then at
    least 3 significant figures (and an exponent with 3 for tiny values)."""
    return abs(printed - value) <= max(0.0051, 0.006 * abs(value))


def _rows(md: str, header_start: str) -> list[list[str]]:
    """The body rows of the first markdown table whose header begins with ``header_start``."""
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"| {header_start}"):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = re.split(r"(?<!\\)\|", row.strip()[1:-1])
                rows.append([c.strip().replace("\\|", "|") for c in cells])
            return rows
    raise AssertionError(f"no table starting with {header_start!r}")


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    nxt = md.find("\n## ", start + 1)
    return md[start:nxt if nxt > 0 else len(md)]


@pytest.mark.slow
@pytest.mark.ray
def test_quick_bench_report_matches_its_json(tmp_path):
    out = tmp_path / "bench"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("PAIRFLOW_BENCH_OUT", None)
    before = {p: p.stat().st_mtime for p in (ROOT / "benchmarks" / "out").glob("*.json")} \
        if (ROOT / "benchmarks" / "out").exists() else {}
    readme_before = (ROOT / "README.md").read_text()
    results_before = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    proc = subprocess.run([sys.executable, "-m", "pairflow.apps.cli", "bench", "--quick", "--only",
                           "peers", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    data = json.loads((out / "peers.json").read_text())
    md = (out / "RESULTS.md").read_text()
    manifest = json.loads((out / "bench_run.json").read_text())
    sec = _section(md, "All-pairs peers")
    rec = data["_record"]

    # provenance: the exact command, recorded by the benchmark and by the suite, and the code
    assert rec["command"] == ".venv/bin/python benchmarks/peers.py --quick" or \
        rec["command"].endswith("benchmarks/peers.py --quick")
    assert f"Command: `{rec['command']}`" in sec
    assert manifest["benchmarks"][0]["command"].endswith("benchmarks/peers.py --quick")
    assert rec["code"]["commit"][:12] in sec and rec["machine"]["cpu"] in sec
    assert "Quick mode" in sec

    # every target: the measured value and the verdict as the JSON has them
    targets = _rows(sec, "target |")
    assert len(targets) == len(rec["targets"]) > 0
    for row, goal in zip(targets, rec["targets"]):
        name, measured, _, verdict = row
        assert name == goal["name"]
        assert _close(_number(measured), goal["value"]), (row, goal)
        assert verdict == ("**met**" if goal["met"] else "**not met**")
    n_met = sum(g["met"] for g in rec["targets"])
    assert f"**{n_met} of {len(rec['targets'])} met**" in sec

    # every row: the peer's median, pairflow's (cold CLI and warm session), the ratio of the
    # two and the verdict, as the JSON has them (a ratio above 1: pairflow is faster)
    rows = _rows(sec, "case | peer")
    want = [(case, peer) for case, c in data["cases"].items() for peer in c["cold_ratios"]]
    assert [(r[0], r[1]) for r in rows] == want and want
    for row in rows:
        c = data["cases"][row[0]]
        who = c["contenders"]
        cold = who["pairflow (CLI, cold)"]["median_s"]
        peer = who[row[1]]["median_s"]
        warm = who["pairflow (session, warm)"]["median_s"]
        assert _close(_number(row[3]), cold) and _close(_number(row[6]), warm), row
        if who[row[1]]["censored"]:  # a run stopped at its limit: the time a lower bound
            assert row[2].startswith("≥") and row[4].startswith("≥"), row
        assert _close(_number(row[2]), peer) and _close(_number(row[4]), peer / cold), row
        assert row[5] == ("wins" if peer >= cold else "**loses**"), row
        assert _close(_number(row[7]), peer / warm), row
        assert row[8] == ("wins" if peer >= warm else "**loses**"), row

    # the summary row and the plots it references
    summary = {r[0]: r for r in _rows(md, "benchmark")}
    row = next(r for k, r in summary.items() if "All-pairs peers" in k)
    assert row[1] == rec["date"][:10] and row[3] == "quick"
    pngs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", md)
    assert pngs, "the report references no plot"
    from PIL import Image
    for rel in pngs:
        path = (out / rel).resolve()
        assert path.is_relative_to(out.resolve()), path  # written under --out, not the repo
        with Image.open(path) as im:
            assert im.format == "PNG" and im.size[0] >= 400 and im.size[1] >= 150

    # the repository's own files were left alone
    assert (ROOT / "README.md").read_text() == readme_before
    assert (ROOT / "benchmarks" / "RESULTS.md").read_text() == results_before
    for p, mtime in before.items():
        assert p.stat().st_mtime == mtime, p
