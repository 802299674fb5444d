"""Rebuild benchmarks/RESULTS.md, the plots and the README's headline block from the JSON alone.

    .venv/bin/python benchmarks/report.py                  # benchmarks/out -> RESULTS.md, plots
    .venv/bin/python benchmarks/report.py --out-dir DIR    # JSON of DIR, report written into DIR
    pairflow bench --report-only                           # the same as the first

Why: figures assembled by hand from runs of different days drift from the runs; here every
number comes from a benchmark's JSON, next to the exact command, date, code version and machine
that JSON records (``benchmarks/_record.py``), and every target is marked met or not by the
benchmark itself. Text that JSON cannot give (what a benchmark measures and why, how to read
it) lives in ``benchmarks/sections/NAME.md`` and is copied in as written.

Plots (PNG, matplotlib's Agg backend) go to benchmarks/plots/: R against the host tier's size
next to the model 1 + n/(2S) and Rocket's published point, efficiency per profile and per app
against Rocket's, and the engine against its peers for each benchmark that has peers.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "benchmarks")
RESULTS = os.path.join(HERE, "RESULTS.md")
PLOTS = os.path.join(HERE, "plots")
TEMPLATES = os.path.join(HERE, "sections")
README = os.path.join(ROOT, "README.md")
HEADLINE_START = "<!-- bench:headline:start -->"
HEADLINE_END = "<!-- bench:headline:end -->"

# Rocket (Heldens et al., SC'20), single node: system efficiency per application, and the one
# R it reports against cache size (R = 6.7 with a cache of 0.21 n; docs: /work/shared/DESIGN.md)
ROCKET_EFFICIENCY = {"microscopy": 0.992, "forensics": 0.946, "phylogeny": 0.885}
ROCKET_R = [(0.21, 6.7)]

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
    ("stealing", "Hierarchical scheduling: steals and round trips", "stealing.py"),
    ("kernels_micro", "Kernel micro-benchmarks: k-mers and Jaccard", "kernels_micro.py"),
    ("sw_micro", "Kernel micro-benchmarks: Smith-Waterman", "sw_micro.py"),
    ("dense_layout", "Dense results on small tiles: files and write time", "dense_layout.py"),
    ("dashboard", "Dashboard: a big dense result", "dashboard.py"),
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


def template(name: str) -> str:
    path = os.path.join(TEMPLATES, f"{name}.md")
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


def plot_r(data: dict, plots_dir: str, made: list) -> str | None:
    b = data.get("b_R")
    if not b or not b.get("real"):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    real = b["real"]
    n = real[0]["n"]
    x = [100 * r["fraction"] for r in real]
    ax.plot(x, [r["R_planned"] for r in real], "o-", color="C0", lw=2,
            label=f"pairflow, planned (real runs, n = {n})")
    ax.plot(x, [r["R_zorder_lru"] for r in real], "s-", color="C3",
            label=f"Z-order + LRU (real runs, n = {n})")
    big = b.get("simulated_large") or []
    if big:
        nb = big[0]["n"]
        xb = [100 * r["fraction"] for r in big]
        ax.plot(xb, [r["R_planned_simulated"] for r in big], "o--", color="C0", alpha=0.55,
                label=f"planned, simulated (n = {nb})")
        ax.plot(xb, [r["R_zorder_lru_simulated"] for r in big], "s--", color="C3", alpha=0.55,
                label=f"Z-order + LRU, simulated (n = {nb})")
    lo = min([r["fraction"] for r in real] + [r["fraction"] for r in big] + [0.2])
    fs = [f / 100 for f in range(max(1, int(90 * lo)), 101)]
    ax.plot([100 * f for f in fs], [1 + 1 / (2 * f) for f in fs], "k:", lw=1.5,
            label="model 1 + n/(2S)")
    ax.plot([100 * f for f, _ in ROCKET_R], [r for _, r in ROCKET_R], "D", color="C2", ms=9,
            label="Rocket, published (S = 0.21 n)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([5, 10, 20, 50, 100])
    ax.set_xticklabels(["5 %", "10 %", "20 %", "50 %", "100 %"])
    ax.set_yticks([1, 2, 5, 10, 20, 40])
    ax.set_yticklabels(["1", "2", "5", "10", "20", "40"])
    ax.set_xlabel("host tier S, as a fraction of the n items")
    ax.set_ylabel("R = item loads / n (log)")
    ax.set_title("R against cache size")
    ax.legend(fontsize=8.5, loc="upper right")
    return _save(fig, plots_dir, "r_vs_cache.png", made)


def plot_efficiency(allpairs: dict | None, apps: dict | None, plots_dir: str,
                    made: list) -> str | None:
    a = (allpairs or {}).get("a_efficiency") or {}
    ap = (apps or {}).get("apps") or {}
    if not a and not ap:
        return None
    plt = _plt()
    panels = [p for p in (a and "a", ap and "apps") if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel == "a":
            names = list(a)
            vals = [a[k]["efficiency"] for k in names]
            ax.bar(range(len(names)), vals, color="C0", label="pairflow")
            ax.set_xticks(range(len(names)))
            # "preprocess-heavy (n=200)" on three lines: six labels side by side must not touch
            ax.set_xticklabels([k.replace("-", "-\n", 1).replace(" (", "\n(") for k in names],
                               fontsize=8)
            ax.axhline(0.9, color="k", ls="--", lw=1, label="target 0.90")
            ax.set_title("synthetic profiles (allpairs part a)")
        else:
            names = list(ap)
            x = range(len(names))
            w = 0.27
            eng = [ap[k]["runs"]["engine_host_tier"]["efficiency"] for k in names]
            lim = [ap[k].get("two_process_limit") for k in names]
            roc = [ROCKET_EFFICIENCY.get(k) for k in names]
            ax.bar([i - w for i in x], eng, w, color="C0", label="pairflow")
            ax.bar(list(x), [v or 0 for v in lim], w, color="C7",
                   label="two plain processes\n(this machine's limit)")
            ax.bar([i + w for i in x], [v or 0 for v in roc], w, color="C2",
                   label="Rocket, published")
            ax.set_xticks(list(x))
            ax.set_xticklabels(names)
            ax.axhline(0.9, color="k", ls="--", lw=1, label="target 0.90")
            ax.set_title("Rocket's applications")
        for bar in ax.patches:
            if bar.get_height() > 0:
                ax.annotate(f"{bar.get_height():.2f}", (bar.get_x() + bar.get_width() / 2,
                                                        bar.get_height()),
                            ha="center", va="bottom", fontsize=7.5)
        ax.set_ylim(0, 1.35)
        ax.set_ylabel("system efficiency T_min / (p · T)")
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.suptitle("Efficiency per profile and per application, against the target and Rocket")
    return _save(fig, plots_dir, "efficiency.png", made)


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


# ---- sections -----------------------------------------------------------------------------

def _img(path: str | None, results_md: str) -> str:
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


def sec_allpairs(d, ctx):
    out = []
    a = d.get("a_efficiency")
    if a:
        rows = [[k, r["n"], num(r["T_min"], "s"), num(r["T"], "s"), f"**{num(r['efficiency'])}**",
                 ", ".join(num(x) for x in r.get("runs_efficiency", [])),
                 r.get("efficiency_vs_two_busy_cores"), r.get("efficiency_incl_startup"),
                 r["leaf"], r["R"], r["correct"]] for k, r in a.items()]
        out.append("### (a) system efficiency = T_min / (p · T)\n\n" + table(
            ["profile", "n", "T_min", "T", "efficiency", "each run",
             "vs stage times, both cores busy", "incl. start-up", "leaf", "R", "correct"], rows))
        cpu = cpu_table("profile", {k: r.get("cpu_shares") for k, r in a.items()})
        if cpu:
            out.append("CPU of the 2 cores over T, by who spent it:\n\n" + cpu)
    b = d.get("b_R")
    if b:
        rows = [[pct(r["fraction"]), r["S"], r["R_planned"], r["R_planned_simulated"],
                 r["R_zorder_lru"], r["R_zorder_lru_simulated"], r["model"],
                 f"**{num(r['planned_over_model'])}**"] for r in b["real"]]
        n = b["real"][0]["n"] if b["real"] else "?"
        out.append(f"### (b) R = loads / n against 1 + n/(2S)\n\nReal runs (n = {n}, leaf 1):"
                   "\n\n" + table(["S / n", "S", "R planned", "(sim)", "R Z-order/LRU", "(sim)",
                                   "1 + n/(2S)", "planned / model"], rows))
        big = b.get("simulated_large") or []
        if big:
            out.append(f"Simulated at n = {big[0]['n']}:\n\n" + table(
                ["S / n", "S", "R planned", "R Z-order/LRU", "1 + n/(2S)", "planned / model"],
                [[pct(r["fraction"]), r["S"], r["R_planned_simulated"],
                  r["R_zorder_lru_simulated"], r["model"], r["planned_over_model"]]
                 for r in big]))
        out.append(_img(plot_r(d, ctx["plots"], ctx["made"]), ctx["md"]))
    c = d.get("c_jaccard_vs_tools")
    if c:
        rows = [[f"pairflow (Ray running; R = {num(c['R'])}, leaf {c['leaf']})",
                 num(c["engine_wall_s"] - c["ray_init_s"], "s"), "1", "—"],
                ["mash (exact: sketch ≥ every union, 2 threads)", num(c["mash_s"], "s"),
                 f"**{num(c['speedup_vs_mash_running_ray'])}x**",
                 num(c["max_abs_diff_vs_mash"])]]
        if "sourmash_s" in c:
            rows.append(["sourmash (scaled=1, 2 processes)", num(c["sourmash_s"], "s"),
                         f"{num(c['speedup_vs_sourmash'])}x",
                         num(c["max_abs_diff_vs_sourmash"])])
        out.append(f"### (c) exact Jaccard of {c['n']} genomes (k = {c['k']}) against mash "
                   "and sourmash\n\n" + table(["tool", "wall time", "its time / pairflow's",
                                               "max abs difference"], rows))
        out.append(_img(plot_bars(
            f"Exact Jaccard, {c['n']} genomes: wall time",
            [("pairflow", c["engine_wall_s"] - c["ray_init_s"]), ("mash", c["mash_s"]),
             ("sourmash", c.get("sourmash_s")),
             ("one Ray task per pair", (d.get("d_naive") or {}).get("naive_s"))],
            "seconds (lower is better)", ctx["plots"], "peers_jaccard_tools.png", ctx["made"]),
            ctx["md"]))
    dn = d.get("d_naive")
    if dn:
        out.append("### (d) one Ray task per pair, no cache\n\n" + table(
            ["", "wall time", "its time / pairflow's (part c)"],
            [[f"one Ray task per pair ({dn['pairs']} pairs, each parsing both items)",
              num(dn["naive_s"], "s"), f"{num(dn.get('engine_speedup'))}x"]]))
    e = d.get("e_journal")
    if e:
        out.append("### (e) journal overhead\n\n" + table(["measure", "figure"], [
            ["direct: journal time on the scheduler's path / T (median)",
             f"**{pct(e['direct_overhead'])}** (max {pct(e['direct_overhead_max'])})"],
            ["background fsyncs / T", pct(e["background_fsync_fraction"])],
            ["A/B medians, with vs without", f"{num(e['with_journal_median_s'], 's')} vs "
             f"{num(e['without_journal_median_s'], 's')}: {pct(e['ab_overhead'])}"],
            ["A/B spread of the runs without", pct(e["ab_spread_without"])],
            ["tiles", e["tiles"]]]))
    f = d.get("f_resume")
    if f:
        out.append("### (f) resume of a run that was 90 % done\n\n" + table(
            ["run", "tiles", "full run (after Ray start)", "resume", "ratio", "resume start-up"],
            [[k, r["tiles"], num(r["full_s"], "s"), num(r["resume_s"], "s"),
              f"**{pct(r['ratio'])}**", num(r["resume_startup_s"], "s")] for k, r in f.items()]))
    return out


def sec_peers(d, ctx):
    peers = d.get("peers") or {}
    rows = [[k, num(r["wall_s"], "s"), num(r.get("pairflow_speedup")) + "x",
             num(r.get("R")), num(r.get("max_abs_diff_vs_pairflow"))] for k, r in peers.items()]
    out = [f"{d['n']} genomes, {d['pairs']} pairs, k = {d['k']}. pairflow runs at "
           f"**{num(d.get('pairflow_of_no_reuse_limit'))}** of the no-reuse limit "
           "(multiprocessing with every item in memory: limit time / pairflow's time).\n\n"
           + table(["contender", "wall time", "its time / pairflow's", "R",
                    "max abs difference from pairflow"], rows)]
    out.append(_img(plot_bars(f"All pairs of {d['n']} genomes (exact Jaccard): wall time",
                              [(k, r["wall_s"]) for k, r in peers.items()],
                              "seconds (lower is better)", ctx["plots"], "peers_allpairs.png",
                              ctx["made"]), ctx["md"]))
    return out


def sec_align(d, ctx):
    rows = []
    bars = []
    for name, r in (d.get("inputs") or {}).items():
        e = r.get("engine")
        if not e:
            continue
        rows.append([f"{name} ({r['queries']} x {r['targets']})",
                     num(r["single_cells_per_s"] / 1e9, "Gcells/s"), r["two_process_limit"],
                     f"{num(e['cells_per_s'] / 1e9, 'Gcells/s')} ({num(e['compute_s'], 's')}, "
                     f"{e['tiles']} tiles)", f"**{num(e['efficiency'])}**",
                     ", ".join(num(x) for x in e.get("runs_efficiency", [])),
                     e["of_two_process_limit"], num(e["vs_numpy"]) + "x"])
        bars += [(f"pairflow, {name}", e["cells_per_s"] / 1e9),
                 (f"2 x parasail alone, {name}", 2 * r["single_cells_per_s"] / 1e9),
                 (f"2 plain processes, {name}",
                  2 * r["single_cells_per_s"] * r["two_process_limit"] / 1e9)]
    out = [table(["input", "single process", "two plain processes (of 2 x single)",
                  "engine, best run", "efficiency", "each run", "of the limit", "vs numpy"],
                 rows)]
    out.append(_img(plot_bars("Smith-Waterman on 2 cores: throughput", bars,
                              "Gcells/s (higher is better)", ctx["plots"], "peers_align.png",
                              ctx["made"]), ctx["md"]))
    return out


def sec_apps(d, ctx):
    rows, shares = [], {}
    for name, r in (d.get("apps") or {}).items():
        for label, run in r["runs"].items():
            first = label == "engine_host_tier"
            each = run.get("each") or []
            if "T_min_each" in r:
                sides = sorted(set(r.get("T_min_sides") or []))
                bracket = f", measured {len(r['T_min_each'])} times" + (
                    f" in tiles of {' and '.join(map(str, sides))}" if sides else "") + \
                    ": " + ", ".join(num(x, "s") for x in r["T_min_each"])
            elif "T_min_after" in r:
                bracket = f", {num(r['T_min_before'], 's')} before the run and " \
                    f"{num(r['T_min_after'], 's')} after"
            else:
                bracket = ""
            rows.append([f"{name} (n = {r['n']}, {r['pairs']} pairs, T_min "
                         f"{num(r['T_min'], 's')}{bracket})" if first else "",
                         num(r["two_process_limit"]) if first else "",
                         num(r["mix_limit"]) if first and "mix_limit" in r else "",
                         f"{'engine' if first else '25 %'} ({run['host_cache_items']} of "
                         f"{r['n']})", f"**{num(run['efficiency'])}**",
                         ", ".join(num(x) for x in each) if len(each) > 1 else "",
                         run["of_two_process_limit"], num(run.get("of_mix_limit")),
                         run["R"], run["leaf"],
                         num(r["rocket_efficiency"]) if first else ""])
            if first:
                shares[name] = run.get("cpu_shares")
    out = [table(["app (problem)", "two-process limit", "mix limit", "host tier",
                  "efficiency (median run)", "each run", "of the limit", "of the mix limit",
                  "R", "leaf", "Rocket"], rows)]
    cpu = cpu_table("app", shares)
    if cpu:
        out.append("CPU of the 2 cores over the median run's T, by who spent it:\n\n" + cpu)
    ph = (d.get("apps") or {}).get("phylogeny") or {}
    if "bruteforce_reference_s" in ph:
        out.append(f"Phylogeny at k = {ph['reference_k']} against the dense brute-force "
                   f"reference: pairflow wall {num(ph['reference_wall_s'], 's')} (compute "
                   f"{num(ph['reference_compute_s'], 's')}), reference "
                   f"{num(ph['bruteforce_reference_s'], 's')}.")
    out.append(_img(plot_efficiency(ctx["all"].get("allpairs"), d, ctx["plots"], ctx["made"]),
                    ctx["md"]))
    return out


def sec_startup(d, ctx):
    s, j, r = d["three_records"], d["default_job"], d["ray_job"]
    runs = d["session"]["runs"]
    rows = [["3-record FASTA", f"{num(s['wall_s'], 's')} end to end, {num(s['cpu_s'], 's')} "
             f"of CPU ({s['executor']})"],
            [f"default job, {d['n_genomes']} genomes", f"{num(j['wall_s'], 's')} end to end "
             f"for {num(j['compute_s'], 's')} of compute ({num(j['over_compute_s'], 's')} over; "
             f"{j['executor']})"],
            ["exact mash, same genomes, 2 threads", f"{num(d['mash_s'], 's')}: pairflow "
             f"{num(d['speedup_vs_mash'])}x faster end to end ({num(d['speedup_vs_mash_on_ray'])}x"
             " on the Ray path)"],
            ["Ray path", f"{num(r['wall_s'], 's')}: Ray start {num(r.get('ray_init_s'), 's')} "
             f"({num(r.get('ray_wait_s'), 's')} not hidden by the checks), checks "
             f"{num(r.get('checks_s'), 's')}, probe {num(r.get('probe_s'), 's')}, actors "
             f"{num(r.get('actors_s'), 's')}, first tile {num(r.get('first_tile_s'), 's')}, "
             f"compute {num(r['compute_s'], 's')}"],
            ["session (Ray kept up)", f"first run {num(runs[0]['wall_s'], 's')}, later runs "
             + ", ".join(num(x["wall_s"], "s") for x in runs[1:])],
            ["imports", f"CLI {num(d['imports']['cli']['total_s'], 's')}, a run's modules "
             f"{num(d['imports']['run_modules']['total_s'], 's')}, `pairflow --help` "
             f"{num(d['help_s'], 's')}"]]
    out = [table(["case", "figure"], rows)]
    out.append(_img(plot_bars(f"Exact Jaccard of {d['n_genomes']} genomes, end to end",
                              [("pairflow (default job)", j["wall_s"]),
                               ("pairflow (Ray path)", r["wall_s"]), ("mash", d["mash_s"])],
                              "seconds from the command line (lower is better)", ctx["plots"],
                              "peers_startup.png", ctx["made"]), ctx["md"]))
    return out


def sec_pipeline(d, ctx):
    out = []
    a = d.get("a_synthetic")
    if a:
        out.append("### (a) synthetic pipelines with known costs and pass rates\n\n" + table(
            ["pipeline", "written order", "best static (brute force)", "adaptive",
             "adaptive / best static", "written / adaptive"],
            [[k, num(r["median_s"]["written"], "s"), num(r["best_static_s"], "s"),
              num(r["median_s"]["adaptive"], "s"), f"**{num(r['adaptive_over_best_static'])}**",
              num(r["written_over_adaptive"]) + "x"] for k, r in a.items()]))
    b = d.get("b_hep")
    if b:
        med = b["median_s"]
        a_s = med["adaptive (from poor)"]
        out.append(f"### (b) the HEP app ({b['events']:,} events, {b['selected']} selected by "
                   "every order)\n\n" + table(["order", "median", "vs adaptive"],
                                              [[k, num(v, "s"), num(v / a_s) + "x"]
                                               for k, v in med.items()]))
        out.append(_img(plot_bars("HEP selection: compute time per order",
                                  [("pairflow, adaptive" if k.startswith("adaptive") else k, v)
                                   for k, v in med.items()], "seconds (lower is better)",
                                  ctx["plots"], "peers_pipeline_hep.png", ctx["made"]),
                        ctx["md"]))
    c = d.get("c_dsdp")
    if c:
        rows = []
        for k, r in c.items():
            fixed = {x: v for x, v in r["median_s"].items() if x != "balanced"}
            best = min(fixed, key=fixed.get)
            worst = max(fixed, key=fixed.get)
            rows.append([k, f"{num(r['median_s']['balanced'], 's')} (ends at "
                         f"{r.get('final_split', '?')})", f"{num(fixed[best], 's')} ({best}): "
                         f"balanced is {num(r['balanced_over_best_fixed'])}x",
                         f"{num(fixed[worst], 's')} ({worst}): "
                         f"{num(r['worst_fixed_over_balanced'])}x slower"])
        out.append(f"### (c) data-setup vs processing balance ({next(iter(c.values()))['slots']} "
                   "slots)\n\n" + table(["variant", "balanced", "best fixed split",
                                         "worst fixed split"], rows))
    return out


FARM_ROWS = {"blastp_all": "blastp, all {records:,} queries",
             "blastp_50": "blastp, first {records} queries",
             "hmmsearch_all": "hmmsearch, all {records:,} profiles",
             "hmmsearch_50": "hmmsearch, first {records} profiles",
             "clustalo": "clustalo, {records} BAliBASE files"}


def farm_verdict(r: dict) -> str:
    """wins / loses against the alternative, and the target where the benchmark set one."""
    word = "wins" if r["ratio"] <= 1 else "**loses**"
    if r.get("limit") is not None:
        met = r["ratio"] <= r["limit"]
        word += f"; target ≤ {num(r['limit'])}x " + ("met" if met else "**not met**")
    if not r["identical_hits"]:
        word += "; hits **differ**"
    return word


def sec_farm(d, ctx):
    if "rows" not in d:  # a farm.json of the old benchmark (overheads against its own units)
        return ["An old `farm.json` (before issue 59's baselines): rerun "
                "`pairflow bench --only farm`."]
    rows = []
    for name, r in d["rows"].items():
        label = FARM_ROWS.get(name, name).format(records=r["records"])
        rows.append([label, num(r["pairflow_s"], "s"), f"{r['alternative']}: "
                     f"{num(r['alternative_s'], 's')}", f"{num(r['ratio'])}x (per repetition "
                     f"{num(r['ratio_paired'])}x)", farm_verdict(r)])
    la = d.get("load_avg_1min") or {}
    out = [f"{d['queries']} against {d['db']}, p = {d['p']} threads for the alternative; "
           f"medians of {d['full_reps']} (whole proteome) and {d['reps']} (the rest) "
           f"interleaved repetitions; 1-minute load average during the run "
           f"{num(la.get('min'))}-{num(la.get('max'))} (median {num(la.get('median'))}) "
           f"on {d['p']} cores.\n\n"
           + table(["case", "pairflow", "the user's alternative", "ratio", "verdict"], rows)]
    detail = []
    for name, r in d["rows"].items():
        units = sorted(set(r["unit_records"]))
        detail.append([FARM_ROWS.get(name, name).format(records=r["records"]),
                       ", ".join(sorted(set(map(str, r["executor"])))),
                       ", ".join(map(str, units)), ", ".join(map(str, sorted(set(r["units"])))),
                       str(r["threads"]), f"{r['n_hits']:,}"])
    out.append("How the farm ran (per case: executor, records per unit chosen, units, cores "
               "per worker, hit lines):\n\n" + table(
                   ["case", "executor", "unit records", "units", "threads", "hits"], detail))
    out.append(f"`from pairflow.engine import farm` costs {num(d['python_import_s'], 's')} in a fresh "
               "interpreter here, not counted on pairflow's side (the farm is timed as called "
               "from Python: `farm(...)` + `gather(...)`).")
    out.append(_img(plot_bars("tool farm against the tool's own threads: pairflow / "
                              "alternative", [(FARM_ROWS.get(k, k).format(records=r["records"]),
                                               r["ratio"]) for k, r in d["rows"].items()],
                              "time ratio (lower is better; 1 = as fast)", ctx["plots"],
                              "peers_farm.png", ctx["made"]), ctx["md"]))
    return out


def sec_cluster(d, ctx):
    modes = {m: d[m] for m in ("wait", "burn") if isinstance(d.get(m), dict)} or {"": d}
    out = []
    for mode, r in modes.items():
        t = r["together"]
        label = {"wait": "compares wait on a modelled device (sleep)",
                 "burn": "compares burn the CPU"}.get(mode, "")
        judge = "yes" if r.get("judgeable", True) else \
            "no: more actors than cores, they contend (the factors are not the speeds)"
        out.append(table(["measure", f"{mode or 'run'}: {label}".rstrip(": ")], [
            ["slow-down factors of the 3 device actors", ", ".join(map(str, r["factors"]))],
            ["items, seconds per compare", f"{r['n']}, {num(r['t_cmp'], 's')}"],
            ["each actor's end", ", ".join(f"{k} {num(v, 's')}" for k, v in
                                           sorted(t["ends_s"].items()))],
            ["end spread / compute time", f"**{pct(r['end_spread'])}**"],
            ["throughput / sum of solo throughputs", f"**{num(r['throughput_ratio'])}**"],
            ["targets judgeable", judge],
            ["cores of the machine", r.get("cores", "?")]]))
    return out


def sec_scaling(d, ctx):
    real = [[r["nodes"], "on" if r["l3"] else "off", f"{r['n']} / {r['S']}", num(r["R"]),
             num(r.get("simulated_R")),
             num(r["bytes_from_storage"] / 1e6), r["l3_hits_per_hop"],
             (r.get("scheduling") or {}).get("steals"),
             num((r.get("scheduling") or {}).get("round_trips_per_tile")),
             "yes" if r["exact"] else "**no**"] for r in d.get("real") or []]
    sim = [[r["nodes"], r["plan"], "on" if r["l3"] else "off", f"{r['n']} / {r['S']}",
            num(r["R"]), r["l3_hits_per_hop"], r.get("rocket_R") or "—"]
           for r in d.get("simulated") or []]
    out = [d.get("note", "")]
    if real:
        out.append(table(["real nodes", "L3", "n / S", "R", "simulated R", "MB from storage",
                          "L3 hits per hop", "steals", "head round trips per tile", "exact"],
                         real))
    out.append(table(["simulated nodes", "plan", "L3", "n / S", "R", "L3 hits per hop",
                      "Rocket's R"], sim))
    return out


def sec_stealing(d, ctx):
    return [table(["nodes", "hierarchical", "tiles", "steals", "head round trips",
                   "per tile", "handed out in nodes", "R"],
                  [[r["nodes"], r["hierarchical"], r["tiles"], r["steals"],
                    r["head_round_trips"], num(r["round_trips_per_tile"]),
                    r.get("local_handouts", 0), num(r["R"])] for r in d["runs"]])]


def sec_many_small(d, ctx):
    rows = []
    for c in d.get("reads") or []:
        e = c["engine"]
        rows.append([c["set"], c["k"], f"{c['kept']:,}", f"{e['pairs']:,}",
                     num(e["pairs_per_s"] / 1e6), e.get("executor", "—"),
                     num(c["bare_popcount"]["pairs_per_s"] / 1e6),
                     f"**{num(c['engine_vs_bare_popcount'])}**",
                     (f"{num(c['bare_popcount_4k']['pairs_per_s'] / 1e6)} -> "
                      f"{num(c['engine_vs_bare_popcount_4k'])}"
                      if c.get("bare_popcount_4k") else "—"),
                     (f"untimed first run {num(c['cold_run']['vs_bare_popcount'])}; "
                      if c.get("cold_run") else "")
                     + (", ".join(num(r) for r in c.get("repetitions") or []) or "—"),
                     num((c.get("bare_popcount_best") or {}).get("pairs_per_s", 0) / 1e6
                         or None),
                     num(c.get("engine_vs_bare_popcount_best")), c.get("count", "—"),
                     num((c.get("bare_topk") or {}).get("pairs_per_s", 0) / 1e6 or None),
                     num(c.get("engine_vs_bare_topk")),
                     num(c["bare_jaccard"]["pairs_per_s"] / 1e6),
                     num(c["bare_merge"]["pairs_per_s"] / 1e6) if "bare_merge" in c else "—",
                     num(c["engine_merge"]["pairs_per_s"] / 1e6) if "engine_merge" in c else "—",
                     num(c.get("target"))])
    out = [table(["reads", "k", "kept", "pairs", "engine M pairs/s", "executor",
                  "bare popcount M/s",
                  "engine / bare popcount", "plain loop on 4^k-bit rows M/s -> engine / it",
                  "repetitions (run order)", "library count M/s", "engine / library count",
                  "count", "engine's top-k kernel bare M/s", "engine / its kernel",
                  "bare jaccard M/s", "bare merge M/s",
                  "engine merge M/s", "target"], rows)]
    first = (d.get("reads") or [None])[0]
    if first:
        out.append(_img(plot_bars(
            f"Jaccard of {first['kept']:,} reads, k = {first['k']}: throughput",
            [("pairflow (bitset kernel)", first["engine"]["pairs_per_s"] / 1e6),
             ("bare popcount, 2 threads", first["bare_popcount"]["pairs_per_s"] / 1e6),
             ("its top-k kernel bare, 2 threads",
              (first.get("bare_topk") or {}).get("pairs_per_s", 0) / 1e6 or None),
             ("bare jaccard, 2 threads", first["bare_jaccard"]["pairs_per_s"] / 1e6),
             ("pairflow (merge kernel)", (first.get("engine_merge") or {}).get("pairs_per_s",
                                                                              0) / 1e6 or None),
             ("bare merge, 2 threads", (first.get("bare_merge") or {}).get("pairs_per_s",
                                                                          0) / 1e6 or None)],
            "million pairs per second (higher is better)", ctx["plots"],
            "peers_many_small_reads.png", ctx["made"]), ctx["md"]))
    return out


def sec_many_small_proteomes(d, ctx):
    i = d["inputs"]
    out = [f"{i['n_queries']} x {i['n_targets']} proteins ({num(i['cells'] / 1e9)} Gcells), "
           f"{i['scoring']}, top {i['top_k']}, E ≤ {i['evalue']}.\n\n" + table(
               ["contender", "Gcells/s", "wall"], [
                   ["parasail, 2 plain processes", num(d["kernel_2p"]["cells_per_s"] / 1e9),
                    num(d["kernel_2p"]["seconds"], "s")],
                   ["Opal (pyopal), 2 plain processes", num(d["pyopal_2p"]["cells_per_s"] / 1e9),
                    num(d["pyopal_2p"]["seconds"], "s")],
                   [f"pairflow, parasail kernel ({d['engine_parasail'].get('executor', '?')})",
                    num(d["engine_parasail"]["cells_per_s"] / 1e9),
                    num(d["engine_parasail"]["run_wall_s"], "s")],
                   *([[f"pairflow, parasail kernel, forced onto Ray (efficiency "
                       f"{num(d['engine_parasail_ray']['efficiency'])})",
                       num(d["engine_parasail_ray"]["cells_per_s"] / 1e9), "—"]]
                     if d.get("engine_parasail_ray") else []),
                   ["pairflow, auto kernel", num(d["engine"]["cells_per_s"] / 1e9),
                    f"{num(d['engine']['call_wall_s'], 's')} (whole call)"],
                   ["blastp -num_threads 2 (heuristic)", "—", num(d["blastp"]["wall_s"], "s")]]),
           f"Efficiency (engine / the same kernel in 2 processes): **{num(d['efficiency'])}**"
           + (f" (the median of {len(d['efficiencies'])} interleaved repetitions: "
              f"{', '.join(num(x) for x in d['efficiencies'])})" if d.get("efficiencies") else "")
           + "; "
           f"engine / the faster kernel: {num(d['vs_best_kernel'])}; pairflow's whole call "
           f"takes {num(d['engine_wall_vs_blastp'])}x blastp's time; blastp finds "
           f"{pct(d['recall']['blastp_recall'])} of the exact hits at E ≤ {i['evalue']}."]
    out.append(_img(plot_bars("Proteome against proteome: wall time",
                              [("pairflow (auto kernel, whole call)", d["engine"]["call_wall_s"]),
                               ("parasail, 2 processes", d["kernel_2p"]["seconds"]),
                               ("Opal, 2 processes", d["pyopal_2p"]["seconds"]),
                               ("blastp, 2 threads", d["blastp"]["wall_s"])],
                              "seconds (lower is better)", ctx["plots"],
                              "peers_proteomes.png", ctx["made"]), ctx["md"]))
    return out


def sec_planner(d, ctx):
    out = []
    a = d.get("a_simulated")
    if a:
        out.append("### (a) simulated: the plan chosen\n\n" + table(
            ["n", "leaf", "S", "chosen", "R chosen", "choice took"],
            [[r["n"], r["leaf"], r["S"], r["chosen"], r["R_chosen"], num(r["choose_s"], "s")]
             for r in a]))
    c = (d.get("c_large") or {}).get("choices")
    if c:
        out.append("### (c) large runs: the leaf-block grid against item by item\n\n" + table(
            ["n", "leaf", "S", "chosen (its exact R)", "best item by item (R)",
             "R on the grid, off by at most", "choice took", "item by item", "speed-up"],
            [[r["n"], r["leaf"], r["S"], f"{r['chosen']} ({num(r['R_chosen_exact'])})",
              f"{r['best_exact']} ({num(r['R_best_exact'])})", f"{r['max_rel_diff']:.1%}",
              num(r["choose_s"], "s"), num(r["exact_s"], "s"), f"{num(r['speedup'])}x"]
             for r in c]))
    sized = (d.get("c_large") or {}).get("sizing")
    if sized:
        out.append("A run's whole sizing (`sizing.plan_run`: the leaf search, a choice per "
                   "candidate leaf; one node of 2 CPUs):\n\n" + table(
                       ["n", "S", "leaf, plan", "took", "item by item: leaf, plan", "took",
                        "speed-up"],
                       [[r["n"], r["S"], f"{r['leaf']}, {r['plan']}/{r['eviction']}",
                         num(r["plan_s"], "s"), f"{r['leaf_items']}, {r['plan_items']}",
                         num(r["plan_items_s"], "s"), f"{num(r['speedup'])}x"] for r in sized]))
    b = d.get("b_real")
    if b:
        out.append("### (b) real runs, host tier of 4 items\n\n" + table(
            ["run", "plan / eviction", "R", "simulated R", "leaf", "wall"],
            [[r["label"], f"{r['plan']}/{r['eviction']}", r["R"], r.get("simulated_R"),
              r["leaf"], num(r["wall_s"], "s")] for r in b]))
    return out


def sec_kernels_micro(d, ctx):
    rows = [[k, num(r["mb"]), num(r["read_s"], "s"), num(r["kmers_s"], "s"),
             num(r["kmers_npsort_s"], "s"), f"{r['n_kmers']:,}"]
            for k, r in (d.get("genomes") or {}).items()]
    out = [table(["genome", "Mb", "read", "k-mers (radix)", "k-mers (np.sort)", "k-mers"], rows)]
    pairs = d.get("pairs") or {}
    if pairs:
        out.append(table(["pair", "sizes", "merge", "gallop", "np.intersect1d"],
                         [[k, " vs ".join(f"{x:,}" for x in r["sizes"]),
                           num(r["merge_ms"], "ms"), num(r["gallop_ms"], "ms"),
                           num(r["intersect1d_ms"], "ms")] for k, r in pairs.items()]))
    pr = d.get("prnu")
    if pr:
        out.append(f"PRNU residual and half spectrum of a {pr['side']}² photo (forensics' parse): "
                   f"{num(pr['compiled_scipy_fft_ms'], 'ms')} with the compiled loops and "
                   f"scipy.fft, {num(pr['array_code_numpy_fft_ms'], 'ms')} by the array-API code "
                   f"and numpy.fft ({num(pr['speedup'])}x).")
    return out


def sec_sw_micro(d, ctx):
    rows = []
    for name, r in (d.get("workloads") or {}).items():
        for variant, v in r["gcells_per_s"].items():
            rows.append([name, variant, num(v)])
    return [table(["workload", "variant", "Gcells/s, one core"], rows),
            f"numpy reference: {num(d.get('reference_mcells_per_s'))} Mcells/s; traceback "
            f"{num(d.get('traceback_ms_per_globin_pair'), 'ms')} per globin pair."]


def sec_dense_layout(d, ctx):
    fields = sorted(d["files_per_field"])
    return [table(["field", "files", "chunks", "dask tasks"],
                  [[f, num(d["files_per_field"][f]), num(d["chunks_per_field"][f]),
                    num(d["dask_tasks_per_field"][f])] for f in fields]),
            f"The run: `{d['command']}`. "
            f"{num(d['n'])} records, leaf {num(d['leaf'])}, {num(d['tiles'])} tiles "
            f"({d['executor']}), chunks of {' x '.join(str(c) for c in d['chunk_shape'])}: "
            f"the actors spent {num(d['write_s'], 's')} writing tiles against "
            f"{num(d['compare_s'], 's')} comparing them (write share "
            f"{num(100 * d['write_share'])} %); the driver's finalize, which writes every "
            f"chunk, took {num(d['finalize_s'], 's')} of a {num(d['wall_s'], 's')} run."]


# ---- the headline table (README) ----------------------------------------------------------

def sec_dashboard(d, ctx):
    return [table(["measure", "figure"], [
        ["dense result", f"n = {d['n']:,} items, one field, {num(d['matrix_bytes'] / 2**30)} GiB of zarr"],
        ["server up (health check answers)", num(d["healthy_s"], "s")],
        ["results view open: navigation to heatmap drawn", f"**{num(d['open_s'], 's')}**"],
        ["the same, a second page on the warm server", num(d["open_warm_s"], "s")],
        ["a 120 x 120 region typed in, drawn cell by cell", num(d["region_s"], "s")],
        ["server's peak resident memory", f"**{num(d['server_peak_rss_mib'], 'MiB')}**"],
        ["what the page said", f"`{d['facts']}`"]])]


def headline(all_: dict, old_block: str = "") -> str:
    """Rows for the README: what pairflow is held to, the figure, and whether it wins, meets
    its target, or loses, each from the same JSON as RESULTS.md. Rows of ``old_block`` (the
    README's current block) that no JSON here gives again stay as they were, in their place:
    a checkout holds only the JSON of the benchmarks run in it (``kept_rows``)."""
    rows = []

    def add(what, figure, against, verdict):
        rows.append([what, figure, against, verdict])

    ap = all_.get("allpairs") or {}
    a = ap.get("a_efficiency") or {}
    large = {k: v for k, v in a.items() if "(n=" in k}  # the larger size, where it is read
    if large:
        lo = min(v["efficiency"] for v in large.values())
        add("all-pairs system efficiency, 3 synthetic profiles (the larger runs)",
            " / ".join(num(v["efficiency"]) for v in large.values()), "target ≥ 0.90",
            "met" if lo >= 0.9 else "**not met**")
    b = (ap.get("b_R") or {}).get("real") or []
    if b:
        worst = max(r["planned_over_model"] for r in b if r["fraction"] <= 0.5)
        add("R against the model 1 + n/(2S), S ≤ 50 %", f"≤ {num(worst)} of the model",
            "target ≤ 1.1", "met" if worst <= 1.1 else "**not met**")
    c = ap.get("c_jaccard_vs_tools")
    if c:
        sp = c["speedup_vs_mash_running_ray"]
        add(f"exact Jaccard, {c['n']} genomes, vs mash (exact)",
            f"{num(sp)}x faster" if sp >= 1 else f"{num(1 / sp)}x slower", "target ≥ 1.5x",
            "wins" if c["speedup_vs_mash_running_ray"] >= 1.5 else "**loses**")
    pe = (all_.get("peers") or {}).get("peers") or {}
    for name, r in pe.items():
        if name == "pairflow":
            continue
        sp = r["pairflow_speedup"]
        add(f"all pairs of {all_['peers']['n']} genomes vs {name}",
            f"{num(sp)}x faster" if sp >= 1 else f"{num(1 / sp)}x slower", "side by side",
            "wins" if sp >= 1 else "**loses**")
    al = (all_.get("align") or {}).get("summary")
    if al:
        add("Smith-Waterman efficiency vs 2 x parasail alone (balanced / skewed)",
            f"{num(al['efficiency_balanced'])} / {num(al['efficiency_skewed'])}",
            "target ≥ 0.85", "met" if al["meets_efficiency"] else "**not met**")
    apps = (all_.get("apps") or {}).get("apps") or {}
    for name, r in apps.items():
        e = r["runs"]["engine_host_tier"]["efficiency"]
        add(f"{name}: system efficiency vs Rocket's", f"{num(e)} (machine limit "
            f"{num(r['two_process_limit'])})", f"Rocket {num(r['rocket_efficiency'])}",
            "**loses**" if e < r["rocket_efficiency"] else "wins")
    st = all_.get("startup")
    if st:
        add("3-record FASTA, end to end", num(st["three_records"]["wall_s"], "s"),
            "target ≤ 1.5 s", "met" if st["three_records"]["wall_s"] <= 1.5 else "**not met**")
        sp = st["speedup_vs_mash"]
        add(f"default job ({st['n_genomes']} genomes) vs exact mash, end to end",
            f"{num(sp)}x faster" if sp >= 1 else f"{num(1 / sp)}x slower", "target ≥ 3x",
            "wins" if st["speedup_vs_mash"] >= 3 else "**loses**")
    pl = (all_.get("pipeline") or {}).get("a_synthetic") or {}
    if pl:
        worst = max(r["adaptive_over_best_static"] for r in pl.values())
        add("adaptive pipeline order vs the best static order", f"≤ {num(worst)}x",
            "target ≤ 1.1x", "met" if worst <= 1.1 else "**not met**")
    hep = (all_.get("pipeline") or {}).get("b_hep")
    if hep:
        w = hep["written_fixed_over_adaptive"]
        add("HEP selection vs the physicist's hand order", f"hand order at {num(w)}x of "
            "adaptive's time", "side by side", "wins" if w >= 1 else "**loses**")
    fm = all_.get("farm")
    for name, r in ((fm or {}).get("rows") or {}).items():
        add(f"tool farm: {FARM_ROWS.get(name, name).format(records=r['records'])}",
            num(r["pairflow_s"], "s"), f"{r['alternative']}: {num(r['alternative_s'], 's')} "
            f"({num(r['ratio'])}x)", farm_verdict(r))
    ms = all_.get("many_small") or {}
    for cse in ms.get("reads") or []:
        if cse.get("target") is not None:
            v = cse["engine_vs_bare_popcount"]
            add(f"reads (k = {cse['k']}) vs the bare bitset kernel", num(v),
                f"target ≥ {num(cse['target'])}", "met" if v >= cse["target"] else "**loses**")
    pr = all_.get("many_small_proteomes")
    if pr:
        add("proteome vs proteome, whole call vs blastp (heuristic)",
            f"{num(pr['engine_wall_vs_blastp'])}x blastp's time",
            f"blastp recall {pct(pr['recall']['blastp_recall'])}",
            "**loses** on time, exact" if pr["engine_wall_vs_blastp"] > 1 else "wins")
    rows = kept_rows(old_block, rows)
    if not rows:
        return "No benchmark results yet: run `pairflow bench`."
    dates = {(d.get("_record") or {}).get("date", "")[:10] for d in all_.values()} - {""}
    dates = sorted(dates | set(re.findall(r"\d{4}-\d{2}-\d{2}", old_block.split("\n")[0])))
    when = f" (runs of {', '.join(dates)})" if dates else ""
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
    made: list[str] = []
    ctx = {"plots": plots_dir, "made": made, "md": results_md, "all": all_}
    manifest = {}
    mpath = os.path.join(out_dir, "bench_run.json")
    if os.path.exists(mpath):
        with open(mpath) as fh:
            manifest = {r["name"]: r for r in json.load(fh).get("benchmarks", [])}
    parts = ["# Benchmark results", "<!-- generated by benchmarks/report.py from the JSON in "
             "benchmarks/out: edit benchmarks/sections/*.md, not this file -->",
             template("_intro")]
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
    runners = {RUN_BY.get(n, n) for n, _, _ in SECTIONS}
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
            parts.append(kept)
            continue
        if d is None:
            rec = manifest.get(RUN_BY.get(name, name))
            why = (f"failed (exit {rec['returncode']}; log `{_shown_path(rec['log'])}`)"
                   if rec and rec.get("returncode") else "not run yet")
            body.append(f"No results: {why}. Run `pairflow bench --only "
                        f"{RUN_BY.get(name, name)}`.")
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
            body += globals()[f"sec_{name}"](d, ctx)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
            body.append(f"(figures not shown: this JSON lacks what the report reads: "
                        f"{type(err).__name__}: {err})")
        notes = template(name)
        if notes:
            body.append(notes)
        parts.append("\n\n".join(x for x in body if x))
    text = "\n\n".join(x for x in parts if x).rstrip() + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(results_md)), exist_ok=True)
    with open(results_md, "w") as fh:
        fh.write(text)
    out = {"results_md": results_md, "plots_dir": plots_dir, "plots": made}
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
