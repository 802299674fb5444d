"""Rebuild benchmarks/RESULTS.md, the plots and the README's headline block from the JSON alone.

    .venv/bin/python benchmarks/report.py                  # benchmarks/out -> RESULTS.md, plots
    .venv/bin/python benchmarks/report.py --out-dir DIR    # JSON of DIR, report written into DIR
    pairflow bench --report-only                           # the same as the first

Why: figures assembled by hand from runs of different days drift from the runs; here every
number comes from a benchmark's JSON, next to the exact command, date, code version and machine
that JSON records (``benchmarks/_record.py``), and every target is marked met or not by the
benchmark itself.

Each benchmark owns its section, beside its note: ``benchmarks/sections/NAME.py`` turns the
JSON into tables and plots (``section(data, ctx)``) and the README's headline rows
(``headline(data)``); ``NAME.md`` says what JSON cannot (how it is measured, how to read it)
and is copied in as written. A section shows the latest run only: no history (git keeps it).
This module keeps what they share: formatting, the provenance and targets of every section,
bar plots (PNG, matplotlib's Agg backend, into benchmarks/plots/), the headline block and the
order of the report.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks")
RESULTS = os.path.join(HERE, "RESULTS.md")
PLOTS = os.path.join(HERE, "plots")
SECTIONS_DIR = os.path.join(HERE, "sections")
README = os.path.join(ROOT, "README.md")
HEADLINE_START = "<!-- bench:headline:start -->"
HEADLINE_END = "<!-- bench:headline:end -->"


# section order and titles; the file each benchmark writes is NAME.json
SECTIONS = (
    ("allpairs", "All-pairs engine", "allpairs.py"),
    ("peers", "All-pairs peers", "peers.py"),
    ("align", "Smith-Waterman", "align.py"),
    ("apps", "Rocket's applications", "apps.py"),
    ("startup", "Start-up", "startup.py"),
    ("pipeline", "Filter pipelines", "pipeline.py"),
    ("farm", "Tool farm", "farm.py"),
    ("cluster", "Devices of unequal speed", "cluster.py"),
    ("many_small", "Many small sequences: reads", "many_small.py"),
    ("many_small_proteomes", "Many small sequences: proteomes", "many_small_proteomes.py"),
    # (many_small runs it: ``pairflow bench --only many_small``)
    ("planner", "Planner", "planner.py"),
    ("scaling", "Scaling across nodes: R, storage bytes, L3 hits", "scaling.py"),
    ("scaling_grid", "Scaling grid: L3 on every cluster shape", "scaling.py"),
    ("stealing", "Hierarchical scheduling: steals and round trips", "stealing.py"),
    ("kernels_micro", "Kernel micro-benchmarks: k-mers and Jaccard", "kernels_micro.py"),
    ("sw_micro", "Kernel micro-benchmarks: Smith-Waterman", "sw_micro.py"),
    ("dense_layout", "Dense results on small tiles: files and write time", "dense_layout.py"),
    ("tile_costs", "Per-tile fixed costs: measured and charged", "tile_costs.py"),
    ("dashboard", "Dashboard: a big dense result", "dashboard.py"),
    ("scale", "Scale on one machine: 10^3 to 10^6 items", "scale.py"),
)


# ---- formatting ---------------------------------------------------------------------------

def num(v, unit: str = "") -> str:
    """A figure as the report prints it (and as tests parse it back): 3 decimals below 1,
    2 below 100, 1 below 1,000, grouped integers above; an exponent for tiny values."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}" + (f" {unit}" if unit and unit != "x" else unit)
    a = abs(v)
    if a == 0:
        s = "0"
    elif a < 0.001:
        s = f"{v:.2e}"
    elif a < 1:
        s = f"{v:.3f}"
    elif a < 100:
        s = f"{v:.2f}"
    elif a < 1000:
        s = f"{v:.1f}"
    else:
        s = f"{v:,.0f}"
    return s + (f" {unit}" if unit and unit != "x" else unit)


def speed(ratio: float) -> str:
    """A speed-up as the headline reads it: "3.79x faster", or "1.23x slower" below 1."""
    return f"{num(ratio)}x faster" if ratio >= 1 else f"{num(1 / ratio)}x slower"


