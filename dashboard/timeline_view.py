"""The timeline view: stage spans per actor in a window that follows the end of the run (or is
moved by hand), and the seconds spent per stage (data: :mod:`dashboard.rundir.timeline`).
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import STAGES, RunView


def show(view: RunView, ov: dict) -> None:
    st.subheader("timeline")
    extent = view.timeline.extent()
    if extent is None:
        st.info("no stage spans yet (trace.jsonl, or trace.parquet once the run has ended)")
        return
    lo, hi = extent
    c1, c2, c3 = st.columns([1, 1, 2])
    follow = c1.toggle("follow the end", value=True, key="tl_follow")
    width = c2.number_input("window (s)", min_value=0.5, max_value=1e6, value=30.0, step=5.0, key="tl_width")
    if follow:
        end = hi
    else:
        end = c3.slider("window end (s since start)", min_value=float(lo), max_value=float(max(hi, lo + 1e-3)),
                        value=float(hi), key="tl_end")
    start = max(lo, end - width)
    spans = view.timeline.spans(window=(start, end), max_rows=5000)
    stages = [s for s in STAGES if s in set(spans["stage"])] + sorted(set(spans["stage"]) - set(STAGES))
    st.markdown(f"`spans: {len(spans)} in window` · `window: {start:.1f}–{end:.1f} s`")
    if not spans.empty:
        n_actors = spans["actor"].nunique()
        c = alt.Chart(spans).mark_bar().encode(
            x=alt.X("s0:Q", title="seconds since start", scale=alt.Scale(domain=[start, end], nice=False)),
            x2="s1:Q",
            y=alt.Y("actor:N", title=None),
            yOffset=alt.YOffset("stage:N", sort=stages),
            color=alt.Color("stage:N", sort=stages, scale=alt.Scale(domain=stages, range=draw.stage_colors(stages))),
            tooltip=["actor", "stage", "what", alt.Tooltip("s0:Q", format=".3f"),
                     alt.Tooltip("duration:Q", format=".3f")],
        ).properties(height=max(160, 22 * len(stages) * n_actors))
        draw.chart(c)
    totals = view.timeline.stage_totals()
    if not totals.empty:
        draw.chart(alt.Chart(totals, title="seconds per stage (all actors, cumulative)").mark_bar().encode(
            x="seconds:Q", y=alt.Y("stage:N", sort=list(totals["stage"]), axis=alt.Axis(labelOverlap=False)),
            color=alt.Color("stage:N", legend=None, scale=alt.Scale(domain=list(totals["stage"]),
                                                                    range=draw.stage_colors(list(totals["stage"])))),
            tooltip=["stage", "seconds"]).properties(height=34 * len(totals) + 20))

