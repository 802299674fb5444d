"""The scheduling view: how the tiles were handed out across nodes (local hand-outs against round
trips to the head) and the steals over time (data: :mod:`dashboard.rundir.scheduling`).
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView


def show(view: RunView, ov: dict) -> None:
    st.subheader("scheduling")
    s = view.scheduling.frames()
    if not s["known"]:
        st.info("no scheduling counters yet (summary.json `scheduling`, written when the run ends)")
        return
    rtt = s["round_trips_per_tile"]
    mode = "hierarchical (node frontiers, work stealing)" if s["hierarchical"] else "one pull queue on the head"
    st.markdown(f"`scheduling: {mode}` · `steals: {draw.n(s['steals'])}` · "
                f"`local hand-outs: {draw.n(s['local_handouts'])}` · "
                f"`head round trips: {draw.n(s['head_round_trips'])}` · "
                f"`round trips per tile: {'?' if rtt is None else format(rtt, '.3f')}`")
    st.caption("a local hand-out is a tile a device actor got from its own node's frontier; a round trip to "
               "the head carries a batch of completions up and a batch of tiles down")
    nodes = s["nodes"]
    if not nodes.empty:
        st.dataframe(nodes, hide_index=True, width="stretch")
        long = nodes.melt(id_vars="node", value_vars=["local_handouts", "head_round_trips"],
                          var_name="hand-out", value_name="count").dropna()
        cols = st.columns(2)
        with cols[0]:
            draw.chart(alt.Chart(long, title="hand-outs per node: local vs round trips to the head")
                       .mark_bar().encode(x=alt.X("count:Q"), y=alt.Y("node:N", sort=None), color="hand-out:N",
                                          tooltip=["node", "hand-out", "count"])
                       .properties(height=40 * len(nodes) + 40))
        with cols[1]:
            st_long = nodes.melt(id_vars="node", value_vars=["steals", "stolen_from"], var_name="role",
                                 value_name="count").dropna()
            draw.chart(alt.Chart(st_long, title="steals per node (made / suffered)")
                       .mark_bar().encode(x=alt.X("count:Q"), y=alt.Y("node:N", sort=None), color="role:N",
                                          tooltip=["node", "role", "count"])
                       .properties(height=40 * len(nodes) + 40))
    log = s["steal_log"]
    if log.empty:
        st.caption("no steals in this run")
    else:
        draw.chart(alt.Chart(log, title="steals over time").mark_line(point=True, interpolate="step-after")
                   .encode(x=alt.X("sec:Q", title="seconds since the scheduler started"),
                           y=alt.Y("steals_so_far:Q", title="steals"),
                           tooltip=["sec", "thief", "victim", "tiles"]).properties(height=200))

