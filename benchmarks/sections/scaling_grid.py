"""The "Scaling grid" section of RESULTS.md, from `benchmarks/out/scaling_grid.json` (written by
`benchmarks/scaling.py --grid`: issue 57's grid, L3 on every cluster shape); its explanation is
the JSON's own note and `scaling_grid.md` beside this file."""
from __future__ import annotations

import os

import numpy as np

from report import img


def section(d: dict, ctx) -> list[str]:
    path = plot_grid(d, os.path.join(ctx.plots, "scaling_grid.png"))
    ctx.made.append(path)
    return [d.get("note", ""), grid_markdown(d), img(path, ctx.md)]


def storage_ratio(on: dict, off: dict) -> float:
    """Bytes from storage with L3 over those without; where a run counts no bytes (record
    packs: a pack is parsed from its file's records already read), loads over loads."""
    if off["bytes_from_storage"] and on["bytes_from_storage"]:
        return on["bytes_from_storage"] / off["bytes_from_storage"]
    return on["loads"] / max(1, off["loads"])


def _shares(on: dict) -> str:
    """How the run with L3 was shared: dealt (paced: the lead in tiles and the room in leaves),
    and a course change to contiguous shares where one happened."""
    out = on["shares"]
    if on.get("pace"):
        out += f", paced {on['pace']} (room {on.get('room')})"
    change = on.get("course_change")
    if change:
        out += f", to contiguous at {change['at_done']:.0%}"
    elif on.get("course_drift"):  # past the margin, but contiguous shares would load more
        out += f", drift kept ({on['course_drift']['at_done']:.0%})"
    return out


def grid_markdown(data: dict) -> str:
    """The grid as RESULTS.md shows it: a row per cell and node count, L3 off and on side by
    side, beside one node and the planner's simulation of the run."""
    rows = ["| cell | nodes | one node R | L3 off R (sim.) | L3 on R (sim.) | shares with L3 "
            "(dealt / contiguous sim.) | on / one node | on / sim. | storage on / off | exact |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["cell"], r["nodes"], r["l3"]): r for r in data["grid"]}
    for (cell, k, l3), on in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if not l3:
            continue
        off = by.get((cell, k, False))
        modes = on.get("modes") or {}
        ways = " / ".join(f"{modes[m]['R']:.2f}" if m in modes else "—"
                          for m in ("dealt", "contiguous"))
        sim = on["expected_R"]
        rows.append(
            f"| {cell} | {k} | {on['one_node_R']:.2f} | "
            + (f"{off['R']:.2f} ({off['expected_R']:.2f})" if off else "—")
            + f" | **{on['R']:.2f}** ({sim:.2f}) | {_shares(on)} ({ways}) | "
            f"{on['R'] / on['one_node_R']:.2f} | {on['R'] / sim:.2f} | "
            + (f"{storage_ratio(on, off):.2f}" if off else "—")
            + f" | {'yes' if on['exact'] and (off or on)['exact'] else '**no**'} |")
    return "\n".join(rows)


def plot_grid(data: dict, path: str) -> str:
    """Measured R with L3 against the planner's simulation and one node's R, per cell."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    on = [r for r in data["grid"] if r["l3"]]
    fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(on)), 4))
    labels = [f"{r['storage']} {r['n']}\ntier {r['tier_leaves']}\n{r['nodes']} nodes"
              for r in on]
    x = np.arange(len(on))
    ax.bar(x - 0.27, [r["one_node_R"] for r in on], 0.27, label="one node")
    ax.bar(x, [next((o["R"] for o in data["grid"] if not o["l3"] and o["cell"] == r["cell"]
                     and o["nodes"] == r["nodes"]), 0) for r in on], 0.27, label="L3 off")
    ax.bar(x + 0.27, [r["R"] for r in on], 0.27, label="L3 on")
    ax.plot(x + 0.27, [r["expected_R"] for r in on], "k_", markersize=14,
            label="planner's simulation (L3 on)")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("R = loads / items")
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
