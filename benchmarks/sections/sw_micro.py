"""The "Kernel micro-benchmarks: Smith-Waterman" section of RESULTS.md, from `benchmarks/out/sw_micro.json`
(written by `benchmarks/sw_micro.py`); its explanation is `sw_micro.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
    rows = []
    for name, r in (d.get("workloads") or {}).items():
        for variant, v in r["gcells_per_s"].items():
            rows.append([name, variant, num(v)])
    return [table(["workload", "variant", "Gcells/s, one core"], rows),
            f"numpy reference: {num(d.get('reference_mcells_per_s'))} Mcells/s; traceback "
            f"{num(d.get('traceback_ms_per_globin_pair'), 'ms')} per globin pair."]
