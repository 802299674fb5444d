"""The "Dashboard: a big dense result" section of RESULTS.md, from `benchmarks/out/dashboard.json`
(written by `benchmarks/dashboard.py`); its explanation is `dashboard.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
    return [table(["measure", "figure"], [
        ["dense result", f"n = {d['n']:,} items, one field, {num(d['matrix_bytes'] / 2**30)} GiB of zarr"],
        ["server up (health check answers)", num(d["healthy_s"], "s")],
        ["results view open: navigation to heatmap drawn", f"**{num(d['open_s'], 's')}**"],
        ["the same, a second page on the warm server", num(d["open_warm_s"], "s")],
        ["a 120 x 120 region typed in, drawn cell by cell", num(d["region_s"], "s")],
        ["server's peak resident memory", f"**{num(d['server_peak_rss_mib'], 'MiB')}**"],
        ["what the page said", f"`{d['facts']}`"]])]
