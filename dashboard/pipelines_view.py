"""The pipelines view: an operator pipeline's order in force, each operator's cost and pass rate
over time, and the written against the chosen order (data: :mod:`dashboard.rundir.pipelines`).
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView, downsample


def show(view: RunView, ov: dict) -> None:
    st.subheader("pipelines")
    if not view.pipelines.has_data():
        st.info("this run has no operator pipeline or farm data (pipeline.jsonl not present)")
        return
    order, table, series = view.pipelines.frames()
    st.markdown("`order: " + " → ".join(order) + "`")
    st.dataframe(table, hide_index=True, width="stretch")
    orders = view.pipelines.order_report()
    if not orders.empty:
        saved = (view.summary.get("order_report") or {}).get("saved")
        st.markdown("**written and chosen order**" + (
            f" · the chosen order is expected to save {100 * saved:.1f} % per event" if saved else ""))
        st.dataframe(orders, hide_index=True, width="stretch")
    if not series.empty:
        c1, c2 = st.columns(2)
        with c1:
            draw.chart(alt.Chart(downsample(series.dropna(subset=["cost_s"]), by="op"), title="cost per record (s)")
                       .mark_line(point=True).encode(x=alt.X("sec:Q", title="seconds since start"), y="cost_s:Q",
                                                     color="op:N", tooltip=["op", "sec", "cost_s"])
                       .properties(height=220))
        with c2:
            draw.chart(alt.Chart(downsample(series.dropna(subset=["pass_rate"]), by="op"), title="pass rate")
                       .mark_line(point=True).encode(x=alt.X("sec:Q", title="seconds since start"),
                                                     y=alt.Y("pass_rate:Q", scale=alt.Scale(domain=[0, 1])),
                                                     color="op:N", tooltip=["op", "sec", "pass_rate"])
                       .properties(height=220))

