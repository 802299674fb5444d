"""The "All-pairs peers" section of RESULTS.md, from `benchmarks/out/peers.json`
(written by `benchmarks/peers.py`); its explanation is `peers.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, speed, table

COLD, WARM = "pairflow (CLI, cold)", "pairflow (session, warm)"


def _t(r: dict) -> str:
    """A median; "≥" when a run was stopped at its limit (counted as the limit)."""
    if r.get("median_s") is None:
        return "—"
    if r.get("censored"):
        return f"≥ {num(r['median_s'], 's')} ({r['timed_out']} of {len(r['runs'])} stopped)"
    return num(r["median_s"], "s")


def _ratio(ratio, peer: dict, ours: dict) -> str:
    """peer / pairflow; "≥" when the peer's time is a lower bound, "≤" when pairflow's is."""
    if ratio is None:
        return "—"
    mark = "≥ " if peer.get("censored") else ("≤ " if ours.get("censored") else "")
    return f"{mark}{num(ratio)}x"


def _verdict(ratio) -> str:
    if ratio is None:
        return "—"
    return "wins" if ratio >= 1 else "**loses**"


def section(d: dict, ctx) -> list[str]:
    cases = d.get("cases") or {}
    out = [f"Median of {d.get('reps')} interleaved repetitions per contender, each a fresh "
           f"process timed end to end (the warm session: inside its process); mean load "
           f"{num(d.get('load_mean'))} on the machine's cores during the runs."]
    rows, bars = [], []
    for case, c in cases.items():
        rows_c = c["contenders"]
        cold, warm = rows_c.get(COLD, {}), rows_c.get(WARM, {})
        for peer, ratio in c["cold_ratios"].items():
            r = rows_c[peer]
            wr = (c.get("warm_ratios") or {}).get(peer)
            rows.append([case, peer, _t(r), _t(cold), _ratio(ratio, r, cold), _verdict(ratio),
                         _t(warm) if warm else "—", _ratio(wr, r, warm), _verdict(wr)])
        bars += [(f"{case}: {k}", r["median_s"]) for k, r in rows_c.items()
                 if r.get("median_s") is not None]
    out.append(table(["case", "peer", "peer's time", "pairflow cold (CLI)",
                      "ratio (peer / pairflow)", "cold", "pairflow warm (session)",
                      "ratio", "warm"], rows))
    out.append(table(["case", "pairflow command", "fastest peer", "cold vs fastest",
                      "warm vs fastest", "cold executor", "same answer (max abs diff)"],
                     [[case, f"`{c['command']}`", c["fastest_peer"] or "—",
                       num(c.get("cold_vs_fastest")) + "x", num(c.get("warm_vs_fastest")) + "x",
                       str(c["contenders"].get(COLD, {}).get("executor")),
                       num(max((r.get("max_abs_diff_vs_pairflow") or 0.0)
                               for r in c["contenders"].values()))]
                      for case, c in cases.items()]))
    if bars:
        out.append(img(plot_bars("All pairs, four cases: end-to-end wall time", bars,
                                 "seconds (lower is better)", ctx.plots, "peers_allpairs.png",
                                 ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: pairflow as the CLI runs it, cold, against each peer on each case
    (the warm session against the fastest peer)."""
    rows = []
    for case, c in (d.get("cases") or {}).items():
        for peer, ratio in c["cold_ratios"].items():
            if ratio is None:
                continue
            mark = "≥ " if c["contenders"][peer].get("censored") else ""
            rows.append([f"all pairs, {case}: `pairflow` (cold) vs {peer}", mark + speed(ratio),
                         "side by side", "wins" if ratio >= 1 else "**loses**"])
        w = c.get("warm_vs_fastest")
        if w is not None:
            rows.append([f"all pairs, {case}: session (warm) vs {c['fastest_peer']}", speed(w),
                         "side by side", "wins" if w >= 1 else "**loses**"])
    return rows