def pct(v) -> str:
    if v is None:
        return "—"
    return f"{100 * v:.2f} %" if abs(v) < 0.1 else f"{100 * v:.1f} %"


def table(head: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = (x if isinstance(x, str) else num(x) for x in r)
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)


def targets_table(data: dict) -> str:
    goals = (data.get("_record") or {}).get("targets") or []
    if not goals:
        return ""
    rows = []
    for g in goals:
        met = "**met**" if g["met"] else ("not measured" if not g.get("measured", True)
                                          else "**not met**")
        rows.append([g["name"], num(g["value"], g.get("unit", "")),
                     f"{g['op']} {num(g['threshold'], g.get('unit', ''))}", met])
    n_met = sum(g["met"] for g in goals)
    return (f"Targets: **{n_met} of {len(goals)} met**.\n\n"
            + table(["target", "measured", "target value", ""], rows))


# the suite's name of the benchmark that writes a section's JSON, where it differs
RUN_BY = {"many_small_proteomes": "many_small"}
# how to make a section's JSON, where the suite does not (the grid is half an hour here)
MAKE = {"scaling_grid": ".venv/bin/python benchmarks/scaling.py --grid"}


CUT_LEAD = ("Sizes of the bench profile (`pairflow bench`), cut to keep the whole suite under "
            "45 minutes: ")


def provenance(name: str, data: dict) -> str:
    rec = data.get("_record")
    if not rec:
        return ("Command, date, code version and machine: not recorded (this JSON was written "
                "before `benchmarks/_record.py`); rerun `pairflow bench --only "
                f"{RUN_BY.get(name, name)}`.")
    code = rec.get("code") or {}
    m = rec.get("machine") or {}
    mem = f", {m['memory_gib']} GiB" if m.get("memory_gib") else ""
    quick = " **Quick mode: sizes that prove it runs; the figures say nothing about the " \
        "targets.**" if rec.get("quick") else ""
    took = f", took {rec['elapsed_s'] / 60:.1f} min" if rec.get("elapsed_s") else ""
    return (f"Command: `{rec['command']}`  \n"
            f"Run {rec['date']}{took}, code `{code.get('describe')}` "
            f"(commit `{(code.get('commit') or '')[:12]}`), on {m.get('cpu', '?')}"
            f"{' (' + m['isa'] + ')' if m.get('isa') else ''}, "
            f"{m.get('cores', '?')} cores{mem}, {m.get('os', '?')}, Python {m.get('python', '?')}"
            f" (load {m.get('load_avg_1m', '?')} at the end).{quick}")


NOTES_MARK = "<!-- notes: benchmarks/sections/{name}.md -->"


def notes(name: str) -> str:
    """What JSON cannot say of a benchmark (how it is measured, how to read it), as written."""
    path = os.path.join(SECTIONS_DIR, f"{name}.md")
    if not os.path.exists(path):
        return ""
    with open(path) as fh:
        return fh.read().strip()


# ---- plots --------------------------------------------------------------------------------

def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
                         "figure.dpi": 110, "savefig.bbox": "tight"})
    return plt


def _save(fig, plots_dir: str, name: str, made: list) -> str:
    os.makedirs(plots_dir, exist_ok=True)
    path = os.path.join(plots_dir, name)
    fig.savefig(path)
    import matplotlib.pyplot as plt
    plt.close(fig)
    made.append(path)
    return path






def plot_bars(title: str, rows: list[tuple[str, float]], unit: str, plots_dir: str, name: str,
              made: list, note: str = "") -> str | None:
    """One horizontal bar per contender; pairflow's bars in blue, the others grey."""
    rows = [(k, v) for k, v in rows if v is not None]
    if len(rows) < 2:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(rows) + 1.4))
    labels = [k for k, _ in rows]
    vals = [v for _, v in rows]
    colors = ["C0" if k.startswith("pairflow") else "C7" for k in labels]
    ax.barh(range(len(rows)), vals, color=colors)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    top = max(vals)
    for i, v in enumerate(vals):
        ax.text(v + 0.01 * top, i, num(v), va="center", fontsize=8.5)
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel(unit + (f"   ({note})" if note else ""))
    ax.set_title(title)
    ax.grid(axis="y", visible=False)
    return _save(fig, plots_dir, name, made)


