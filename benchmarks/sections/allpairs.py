"""The "All-pairs engine" section of RESULTS.md, from `benchmarks/out/allpairs.json`
(written by `benchmarks/allpairs.py`); its explanation is `allpairs.md` beside this file.
One table a part, kept to what the reading needs: the efficiency with its CPU split, R against
the model (the simulated larger n in the plot), the peers, the journal and the resume."""
from __future__ import annotations

from report import _plt, _save, img, num, pct, plot_bars, speed, table

# Rocket (Heldens et al., SC'20), single node: the one R it reports against cache size
# (R = 6.7 with a cache of 0.21 n; docs: /work/shared/DESIGN.md)
ROCKET_R = [(0.21, 6.7)]


def _cpu(shares: dict | None) -> str:
    """Device actors / loaders / the rest of the two cores (Ray, driver, idle, other)."""
    if not shares:
        return "—"
    dev, load = shares.get("device actors") or 0, shares.get("loaders") or 0
    return f"{pct(dev)} / {pct(load)} / {pct(max(0.0, 1 - dev - load))}"


def section(d: dict, ctx) -> list[str]:
    out = []
    a = d.get("a_efficiency")
    if a:
        rows = [[k, r["n"], num(r["T_min"], "s"), num(r["T"], "s"), f"**{num(r['efficiency'])}**",
                 r.get("efficiency_vs_two_busy_cores"), r.get("efficiency_incl_startup"),
                 r["leaf"], r["R"], r["correct"], _cpu(r.get("cpu_shares"))]
                for k, r in a.items()]
        out.append("### (a) system efficiency = T_min / (p · T)\n\n" + table(
            ["profile", "n", "T_min", "T", "efficiency", "vs stage times, both cores busy",
             "incl. start-up", "leaf", "R", "correct", "CPU: actors / loaders / rest"], rows))
    b = d.get("b_R")
    if b:
        rows = [[pct(r["fraction"]), r["S"], r["R_planned"], r["R_planned_simulated"],
                 r["R_zorder_lru"], r["R_zorder_lru_simulated"], r["model"],
                 f"**{num(r['planned_over_model'])}**"] for r in b["real"]]
        n = b["real"][0]["n"] if b["real"] else "?"
        big = b.get("simulated_large") or []
        sim = (f" The simulated runs at n = {big[0]['n']} (dashed in the plot) read "
               f"{', '.join(num(r['planned_over_model']) for r in big)} of the model."
               if big else "")
        out.append(f"### (b) R = loads / n against 1 + n/(2S)\n\nReal runs (n = {n}, leaf 1)."
                   f"{sim}\n\n" + table(["S / n", "S", "R planned", "(sim)", "R Z-order/LRU",
                                         "(sim)", "1 + n/(2S)", "planned / model"], rows))
        out.append(img(plot_r(d, ctx.plots, ctx.made), ctx.md))
    c = d.get("c_jaccard_vs_tools")
    if c:
        rows = [[f"pairflow (Ray running; R = {num(c['R'])}, leaf {c['leaf']})",
                 num(c["engine_wall_s"] - c["ray_init_s"], "s"), "1", "—"],
                ["mash (exact: sketch ≥ every union, 2 threads)", num(c["mash_s"], "s"),
                 f"**{num(c['speedup_vs_mash_running_ray'])}x**",
                 num(c["max_abs_diff_vs_mash"])]]
        if "sourmash_s" in c:
            rows.append(["sourmash (scaled=1, 2 processes)", num(c["sourmash_s"], "s"),
                         f"{num(c['speedup_vs_sourmash'])}x",
                         num(c["max_abs_diff_vs_sourmash"])])
        dn = d.get("d_naive")
        if dn:  # part (d): one Ray task per pair, each parsing both items, no cache
            rows.append([f"one Ray task per pair ({dn['pairs']} pairs, no cache)",
                         num(dn["naive_s"], "s"), f"{num(dn.get('engine_speedup'))}x", "—"])
        out.append(f"### (c, d) exact Jaccard of {c['n']} genomes (k = {c['k']}) against "
                   "mash, sourmash and one Ray task per pair\n\n"
                   + table(["tool", "wall time", "its time / pairflow's",
                            "max abs difference"], rows))
        out.append(img(plot_bars(
            f"Exact Jaccard, {c['n']} genomes: wall time",
            [("pairflow", c["engine_wall_s"] - c["ray_init_s"]), ("mash", c["mash_s"]),
             ("sourmash", c.get("sourmash_s")), ("one Ray task per pair", (dn or {}).get("naive_s"))],
            "seconds (lower is better)", ctx.plots, "peers_jaccard_tools.png", ctx.made), ctx.md))
    e = d.get("e_journal")
    if e:
        out.append(f"**(e) Journal overhead**: its time on the scheduler's path / T "
                   f"**{pct(e['direct_overhead'])}** (median; max {pct(e['direct_overhead_max'])})"
                   f"; background fsyncs {pct(e['background_fsync_fraction'])} of T; A/B medians "
                   f"{num(e['with_journal_median_s'], 's')} with, "
                   f"{num(e['without_journal_median_s'], 's')} without ({pct(e['ab_overhead'])}, "
                   f"inside the spread of the runs without, {pct(e['ab_spread_without'])}); "
                   f"{e['tiles']} tiles.")
    f = d.get("f_resume")
    if f:
        out.append("**(f) Resume of a run that was 90 % done** (full run after Ray's start, "
                   "resume, their ratio, the resume's start-up): " + "; ".join(
                       f"{k} ({r['tiles']} tiles) {num(r['full_s'], 's')}, "
                       f"{num(r['resume_s'], 's')}, **{pct(r['ratio'])}**, "
                       f"{num(r['resume_startup_s'], 's')}" for k, r in f.items()) + ".")
    return out


