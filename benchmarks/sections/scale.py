"""The "Scale on one machine: 10^3 to 10^6 items" section of RESULTS.md, from
`benchmarks/out/scale.json` (written by `benchmarks/scale.py`); its explanation is `scale.md`
beside this file."""
from __future__ import annotations

from report import _plt, _save, img, num, pct, table

GIB = 2 ** 30


def _rows(cases: list[dict]) -> list[list]:
    rows = []
    for c in cases:
        tc = c.get("tile_costs") or {}
        bare = c.get("bare") or {}
        ref = bare.get("popcount") or bare.get("compare") or {}
        ex = c.get("exact") or {}
        over = tc.get("per_tile_overhead_s")
        rows.append([f"{c['n']:,}", f"{c['items']:,}", f"{c['pairs']:,}", num(c["wall_s"]),
                     num(c["compute_s"]), num(c["pairs_per_s"] / 1e6),
                     f"{num(ref.get('pairs_per_s', 0) / 1e6)} " + (
                         f"({ref.get('form')}, {bare['mode']})" if bare.get("mode") else
                         f"({bare.get('rows', 0):,} rows)"),
                     f"**{num(c['engine_vs_bare'])}**", num(c["peak_rss"] / GIB),
                     num(c["peak_pss"] / GIB), f"{c['tiles']:,}", f"{c['leaf']:,}",
                     f"{c['files_in_result']:,}",
                     num(1e3 * over) if over is not None else "—",
                     pct(tc.get("overhead_share")),
                     f"{ex.get('mismatches')} / {ex.get('queries'):,}" if ex else "—",
                     c.get("executor") or "—",
                     "yes, after " + num(c["killed_after_s"], "s") if c.get("killed_after_s")
                     else "—"])
    return rows


HEAD = ["n", "items", "pairs", "wall s", "compute s", "M pairs/s", "bare M pairs/s",
        "engine / bare", "peak RSS GiB", "peak PSS GiB", "tiles", "leaf", "files in result",
        "per-tile overhead ms", "overhead share", "mismatches / queries checked", "executor",
        "killed and resumed"]


def _plot(d: dict, ctx) -> str | None:
    series = [(k, [c for c in d.get(k) or []]) for k in ("reads", "synthetic")]
    series = [(k, cs) for k, cs in series if len(cs) >= 2]
    if not series:
        return None
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for kind, cs in series:
        n = [c["n"] for c in cs]
        axes[0].loglog(n, [c["wall_s"] for c in cs], "o-", label=f"{kind}: wall")
        axes[0].loglog(n, [c["compute_s"] for c in cs], "s--", label=f"{kind}: compute")
        axes[1].semilogx(n, [c["peak_rss"] / GIB for c in cs], "o-", label=f"{kind}: RSS")
        axes[1].semilogx(n, [c["peak_pss"] / GIB for c in cs], "s--", label=f"{kind}: PSS")
    axes[1].axhline(8, color="C3", lw=1, ls=":", label="target at 10^6 reads")
    axes[0].set(xlabel="items n", ylabel="seconds", title="time")
    axes[1].set(xlabel="items n", ylabel="GiB", title="peak memory of the process tree")
    for ax in axes:
        ax.legend(fontsize=8)
    return _save(fig, ctx.plots, "scale.png", ctx.made)


def section(d: dict, ctx) -> list[str]:
    out = []
    for kind, title in (("reads", f"Reads, k = {d['k']}, top {d['top']} per read"),
                        ("synthetic", f"Synthetic app (no burnt cost), top {d['top']}")):
        if d.get(kind):
            out.append(f"**{title}**\n\n" + table(HEAD, _rows(d[kind])))
    out.append(img(_plot(d, ctx), ctx.md))
    for p in d.get("probes") or []:
        out.append(f"**{p['n']:,} {p['kind']}, the first {num(p['probe_s'])} s of the run** "
                   f"(then killed{_projected(d, p)}): peak "
                   f"{num(p['peak_rss'] / GIB)} GiB RSS ({num(p['peak_pss'] / GIB)} GiB PSS), "
                   f"{p['processes']} processes; its last progress line: "
                   f"`{p['progress'] or '(none yet: still starting)'}`.")
    r = d.get("resume")
    if r:
        out.append(f"**Killed and resumed**: {r['n']:,} reads, the process tree killed "
                   f"(SIGKILL) {num(r['killed_after_s'])} s in, then `pairflow resume=true`: "
                   f"{(r.get('resumed') or {}).get('reused', '?')} tiles reused of "
                   f"{r['tiles']:,}; peak {num(r['killed_peak_rss'] / GIB)} GiB before the kill, "
                   f"{num(r['resumed_peak_rss'] / GIB)} GiB resumed; exact: "
                   f"{r['exact']['mismatches']} mismatches in {r['exact']['queries']} queries.")
    reads = d.get("reads") or []
    if reads:
        big = max(reads, key=lambda c: c["n"])
        procs = big.get("at_peak") or []
        if procs:
            out.append(f"Where the memory is at the peak of {big['n']:,} reads (the tree's "
                       "largest processes):\n\n"
                       + table(["process", "RSS MiB", "PSS MiB"],
                               [[p[0], num(p[1] / 2 ** 20), num(p[2] / 2 ** 20)]
                                for p in procs[:6]]))
    if d.get("not_run"):
        out.append("Not run: " + "; ".join(d["not_run"]) + ".")
    if d.get("earlier_runs"):
        out.append("Cases kept from earlier runs of the benchmark (`--merge`): " + "; ".join(
            f"`{r['command']}` ({(r.get('date') or '')[:16]})" for r in d["earlier_runs"]) + ".")
    out.append(_tiles_part(d))
    return out