# ---- the sections: one module and one note per benchmark, in sections/ ------------------

def img(path: str | None, results_md: str) -> str:
    """A plot's Markdown image, relative to the RESULTS.md that shows it; "" for no plot."""
    if not path:
        return ""
    rel = os.path.relpath(path, os.path.dirname(os.path.abspath(results_md)))
    return f"![{os.path.basename(path)}]({rel})"


CPU_ROLES = ("device actors", "loaders", "coordination", "Ray daemons", "driver",
             "other Ray workers", "idle", "stolen by the VM host", "other processes")


def cpu_table(label: str, shares: dict) -> str:
    """A table of each row's CPU shares by role (``CpuMeter.shares_between``); "" if none.
    A role no row has is left out: JSON from before 2026-11-28 has no "stolen by the VM host"
    or "other processes", and its "idle" is the two of them and the idle together."""
    roles = [r for r in CPU_ROLES if any(v and r in v for v in shares.values())]
    rows = [[k] + [pct(v.get(role)) for role in roles] for k, v in shares.items() if v]
    return table([label, *roles], rows) if rows else ""


class Ctx:
    """What a section needs beside its own JSON: where its plots go (``plots``, and each one
    written is added to ``made``), the RESULTS.md they are shown from (``md``), and every
    benchmark's JSON (``all``: the apps' plot shows the synthetic profiles beside the apps)."""

    def __init__(self, plots: str, md: str, all_: dict):
        self.plots, self.md, self.all, self.made = plots, md, all_, []


_MODULES: dict = {}