def plot_r(data: dict, plots_dir: str, made: list) -> str | None:
    """R against the host tier's size: real and simulated runs, the model 1 + n/(2S), Rocket."""
    b = data.get("b_R")
    if not b or not b.get("real"):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    real = b["real"]
    n = real[0]["n"]
    x = [100 * r["fraction"] for r in real]
    ax.plot(x, [r["R_planned"] for r in real], "o-", color="C0", lw=2,
            label=f"pairflow, planned (real runs, n = {n})")
    ax.plot(x, [r["R_zorder_lru"] for r in real], "s-", color="C3",
            label=f"Z-order + LRU (real runs, n = {n})")
    big = b.get("simulated_large") or []
    if big:
        nb = big[0]["n"]
        xb = [100 * r["fraction"] for r in big]
        ax.plot(xb, [r["R_planned_simulated"] for r in big], "o--", color="C0", alpha=0.55,
                label=f"planned, simulated (n = {nb})")
        ax.plot(xb, [r["R_zorder_lru_simulated"] for r in big], "s--", color="C3", alpha=0.55,
                label=f"Z-order + LRU, simulated (n = {nb})")
    lo = min([r["fraction"] for r in real] + [r["fraction"] for r in big] + [0.2])
    fs = [f / 100 for f in range(max(1, int(90 * lo)), 101)]
    ax.plot([100 * f for f in fs], [1 + 1 / (2 * f) for f in fs], "k:", lw=1.5,
            label="model 1 + n/(2S)")
    ax.plot([100 * f for f, _ in ROCKET_R], [r for _, r in ROCKET_R], "D", color="C2", ms=9,
            label="Rocket, published (S = 0.21 n)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([5, 10, 20, 50, 100])
    ax.set_xticklabels(["5 %", "10 %", "20 %", "50 %", "100 %"])
    ax.set_yticks([1, 2, 5, 10, 20, 40])
    ax.set_yticklabels(["1", "2", "5", "10", "20", "40"])
    ax.set_xlabel("host tier S, as a fraction of the n items")
    ax.set_ylabel("R = item loads / n (log)")
    ax.set_title("R against cache size")
    ax.legend(fontsize=8.5, loc="upper right")
    return _save(fig, plots_dir, "r_vs_cache.png", made)


def headline(d: dict) -> list[list[str]]:
    """The README's rows: efficiency at the larger sizes, R against the model, mash."""
    rows = []
    large = {k: v for k, v in (d.get("a_efficiency") or {}).items() if "(n=" in k}
    if large:  # the larger size, where the target is read
        lo = min(v["efficiency"] for v in large.values())
        rows.append(["all-pairs system efficiency, 3 synthetic profiles (the larger runs)",
                     " / ".join(num(v["efficiency"]) for v in large.values()), "target ≥ 0.90",
                     "met" if lo >= 0.9 else "**not met**"])
    b = (d.get("b_R") or {}).get("real") or []
    if b:
        worst = max(r["planned_over_model"] for r in b if r["fraction"] <= 0.5)
        rows.append(["R against the model 1 + n/(2S), S ≤ 50 %", f"≤ {num(worst)} of the model",
                     "target ≤ 1.1", "met" if worst <= 1.1 else "**not met**"])
    c = d.get("c_jaccard_vs_tools")
    if c:
        sp = c["speedup_vs_mash_running_ray"]
        rows.append([f"exact Jaccard, {c['n']} genomes, vs mash (exact)", speed(sp),
                     "target ≥ 1.5x", "wins" if sp >= 1.5 else "**loses**"])
    return rows