def _projected(d: dict, p: dict) -> str:
    """The whole run's compute at the probe's own last pairs/s (its progress line), else at the
    largest finished run's of its kind."""
    import re
    pairs = p["n"] * (p["n"] - 1) // 2
    own = re.search(r"pairs/s=([\d,]+)", p.get("progress") or "")
    if own and int(own.group(1).replace(",", "")) > 0:
        rate, whose = int(own.group(1).replace(",", "")), "its own"
    else:
        done = [c for c in d.get(p["kind"]) or [] if c.get("pairs_per_s")]
        if not done:
            return ""
        big = max(done, key=lambda c: c["n"])
        rate, whose = big["pairs_per_s"], f"{big['n']:,} items'"
    return (f": its {pairs:.1e} pairs at {whose} {num(rate / 1e6)} M pairs/s are "
            f"~{num(pairs / rate / 60)} min of compute here")


def _tiles_part(d: dict) -> str:
    """The driver at 10^6 tiles (benchmarks/tiles_at_scale.py --record writes it here)."""
    drv, t = d.get("driver_at_1e6_tiles_gib"), d.get("tiles_at_scale")
    if not t:
        return "Driver memory at 10^6 tiles: " + (
            f"{num(drv)} GiB (benchmarks/tiles_at_scale.py)" if drv is not None else
            "not measured here (benchmarks/tiles_at_scale.py has not written its JSON).")
    starts = t.get("resume_start_s") or {}
    new, base = starts.get("new") or [], starts.get("base") or []
    loads = [x for x in t.get("load") or [] if x is not None]
    line = (f"**Driver at {t['tiles']:,} tiles** (`benchmarks/tiles_at_scale.py`: the synthetic "
            f"app, leaf {t['leaf']}, n = {t['n']:,}, dense sink, in-process: the driver holds "
            f"every tile's bookkeeping): killed (SIGKILL) at "
            f"{t['killed_at_tiles']:,} tiles journaled, {num(t['killed_after_s'])} s in (first "
            f"tile {num(t['first_tile_s'])} s), peak {num(t['peak_gib_until_kill'])} GiB; ")
    if t.get("finished"):
        line += (f"resumed to the end: start-up with the journal replayed and "
                 f"{t['reused']:,} tiles verified {num(t['resume_s'])} s, wall "
                 f"{num(t['resumed_wall_s'])} s, finalize {num(t['finalize_s'])} s, peak "
                 f"{num(t['resumed_peak_gib'])} GiB" + (
                     f"; exact: {t['exact']['mismatches']} mismatches in "
                     f"{t['exact']['cells']:,} cells of whole rows against the app's formula"
                     if t.get("exact") else "") + ". **Driver memory: "
                 f"{num(t['driver_peak_gib'])} GiB** (the larger peak of the two runs).")
    else:
        line += "not resumed to the end here: the driver's memory through a finalize not measured."
    if new:
        line += (f" The resume's start-up alone (copies of the killed run, then cancelled): "
                 f"**{', '.join(num(x) for x in new)} s**, peak "
                 f"{num(t.get('resume_start_peak_gib'))} GiB" +
                 (f"; the code before the columnar journal and staged index: "
                  f"{', '.join(num(x) for x in base)} s" if base else "") + ".")
    fin = t.get("finished_resume_start_s") or {}
    if fin.get("new"):
        line += (f" A finished run of {t['finished_tiles']:,} tiles reopened (every tile "
                 f"verified from the chunks): start-up {', '.join(num(x) for x in fin['new'])} s"
                 + (f"; before: {', '.join(num(x) for x in fin['base'])} s"
                    if fin.get("base") else "") + ".")
    if t.get("note"):
        line += f" {t['note'][:1].upper()}{t['note'][1:]}."
    if loads:
        line += (f" Run under `nice -n 19` beside others' benchmarks (load {num(min(loads))}-"
                 f"{num(max(loads))} on 2 cores): seconds are upper bounds.")
    return line


def headline(d: dict) -> list[list[str]]:
    reads = d.get("reads") or []
    if not reads:
        return []
    big = max(reads, key=lambda c: c["n"])
    ok = big["peak_rss"] / GIB <= 8 and big["exact"]["mismatches"] == 0
    return [[f"{big['n']:,} reads (k = 7, top 10): peak memory, exact",
             f"{num(big['peak_rss'] / GIB)} GiB, {num(big['wall_s'])} s",
             "≤ 8 GiB at 10^6 reads", "met at this n" if ok else "**not met**"]]
