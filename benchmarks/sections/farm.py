"""The "Tool farm" section of RESULTS.md, from `benchmarks/out/farm.json`
(written by `benchmarks/farm.py`); its explanation is `farm.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, table


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


def section(d: dict, ctx) -> list[str]:
    if "rows" not in d:  # a farm.json of the old benchmark (overheads against its own units)
        return ["An old `farm.json` (before issue 59's baselines): rerun "
                "`pairflow bench --only farm`."]
    rows = []
    for name, r in d["rows"].items():
        label = FARM_ROWS.get(name, name).format(records=r["records"])
        c = r.get("carried_from")
        if c:  # a row this run did not repeat (--only): its own run says when and at what load
            la = c.get("load_avg_1min") or {}
            label += (f" (not rerun: the run of {c['date'][:16].replace('T', ' ')}, code "
                      f"`{c.get('code')}`, load {num(la.get('min'))}-{num(la.get('max'))})")
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
        cpu = [x for x in r.get("tool_cpu_s") or [] if x is not None]
        detail.append([FARM_ROWS.get(name, name).format(records=r["records"]),
                       ", ".join(sorted(set(map(str, r["executor"])))),
                       ", ".join(map(str, units)), ", ".join(map(str, sorted(set(r["units"])))),
                       str(r["threads"]),
                       ", ".join(map(str, sorted(set(r.get("all_cores_last") or [0])))),
                       num(min(cpu), "s") + (f"-{num(max(cpu), 's')}" if len(cpu) > 1 else "")
                       if cpu else "—", f"{r['n_hits']:,}"])
    out.append("How the farm ran (per case: executor, records per unit chosen, units, cores "
               "per worker, units at the end run on every core, the tool's CPU seconds over "
               "all units, hit lines):\n\n" + table(
                   ["case", "executor", "unit records", "units", "threads", "all-core units",
                    "tool CPU", "hits"], detail))
    out.append(f"`from pairflow.engine import farm` costs {num(d['python_import_s'], 's')} in a fresh "
               "interpreter here, not counted on pairflow's side (the farm is timed as called "
               "from Python: `farm(...)` + `gather(...)`).")
    out.append(img(plot_bars("tool farm against the tool's own threads: pairflow / "
                             "alternative", [(FARM_ROWS.get(k, k).format(records=r["records"]),
                                              r["ratio"]) for k, r in d["rows"].items()],
                             "time ratio (lower is better; 1 = as fast)", ctx.plots,
                             "peers_farm.png", ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: each case against the user's alternative."""
    return [[f"tool farm: {FARM_ROWS.get(name, name).format(records=r['records'])}",
             num(r["pairflow_s"], "s"), f"{r['alternative']}: {num(r['alternative_s'], 's')} "
             f"({num(r['ratio'])}x)", farm_verdict(r)] for name, r in (d.get("rows") or {}).items()]
