"""The "Planner" section of RESULTS.md, from `benchmarks/out/planner.json`
(written by `benchmarks/planner.py`); its explanation is `planner.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
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
