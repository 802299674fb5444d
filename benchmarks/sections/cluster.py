"""The "Devices of unequal speed" section of RESULTS.md, from `benchmarks/out/cluster.json`
(written by `benchmarks/cluster.py`); its explanation is `cluster.md` beside this file."""
from __future__ import annotations

from report import num, pct, table


def section(d: dict, ctx) -> list[str]:
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
