"""The overview view: where the run is (headline numbers, progress bars), what it is (app, space,
plan, actors), pairs done over time, and its config and summary as written.

The headline boxes print counts in compact units so that 50 million pairs fit a sixth of the page;
the exact figures are in each box's help.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import TERMINAL_STATES, RunView, downsample, format_duration, format_r


def show(view: RunView, ov: dict) -> None:
    st.subheader("overview")
    prog, thr = ov["progress"], ov["throughput"]
    # two rows of three: "24.5 M / 50.0 M" or "12 h 05 min" would not fit a sixth of the page
    cols = st.columns(3) + st.columns(3)
    cols[0].metric("state", ov["state"])
    cols[1].metric("ETA", format_duration(ov["eta_s"]) if ov["state"] not in TERMINAL_STATES else "—")
    cols[2].metric("R", format_r(ov["R"]), help="item loads / n items")
    t, p = prog.get("tiles", {}), prog.get("pairs", {})
    cols[3].metric("tiles", draw.of(t), help=f"{draw.n(t.get('done'))} / {draw.n(t.get('total'))} tiles")
    cols[4].metric("pairs", draw.of(p), help=f"{draw.n(p.get('done'))} / {draw.n(p.get('total'))} pairs")
    rate = thr.get("pairs_per_s") if thr.get("pairs_per_s") is not None else thr.get("pairs_per_s_avg")
    cols[5].metric("throughput", draw.rate(rate), help="pairs per second, recent window"
                   + (f": {rate:,.1f}" if rate is not None else ""))
    for name, pr in prog.items():
        if pr.get("fraction") is not None:
            st.progress(min(1.0, pr["fraction"]), text=f"{name}: {draw.n(pr['done'])} / {draw.n(pr['total'])} "
                                                       f"({100 * pr['fraction']:.1f} %)")
    info = {
        "app": ov["app"], "kind": ov["kind"],
        "space": ", ".join(f"{k}={v}" for k, v in (ov["space"] or {}).items() if k != "pairs") or None,
        "items": ov["n_items"], "leaf items": ov["leaf_items"], "plan": ov.get("plan"),
        "actors": ", ".join(map(str, ov["actors"])) or None,
        "started": draw.ts(ov["started"]), "elapsed": format_duration(ov["elapsed_s"]),
        "last update": draw.ts(ov["updated"]),
        "tiles/s (recent)": draw.rate(thr.get("tiles_per_s")),
        "pairs/s (average)": draw.rate(thr.get("pairs_per_s_avg")),
    }
    st.dataframe(pd.DataFrame({"": list(info), "value": [("—" if v is None else str(v)) for v in info.values()]}),
                 hide_index=True, width=720)
    m = view.snapshots.frame()
    if not m.empty and "pairs_done" in m.columns:
        df = downsample(m[["sec", "pairs_done", "tiles_done"]].dropna(subset=["pairs_done"]))
        draw.chart(alt.Chart(df, title="pairs done").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("pairs_done:Q", title="pairs done"),
            tooltip=["sec", "pairs_done", "tiles_done"]).properties(height=220))
    with st.expander("config.yaml"):
        txt = view.config_text
        st.code(txt if txt else "(config.yaml not written yet)", language="yaml")
    if view.summary:
        with st.expander("summary.json"):
            st.json(view.summary)

