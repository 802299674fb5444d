"""The devices view: each device actor's throughput and idle time over time, its tiles, and busy
against idle seconds (data: :mod:`dashboard.rundir.devices`).
"""

from __future__ import annotations

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView, downsample


def show(view: RunView, ov: dict) -> None:
    st.subheader("devices")
    summ = view.devices.summary()
    series = view.devices.series()
    if summ.empty and series.empty:
        st.info("no per-actor data yet (metrics.jsonl `actors` or tiles.jsonl)")
        return
    st.markdown(" · ".join(f"`{r.actor}: {draw.n(r.tiles)} tiles`" for r in summ.itertuples()))
    if not series.empty:
        df = downsample(series.dropna(subset=["pairs_per_s"]), by="actor")
        draw.chart(alt.Chart(df, title="throughput per actor (pairs/s)").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("pairs_per_s:Q", title="pairs/s"),
            color="actor:N", tooltip=["actor", "sec", "pairs_per_s", "tiles"]).properties(height=240))
        if series["busy_frac"].notna().any():
            df = downsample(series.dropna(subset=["busy_frac"]), by="actor")
            df = df.assign(idle_frac=1.0 - df["busy_frac"])
            draw.chart(alt.Chart(df, title="idle fraction per actor").mark_line().encode(
                x=alt.X("sec:Q", title="seconds since start"),
                y=alt.Y("idle_frac:Q", title="idle fraction", scale=alt.Scale(domain=[0, 1])),
                color="actor:N", tooltip=["actor", "sec", "idle_frac"]).properties(height=180))
    c1, c2 = st.columns(2)
    with c1:
        draw.chart(alt.Chart(summ, title="tiles per actor").mark_bar().encode(
            x=alt.X("actor:N"), y=alt.Y("tiles:Q"), color="actor:N", tooltip=["actor", "tiles", "pairs"])
                   .properties(height=220))
    with c2:
        if summ["idle_s"].notna().any():
            df = summ.melt(id_vars="actor", value_vars=["busy_s", "idle_s"], var_name="time", value_name="seconds")
            draw.chart(alt.Chart(df, title="busy / idle seconds").mark_bar().encode(
                x="actor:N", y="seconds:Q", color=alt.Color("time:N", scale=alt.Scale(range=["#1f77b4", "#cfd8dc"])),
                tooltip=["actor", "time", "seconds"]).properties(height=220))
        else:
            st.caption("idle time needs `busy_s` per actor in metrics.jsonl")
    st.dataframe(summ, hide_index=True, width="stretch")

