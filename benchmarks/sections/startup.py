"""The "Start-up" section of RESULTS.md, from `benchmarks/out/startup.json`
(written by `benchmarks/startup.py`); its explanation is `startup.md` beside this file."""
from __future__ import annotations

from report import img, num, plot_bars, speed, table


def section(d: dict, ctx) -> list[str]:
    s, j, r = d["three_records"], d["default_job"], d["ray_job"]
    runs = d["session"]["runs"]
    rows = [["3-record FASTA", f"{num(s['wall_s'], 's')} end to end, {num(s['cpu_s'], 's')} "
             f"of CPU ({s['executor']})"],
            [f"default job, {d['n_genomes']} genomes", f"{num(j['wall_s'], 's')} end to end "
             f"for {num(j['compute_s'], 's')} of compute ({num(j['over_compute_s'], 's')} over; "
             f"{j['executor']})"],
            ["exact mash, same genomes, 2 threads", f"{num(d['mash_s'], 's')}: pairflow "
             f"{num(d['speedup_vs_mash'])}x faster end to end ({num(d['speedup_vs_mash_on_ray'])}x"
             " on the Ray path)"],
            ["Ray path", f"{num(r['wall_s'], 's')}: Ray start {num(r.get('ray_init_s'), 's')} "
             f"({num(r.get('ray_wait_s'), 's')} not hidden by the checks), checks "
             f"{num(r.get('checks_s'), 's')}, probe {num(r.get('probe_s'), 's')}, actors "
             f"{num(r.get('actors_s'), 's')}, first tile {num(r.get('first_tile_s'), 's')}, "
             f"compute {num(r['compute_s'], 's')}"],
            ["session (Ray kept up)", f"first run {num(runs[0]['wall_s'], 's')}, later runs "
             + ", ".join(num(x["wall_s"], "s") for x in runs[1:])],
            ["imports", f"CLI {num(d['imports']['cli']['total_s'], 's')}, a run's modules "
             f"{num(d['imports']['run_modules']['total_s'], 's')}, `pairflow --help` "
             f"{num(d['help_s'], 's')}"]]
    out = [table(["case", "figure"], rows)]
    out.append(img(plot_bars(f"Exact Jaccard of {d['n_genomes']} genomes, end to end",
                             [("pairflow (default job)", j["wall_s"]),
                              ("pairflow (Ray path)", r["wall_s"]), ("mash", d["mash_s"])],
                             "seconds from the command line (lower is better)", ctx.plots,
                             "peers_startup.png", ctx.made), ctx.md))
    return out


def headline(d: dict) -> list[list[str]]:
    """The README's rows: a tiny input end to end, and the default job against mash."""
    wall, sp = d["three_records"]["wall_s"], d["speedup_vs_mash"]
    return [["3-record FASTA, end to end", num(wall, "s"), "target ≤ 1.5 s",
             "met" if wall <= 1.5 else "**not met**"],
            [f"default job ({d['n_genomes']} genomes) vs exact mash, end to end", speed(sp),
             "target ≥ 3x", "wins" if sp >= 3 else "**loses**"]]
