"""The benchmark report's pure parts: the README's marked block is replaced and nothing else,
a target is marked met by its own comparison, and figures print to the stated precision."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


report = load_benchmark("report")
record = load_benchmark("_record")


def test_readme_has_one_headline_block():
    text = (ROOT / "README.md").read_text()
    assert text.count(report.HEADLINE_START) == 1 and text.count(report.HEADLINE_END) == 1
    assert text.index(report.HEADLINE_START) < text.index(report.HEADLINE_END)


def test_replace_block_changes_only_the_block():
    before, after = "# title\n\nintro $1 \\1\n\n", "\n\n## next\ntext\n"
    text = f"{before}{report.HEADLINE_START}\nold\n{report.HEADLINE_END}{after}"
    block = "| a | b |\n|---|---|\n| \\1 $2 | x |"  # regex specials stay literal
    new = report.replace_block(text, block)
    assert new == f"{before}{report.HEADLINE_START}\n{block}\n{report.HEADLINE_END}{after}"
    assert report.replace_block(new, block) == new
    with pytest.raises(ValueError):
        report.replace_block("no markers here", block)


@pytest.mark.parametrize("value,op,threshold,met", [
    (0.91, ">=", 0.9, True), (0.9, ">=", 0.9, True), (0.89, ">=", 0.9, False),
    (0.031, "<=", 0.03, False), (0.03, "<=", 0.03, True), (1.5, ">", 1.5, False)])
def test_target_met_by_its_comparison(value, op, threshold, met):
    t = record.target("x", value, op, threshold)
    assert t["met"] is met and t["measured"] and t["value"] == value


def test_unmeasured_target_is_not_met():
    t = record.target("x", None, ">=", 0.9)
    assert t["met"] is False and t["measured"] is False


@pytest.mark.parametrize("value", [0.0, 4.2e-7, 0.0123, 0.9003, 1.0949, 12.345, 673.2, 1234.5,
                                   26951206.9, -0.105])
def test_numbers_print_to_three_significant_figures_or_better(value):
    printed = float(report.num(value).replace(",", ""))
    assert abs(printed - value) <= max(0.0005, 0.005 * abs(value))


def test_integers_print_as_integers():
    assert report.num(7) == "7" and report.num(49795210) == "49,795,210"
    assert report.num(True) == "yes" and report.num(None) == "—"


@pytest.mark.parametrize("same_run", [True, False])
def test_a_rebuilt_report_keeps_the_bench_profile_sizes_of_the_same_run(tmp_path, same_run):
    """``bench_run.json`` (the suite's record of what it cut) is not in the repository: a
    report rebuilt from a checkout's JSON keeps what the section said of the sizes while the
    JSON is the run the section described, and drops it for another run."""
    import json
    rec = {"command": "benchmarks/farm.py", "date": "2026-11-27T08:54:23+00:00",
           "code": {"describe": "abc1234", "commit": "abc1234"}, "machine": {"cores": 2}}
    (tmp_path / "out").mkdir()
    described = {"_record": rec}
    if not same_run:
        rec = {**rec, "date": "2026-11-28T06:00:00+00:00"}
    (tmp_path / "out" / "farm.json").write_text(json.dumps({"_record": rec}))
    cut = report.CUT_LEAD + "one run, not three."
    old = "\n\n".join(["# Benchmark results", "## Tool farm — `benchmarks/farm.py`",
                       report.provenance("farm", described), cut, "old figures"])
    results = tmp_path / "RESULTS.md"
    results.write_text(old + "\n")
    report.build(str(tmp_path / "out"), results_md=str(results), plots_dir=str(tmp_path / "p"))
    section = results.read_text().split("## Tool farm", 1)[1]
    assert (cut in section) is same_run
    assert "old figures" not in section  # the section itself is made anew from the JSON
