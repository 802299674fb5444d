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


def test_every_benchmark_owns_its_section():
    """Each section of the report is made by ``benchmarks/sections/NAME.py`` beside its note;
    report.py keeps only what they share."""
    for name, _, _ in report.SECTIONS:
        assert callable(report.section_module(name).section), name
    assert len((ROOT / "benchmarks" / "report.py").read_text().splitlines()) < 500


def test_the_report_keeps_each_section_short(tmp_path):
    """RESULTS.md rebuilt from the recorded JSON (and, for a benchmark without JSON here, the
    committed report's section): no section runs past ~80 lines, and every benchmark with JSON
    shows its latest run's targets as that JSON has them."""
    import json
    results = tmp_path / "RESULTS.md"
    results.write_text((ROOT / "benchmarks" / "RESULTS.md").read_text())
    out = ROOT / "benchmarks" / "out"
    report.build(str(out), results_md=str(results), plots_dir=str(tmp_path / "plots"))
    text = results.read_text()
    sections = [s for s in text.split("\n## ")[1:]]
    assert len(sections) >= len(report.SECTIONS)
    for s in sections:
        assert len(s.splitlines()) <= 90, s.splitlines()[0]
    for name, title, _ in report.SECTIONS:
        path = out / f"{name}.json"
        if not path.exists():
            continue
        goals = json.loads(path.read_text()).get("_record", {}).get("targets") or []
        section = text.split(f"\n## {title} — ", 1)[1].split("\n## ", 1)[0]
        assert "(figures not shown" not in section, (name, section[-400:])
        if goals:
            assert f"**{sum(g['met'] for g in goals)} of {len(goals)} met**" in section, name


def test_a_kept_section_shows_the_current_note(tmp_path):
    """A benchmark without JSON here keeps its section's figures from the committed report,
    followed by its note as it is now, not as it was."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "farm.json").write_text('{"_record": {"command": "x", "date": "d"}}')
    mark = report.NOTES_MARK.format(name="cluster")
    old = "\n\n".join(["# Benchmark results", "## Devices of unequal speed — `benchmarks/cluster.py`",
                       "| measure | run |\n|---|---|\n| kept figure | 0.945 |", mark,
                       "an outdated note"])
    results = tmp_path / "RESULTS.md"
    results.write_text(old + "\n")
    report.build(str(tmp_path / "out"), results_md=str(results), plots_dir=str(tmp_path / "p"))
    section = results.read_text().split("## Devices of unequal speed", 1)[1].split("\n## ")[0]
    assert "kept figure" in section and "an outdated note" not in section
    assert report.notes("cluster") in section