def section_module(name: str):
    """``sections/NAME.py``, which owns the benchmark's section: ``section(data, ctx)`` gives
    its paragraphs. Loaded from its path (benchmarks/ is a folder of scripts, not a package);
    its ``import report`` finds this module under whatever name this one was loaded."""
    if __name__ in sys.modules:  # (else the sections import report from benchmarks/ on sys.path)
        sys.modules.setdefault("report", sys.modules[__name__])
    if name not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"bench_section_{name}",
                                                      os.path.join(SECTIONS_DIR, f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[name] = module
    return _MODULES[name]


def with_notes(text: str, name: str) -> str:
    """A section with its note (``sections/NAME.md``) after the marker, in place of the note
    it had: a section kept from an earlier report shows the note as it is now."""
    mark = NOTES_MARK.format(name=name)
    body = text.split(mark, 1)[0].rstrip()
    note = notes(name)
    return f"{body}\n\n{mark}\n\n{note}" if note else body


# ---- the headline table (README) ----------------------------------------------------------

def headline(all_: dict, old_block: str = "") -> str:
    """Rows for the README: what pairflow is held to, the figure, and whether it wins, meets
    its target, or loses, each from the same JSON as RESULTS.md. Rows of ``old_block`` (the
    README's current block) that no JSON here gives again stay as they were, in their place:
    a checkout holds only the JSON of the benchmarks run in it (``kept_rows``)."""
    rows = []
    for name, _, _ in SECTIONS:  # each section's own rows, in the report's order
        module = section_module(name) if name in all_ else None
        if module is not None and hasattr(module, "headline"):
            rows += module.headline(all_[name])
    rows = kept_rows(old_block, rows)
    if not rows:
        return "No benchmark results yet: run `pairflow bench`."
    dates = {(d.get("_record") or {}).get("date", "")[:10] for d in all_.values()} - {""}
    dates = sorted(dates | set(re.findall(r"\d{4}-\d{2}-\d{2}", old_block.split("\n")[0])))
    when = f" (runs of {dates[0]} to {dates[-1]})" if len(dates) > 1 else \
        (f" (run of {dates[0]})" if dates else "")
    return (f"Generated by `benchmarks/report.py` from `benchmarks/out/*.json`{when}; details, "
            "commands and plots in [benchmarks/RESULTS.md](benchmarks/RESULTS.md).\n\n"
            + table(["measure", "pairflow", "against", "verdict"], rows))


def _table_rows(md: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``md``, as cells."""
    lines = [line for line in md.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[2:]]


def kept_rows(old_block: str, rows: list[list]) -> list[list]:
    """``rows`` with the rows of ``old_block`` whose first cell none of them has kept in their
    old places (each new row after the old row before it, or at the end)."""
    old = _table_rows(old_block)
    if not old:
        return rows
    new = {r[0]: r for r in rows}
    out, seen = [], set()
    for r in old:
        if r[0] in new:
            out.append(new[r[0]])
            seen.add(r[0])
        else:
            out.append(r)
    return out + [r for r in rows if r[0] not in seen]


def old_sections(path: str) -> dict[str, str]:
    """The sections (``## `` heading -> its text) of an existing RESULTS.md, and under
    ``"__summary__"`` its Summary table's rows by their first cell, and the suite-time line."""
    if not os.path.exists(path):
        return {}
    with open(path) as fh:
        text = fh.read()
    out: dict = {}
    for chunk in re.split(r"\n(?=## )", text):
        if chunk.startswith("## "):
            out[chunk.split("\n", 1)[0]] = chunk.rstrip()
    summary = out.get("## Summary", "")
    out["__summary__"] = {r[0]: r for r in _table_rows(summary)}
    timing = [line for line in summary.splitlines() if line.startswith("The last `pairflow")]
    out["__timing__"] = timing[0] if timing else ""
    return out


def replace_block(text: str, block: str) -> str:
    pattern = re.compile(re.escape(HEADLINE_START) + r".*?" + re.escape(HEADLINE_END), re.S)
    new = f"{HEADLINE_START}\n{block}\n{HEADLINE_END}"
    if not pattern.search(text):
        raise ValueError(f"README has no {HEADLINE_START} ... {HEADLINE_END} block")
    return pattern.sub(lambda m: new, text)


# ---- the whole report ---------------------------------------------------------------------

def load_all(out_dir: str) -> dict:
    data = {}
    for name, _, _ in SECTIONS:
        path = os.path.join(out_dir, f"{name}.json")
        if os.path.exists(path):
            with open(path) as fh:
                data[name] = json.load(fh)
    return data


def build(out_dir: str, results_md: str | None = None, plots_dir: str | None = None,
          readme: str | None = None) -> dict:
    """Write RESULTS.md (``results_md``), its plots (``plots_dir``) and, if given, the README's
    headline block, from the JSON files in ``out_dir``. Returns the paths written."""
    results_md = results_md or RESULTS
    plots_dir = plots_dir or PLOTS
    all_ = load_all(out_dir)
    if not all_:  # never replace a report with an empty one
        raise SystemExit(f"no benchmark JSON in {out_dir}: run `pairflow bench` first")
    ctx = Ctx(plots_dir, results_md, all_)
    manifest = {}
    mpath = os.path.join(out_dir, "bench_run.json")
    if os.path.exists(mpath):
        with open(mpath) as fh:
            manifest = {r["name"]: r for r in json.load(fh).get("benchmarks", [])}
    parts = ["# Benchmark results", "<!-- generated by benchmarks/report.py from the JSON in "
             "benchmarks/out: edit benchmarks/sections/*.md, not this file -->",
             notes("_intro")]
    # a benchmark without JSON here keeps its section of the report as it was (a checkout
    # holds only the JSON of what ran in it)
    before = old_sections(results_md)
    summary = []
    for name, title, script in SECTIONS:
        d = all_.get(name)
        if d is None:
            rec = manifest.get(RUN_BY.get(name, name)) or {}
            link = f"[{title}](#{_anchor(title, script)})"
            if rec.get("returncode"):
                summary.append([link, "—", f"failed (exit {rec['returncode']})", "—"])
            elif link in before.get("__summary__", {}):
                summary.append(before["__summary__"][link])
            continue
        goals = (d.get("_record") or {}).get("targets") or []
        summary.append([f"[{title}](#{_anchor(title, script)})", (d.get("_record") or {}).get(
            "date", "—")[:10], f"{sum(g['met'] for g in goals)} of {len(goals)}"
            if goals else "—", "quick" if (d.get("_record") or {}).get("quick") else "full"])
    if summary:
        parts.append("## Summary\n\n" + table(["benchmark", "run", "targets met", "mode"],
                                               summary))
    runners = {RUN_BY.get(n, n) for n, _, _ in SECTIONS if n not in MAKE}
    if manifest and runners <= set(manifest):  # the suite's wall time, against its budget
        total = sum(r.get("elapsed_s") or 0 for r in manifest.values())
        parts.append(f"The last `pairflow bench` run times of these {len(manifest)} benchmarks "
                     f"add up to **{total / 60:.1f} min** (`bench_run.json`; the whole suite's "
                     "budget is 45 min, `--quick` 5 min).")
    elif before.get("__timing__"):
        parts[-1] += "\n\n" + before["__timing__"]
    for name, title, script in SECTIONS:
        d = all_.get(name)
        body = [f"## {title} — `benchmarks/{script}`"]
        kept = before.get(body[0])
        if d is None and kept and "\nNo results: " not in kept and \
                not (manifest.get(RUN_BY.get(name, name)) or {}).get("returncode"):
            parts.append(with_notes(kept, name))
            continue
        if d is None:
            rec = manifest.get(RUN_BY.get(name, name))
            why = (f"failed (exit {rec['returncode']}; log `{_shown_path(rec['log'])}`)"
                   if rec and rec.get("returncode") else "not run yet")
            how = MAKE.get(name, f"pairflow bench --only {RUN_BY.get(name, name)}")
            body.append(f"No results: {why}. Run `{how}`.")
            parts.append("\n\n".join(body))
            continue
        made_by = provenance(name, d)
        body.append(made_by)
        run = manifest.get(RUN_BY.get(name, name)) or {}
        if run.get("cut") and run.get("command") == (d.get("_record") or {}).get("command"):
            body.append(f"{CUT_LEAD}{run['cut']}.")
        elif not run and kept and made_by in kept:
            # the same run as the report's section, whose suite record (``bench_run.json``,
            # not in the repository) a fresh checkout lacks: keep what it said of the sizes
            body += [p for p in kept.split("\n\n") if p.startswith(CUT_LEAD)][:1]
        body.append(targets_table(d))
        try:
            body += section_module(name).section(d, ctx)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
            body.append(f"(figures not shown: this JSON lacks what the report reads: "
                        f"{type(err).__name__}: {err})")
        parts.append(with_notes("\n\n".join(x for x in body if x), name))
    text = "\n\n".join(x for x in parts if x).rstrip() + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(results_md)), exist_ok=True)
    with open(results_md, "w") as fh:
        fh.write(text)
    out = {"results_md": results_md, "plots_dir": plots_dir, "plots": ctx.made}
    if readme:
        with open(readme) as fh:
            old = fh.read()
        found = re.search(re.escape(HEADLINE_START) + r"(.*?)" + re.escape(HEADLINE_END), old,
                          re.S)
        new = replace_block(old, headline(all_, found.group(1).strip() if found else ""))
        if new != old:
            with open(readme, "w") as fh:
                fh.write(new)
        out["readme"] = readme
    return out


def _shown_path(path: str) -> str:
    """A path relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def _anchor(title: str, script: str) -> str:
    """GitHub's anchor of the heading ``## title — `benchmarks/script` ``."""
    text = f"{title} — benchmarks/{script}".lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(HERE, "out"),
                    help="where the JSON is (default benchmarks/out)")
    ap.add_argument("--results", help="RESULTS.md to write (default: benchmarks/RESULTS.md, "
                    "or DIR/RESULTS.md with --out-dir DIR)")
    ap.add_argument("--plots", help="plot directory (default: benchmarks/plots, or DIR/plots)")
    ap.add_argument("--readme", action="store_true",
                    help="also rewrite README.md's headline block (default only for "
                    "benchmarks/out)")
    args = ap.parse_args(argv)
    repo = os.path.abspath(args.out_dir) == os.path.join(HERE, "out")
    paths = build(args.out_dir,
                  results_md=args.results or (None if repo else
                                              os.path.join(args.out_dir, "RESULTS.md")),
                  plots_dir=args.plots or (None if repo else os.path.join(args.out_dir, "plots")),
                  readme=README if (repo or args.readme) else None)
    print(f"wrote {paths['results_md']} and {len(paths['plots'])} plots in {paths['plots_dir']}"
          + (f"; the headline block of {paths['readme']}" if paths.get("readme") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
