"""The "Many small sequences: reads" section of RESULTS.md, from `benchmarks/out/many_small.json`
(written by `benchmarks/many_small.py`); its explanation is `many_small.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, table


def section(d: dict, ctx) -> list[str]:
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
        out.append(img(plot_bars(
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
            "million pairs per second (higher is better)", ctx.plots,
            "peers_many_small_reads.png", ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: each read set with a target, against the bare kernel."""
    return [[f"reads (k = {c['k']}) vs the bare bitset kernel", num(c["engine_vs_bare_popcount"]),
             f"target ≥ {num(c['target'])}",
             "met" if c["engine_vs_bare_popcount"] >= c["target"] else "**loses**"]
            for c in d.get("reads") or [] if c.get("target") is not None]
