"""The "Filter pipelines" section of RESULTS.md, from `benchmarks/out/pipeline.json`
(written by `benchmarks/pipeline.py`); its explanation is `pipeline.md` beside this file."""
from __future__ import annotations

import os

from report import img, num, plot_bars, table


def _goal(case: str) -> str:
    return "within 1.5 s" if case == "bundled" else "≤ 1.0x"


def _verdict(case: str, r: dict) -> str:
    """Wins or loses against the script, and whether issue 59's target is met."""
    met = r["pairflow_minus_plain_s"] <= 1.5 if case == "bundled" \
        else r["pairflow_over_plain"] <= 1.0
    wins = "wins" if r["median_s"]["pairflow"] <= r["median_s"]["plain"] else "**loses**"
    return f"{wins}, target {'met' if met else '**not met**'}"


def _short(cmd: str) -> str:
    """A command as shown: a path to the cached replicated file by its name only."""
    return " ".join(f"data.file=…/{os.path.basename(w.split('=', 1)[1])}"
                    if w.startswith("data.file=") else w for w in cmd.split())


def section(d: dict, ctx) -> list[str]:
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
        out.append(img(plot_bars("HEP selection: compute time per order",
                                 [("pairflow, adaptive" if k.startswith("adaptive") else k, v)
                                  for k, v in med.items()], "seconds (lower is better)",
                                 ctx.plots, "peers_pipeline_hep.png", ctx.made),
                       ctx.md))
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
    dp = d.get("d_plain")
    if dp:
        rows = [[f"{case}: {r['events']:,} events ({r['selected']:,} selected by both)",
                 f"{num(r['median_s']['pairflow'], 's')} (`{_short(r['commands']['pairflow'])}`"
                 + (f"; {r['pairflow_ran'][-1]}" if (r.get("pairflow_ran") or [None])[-1]
                    else "") + ")",
                 num(r["median_s"]["plain"], "s"), num(r["pairflow_over_plain"]) + "x",
                 _goal(case), _verdict(case, r)] for case, r in dp.items()]
        out.append("### (d) against the plain columnar script, end to end\n\n" + table(
            ["events", "pairflow", "plain script (awkward/numpy)", "pairflow / plain", "target",
             "pairflow"], rows))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: adaptive against the best static order, the HEP hand order, and
    `pairflow app=hep` against the plain columnar script."""
    rows = []
    pl = d.get("a_synthetic") or {}
    if pl:
        worst = max(r["adaptive_over_best_static"] for r in pl.values())
        rows.append(["adaptive pipeline order vs the best static order", f"≤ {num(worst)}x",
                     "target ≤ 1.1x", "met" if worst <= 1.1 else "**not met**"])
    hep = d.get("b_hep")
    if hep:
        w = hep["written_fixed_over_adaptive"]
        rows.append(["HEP selection vs the physicist's hand order", f"hand order at {num(w)}x "
                     "of adaptive's time", "side by side", "wins" if w >= 1 else "**loses**"])
    for case, r in (d.get("d_plain") or {}).items():
        med = r["median_s"]
        rows.append([f"`pairflow app=hep` vs the plain awkward/numpy script, {case} "
                     f"({r['events']:,} events), end to end", f"{num(med['pairflow'], 's')} vs "
                     f"{num(med['plain'], 's')} ({num(r['pairflow_over_plain'])}x)",
                     f"target {_goal(case)}", _verdict(case, r)])
    return rows
