"""The cache view: R against its bound, the cache tiers' counters (per second or cumulative) and
the L3 directory's hits per hop (data: :mod:`dashboard.rundir.cache`).
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView, downsample, format_r


def show(view: RunView, ov: dict) -> None:
    st.subheader("cache")
    st.markdown(f"`R: {format_r(ov['R'])}` · `bound R: {format_r(ov['bound_R'])}` · "
                f"`loads: {draw.n(ov['loads'])}` · `n: {draw.n(ov['n_items'])}`")
    st.caption("R = item loads / n (the number that decides speed); bound = 1 + n/(2S) for a host cache of "
               "S items. " + (f"R from {ov['source']}." if ov["source"] else ""))
    totals = view.cache.tier_totals()
    if not totals.empty:
        st.dataframe(totals, hide_index=True, width="stretch")
    rs = view.cache.r_series()
    if not rs.empty:
        base = alt.Chart(downsample(rs), title="R over time").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("R:Q", title="R"), tooltip=["sec", "R"])
        if ov["bound_R"] is not None:
            rule = alt.Chart(pd.DataFrame({"bound": [ov["bound_R"]]})).mark_rule(strokeDash=[6, 4], color="gray") \
                .encode(y="bound:Q", tooltip=["bound"])
            base = base + rule
        draw.chart(base.properties(height=200))
    show_l3(view)
    ts = view.cache.tier_series()
    if ts.empty:
        st.info("no per-tier counters yet (metrics.jsonl `tiers`)")
    else:
        mode = st.radio("tier counters", ["per second", "cumulative"], horizontal=True, key="tier_mode",
                        help="per second: change over the last 2 s (hit ratio: of the accesses in that window)")
        y = "rate" if mode == "per second" else "value"
        df = downsample(ts.dropna(subset=[y]), max_points=600, by=["tier", "counter"])
        counters = [c for c in ["hit_ratio", "hits", "misses", "bytes_in", "evictions", "loads", "bytes"]
                    if c in set(df["counter"])]
        counters += sorted(set(df["counter"]) - set(counters))
        cols = st.columns(min(3, max(1, len(counters))))
        for i, counter in enumerate(counters):
            part = df[df["counter"] == counter]
            yscale = alt.Scale(domain=[0, 1]) if counter == "hit_ratio" else alt.Scale()
            with cols[i % len(cols)]:
                title = f"{counter.replace('_', ' ')} ({'last 2 s' if counter == 'hit_ratio' and y == 'rate' else mode})"
                draw.chart(alt.Chart(part, title=title).mark_line().encode(
                    x=alt.X("sec:Q", title="seconds since start"), y=alt.Y(f"{y}:Q", title=counter, scale=yscale),
                    color="tier:N", tooltip=["tier", "sec", y]).properties(height=180))


def show_l3(view: RunView) -> None:
    """The L3 directory panel: items taken from a peer node's cache, per hop and node
    (summary.json ``l3``, written when the run finishes)."""
    totals = view.cache.l3_totals()
    if not totals:
        st.caption("L3 directory: off for this run (`cache.l3=true` on a cluster), or the run "
                   "has not finished")
        return
    hops = totals.get("hits_per_hop") or []
    st.markdown("**L3 directory** · " + " · ".join(f"`hop {k + 1}: {draw.n(h)}`" for k, h in enumerate(hops))
                + f" · `misses: {draw.n(totals.get('misses'))}` · `failed: {draw.n(totals.get('failed'))}`")
    st.caption("hits: items taken from the k-th most recent holder's cache instead of storage; "
               "misses: items no peer handed over (loaded); failed: hand-overs that broke off")
    df = view.cache.l3_hops()
    if not df.empty:
        draw.chart(alt.Chart(df, title="L3 hits per hop").mark_bar().encode(
            x=alt.X("hop:N", title="hop"), y=alt.Y("hits:Q", title="items"),
            color="node:N", xOffset="node:N", tooltip=["node", "hop", "hits"]).properties(height=200))
