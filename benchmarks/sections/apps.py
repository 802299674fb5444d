"""The "Rocket's applications" section of RESULTS.md, from `benchmarks/out/apps.json`
(written by `benchmarks/apps.py`); its explanation is `apps.md` beside this file."""
from __future__ import annotations

from report import _plt, _save, cpu_table, img, num, table

# Rocket (Heldens et al., SC'20), single node: system efficiency per application
ROCKET_EFFICIENCY = {"microscopy": 0.992, "forensics": 0.946, "phylogeny": 0.885}


def section(d: dict, ctx) -> list[str]:
    rows, shares = [], {}
    for name, r in (d.get("apps") or {}).items():
        for label, run in r["runs"].items():
            first = label == "engine_host_tier"
            each = run.get("each") or []
            if "T_min_each" in r:
                sides = sorted(set(r.get("T_min_sides") or []))
                bracket = f", measured {len(r['T_min_each'])} times" + (
                    f" in tiles of {' and '.join(map(str, sides))}" if sides else "") + \
                    ": " + ", ".join(num(x, "s") for x in r["T_min_each"])
            elif "T_min_after" in r:
                bracket = f", {num(r['T_min_before'], 's')} before the run and " \
                    f"{num(r['T_min_after'], 's')} after"
            else:
                bracket = ""
            rows.append([f"{name} (n = {r['n']}, {r['pairs']} pairs, T_min "
                         f"{num(r['T_min'], 's')}{bracket})" if first else "",
                         num(r["two_process_limit"]) if first else "",
                         num(r["mix_limit"]) if first and "mix_limit" in r else "",
                         f"{'engine' if first else '25 %'} ({run['host_cache_items']} of "
                         f"{r['n']})", f"**{num(run['efficiency'])}**",
                         ", ".join(num(x) for x in each) if len(each) > 1 else "",
                         run["of_two_process_limit"], num(run.get("of_mix_limit")),
                         run["R"], run["leaf"],
                         num(r["rocket_efficiency"]) if first else ""])
            if first:
                shares[name] = run.get("cpu_shares")
    out = [table(["app (problem)", "two-process limit", "mix limit", "host tier",
                  "efficiency (median run)", "each run", "of the limit", "of the mix limit",
                  "R", "leaf", "Rocket"], rows)]
    cpu = cpu_table("app", shares)
    if cpu:
        out.append("CPU of the 2 cores over the median run's T, by who spent it:\n\n" + cpu)
    ph = (d.get("apps") or {}).get("phylogeny") or {}
    if "bruteforce_reference_s" in ph:
        out.append(f"Phylogeny at k = {ph['reference_k']} against the dense brute-force "
                   f"reference: pairflow wall {num(ph['reference_wall_s'], 's')} (compute "
                   f"{num(ph['reference_compute_s'], 's')}), reference "
                   f"{num(ph['bruteforce_reference_s'], 's')}.")
    out.append(img(plot_efficiency(ctx.all.get("allpairs"), d, ctx.plots, ctx.made),
                   ctx.md))
    return out


def plot_efficiency(allpairs: dict | None, apps: dict | None, plots_dir: str,
                    made: list) -> str | None:
    """Efficiency per synthetic profile (allpairs part a) and per app, against the target
    and Rocket's published figures."""
    a = (allpairs or {}).get("a_efficiency") or {}
    ap = (apps or {}).get("apps") or {}
    if not a and not ap:
        return None
    plt = _plt()
    panels = [p for p in (a and "a", ap and "apps") if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        if panel == "a":
            names = list(a)
            vals = [a[k]["efficiency"] for k in names]
            ax.bar(range(len(names)), vals, color="C0", label="pairflow")
            ax.set_xticks(range(len(names)))
            # "preprocess-heavy (n=200)" on three lines: six labels side by side must not touch
            ax.set_xticklabels([k.replace("-", "-\n", 1).replace(" (", "\n(") for k in names],
                               fontsize=8)
            ax.axhline(0.9, color="k", ls="--", lw=1, label="target 0.90")
            ax.set_title("synthetic profiles (allpairs part a)")
        else:
            names = list(ap)
            x = range(len(names))
            w = 0.27
            eng = [ap[k]["runs"]["engine_host_tier"]["efficiency"] for k in names]
            lim = [ap[k].get("two_process_limit") for k in names]
            roc = [ROCKET_EFFICIENCY.get(k) for k in names]
            ax.bar([i - w for i in x], eng, w, color="C0", label="pairflow")
            ax.bar(list(x), [v or 0 for v in lim], w, color="C7",
                   label="two plain processes\n(this machine's limit)")
            ax.bar([i + w for i in x], [v or 0 for v in roc], w, color="C2",
                   label="Rocket, published")
            ax.set_xticks(list(x))
            ax.set_xticklabels(names)
            ax.axhline(0.9, color="k", ls="--", lw=1, label="target 0.90")
            ax.set_title("Rocket's applications")
        for bar in ax.patches:
            if bar.get_height() > 0:
                ax.annotate(f"{bar.get_height():.2f}", (bar.get_x() + bar.get_width() / 2,
                                                        bar.get_height()),
                            ha="center", va="bottom", fontsize=7.5)
        ax.set_ylim(0, 1.35)
        ax.set_ylabel("system efficiency T_min / (p · T)")
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.suptitle("Efficiency per profile and per application, against the target and Rocket")
    return _save(fig, plots_dir, "efficiency.png", made)


def headline(d: dict) -> list[list[str]]:
    """The README's rows: each app's efficiency against Rocket's."""
    rows = []
    for name, r in (d.get("apps") or {}).items():
        e = r["runs"]["engine_host_tier"]["efficiency"]
        rows.append([f"{name}: system efficiency vs Rocket's", f"{num(e)} (machine limit "
                     f"{num(r['two_process_limit'])})", f"Rocket {num(r['rocket_efficiency'])}",
                     "**loses**" if e < r["rocket_efficiency"] else "wins"])
    return rows
