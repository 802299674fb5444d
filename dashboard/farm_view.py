"""The farm view: a tool farm's units per worker, the tool runs that failed (each attempt, with
its stderr) and the units given up (data: :mod:`dashboard.rundir.farm`).
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView


def show(view: RunView, ov: dict) -> None:
    st.subheader("farm")
    if not view.farm.applies(view.kind):
        st.info("this run is not a tool farm (no farm.jsonl)")
        return
    f = view.farm.frames()
    units = ov["progress"].get("units", {})
    st.markdown(f"`units done: {draw.n(units.get('done'))} / {draw.n(units.get('total'))} · "
                f"retries: {draw.n(f['retries'])} · failed units: {draw.n(f['units_failed'])}`")
    st.dataframe(f["workers"], hide_index=True, width="stretch")
    if not f["workers"].empty:
        draw.chart(alt.Chart(f["workers"], title="units per worker")
                   .mark_bar().encode(x=alt.X("units:Q"), y=alt.Y("worker:N", sort=None),
                                      tooltip=["worker", "node", "units", "busy_s", "units_per_s"])
                   .properties(height=24 * len(f["workers"]) + 20))
    if f["node_bytes"]:
        st.caption("shared-file bytes fetched per node: " +
                   ", ".join(f"{k[:8]}: {draw.n(v)}" for k, v in f["node_bytes"].items()))
    for g in f["given_up"]:
        st.error(f"unit {g.get('unit')} (records {g.get('records')} of {g.get('file')}: "
                 f"{', '.join(g.get('names') or [])}) failed after {g.get('attempts')} attempts: "
                 f"{g.get('error')}")
        if g.get("stderr"):
            st.code(g["stderr"], language=None)
    if not f["failed_runs"].empty:
        st.markdown("failed tool runs (each attempt)")
        st.dataframe(f["failed_runs"], hide_index=True, width="stretch")

