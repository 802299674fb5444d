"""The "Scaling across nodes: R, storage bytes, L3 hits" section of RESULTS.md, from `benchmarks/out/scaling.json`
(written by `benchmarks/scaling.py`); its explanation is `scaling.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
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
