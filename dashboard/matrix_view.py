"""The matrix view: the pair space's quadtree leaves coloured by state or actor, or, beyond
``PAIRFLOW_DASHBOARD_MAX_RECTS`` leaves (a browser draws about that many rectangles smoothly), a
coarse grid of the fraction done (data: :mod:`dashboard.rundir.matrix`).
"""

from __future__ import annotations

import os

import altair as alt
import streamlit as st

from pairflow.dashboard import draw
from pairflow.dashboard.rundir import RunView

STATE_COLORS = {"done": "#2e7d32", "running": "#f9a825", "pending": "#cfd8dc"}


def max_rects() -> int:
    """Leaves drawn one by one at most (read at each draw: a test or a user may set it)."""
    return int(os.environ.get("PAIRFLOW_DASHBOARD_MAX_RECTS", "20000"))


def show(view: RunView, ov: dict) -> None:
    st.subheader("matrix")
    tiles = view.matrix.tile_states()
    if tiles.empty:
        st.info("no quadtree yet (tiles.json is written at start)")
        return
    counts = tiles["state"].value_counts()
    st.markdown(f"`leaves: {len(tiles)}` · `done: {int(counts.get('done', 0))}` · "
                f"`running: {int(counts.get('running', 0))}` · `pending: {int(counts.get('pending', 0))}`")
    by = st.radio("colour by", ["state", "actor"], horizontal=True, key="matrix_colour")
    space = ov["space"] or {}
    n_rows = space.get("n_rows") or tiles["r1"].max()
    n_cols = space.get("n_cols") or tiles["c1"].max()
    if by == "state":
        color = alt.Color("state:N", scale=alt.Scale(domain=list(STATE_COLORS), range=list(STATE_COLORS.values())))
    else:
        actors = sorted(a for a in tiles["actor"].unique() if a != "—")
        color = alt.Color("actor:N", scale=alt.Scale(domain=actors + ["—"],
                                                     range=draw.palette(len(actors)) + ["#eceff1"]))
    size = 560
    aspect = float(n_rows) / float(n_cols) if n_cols else 1.0
    height = max(120, int(size * min(aspect, 2.0)))
    xs = alt.Scale(domain=[0, float(n_cols)], nice=False)
    ys = alt.Scale(domain=[0, float(n_rows)], nice=False, reverse=True)
    if len(tiles) > max_rects():  # too many leaves to draw one by one: a coarse grid of fraction done
        bins = view.matrix.bins()
        st.caption(f"{len(tiles):,} leaves drawn as a {bins['r0'].nunique()}×{bins['c0'].nunique()} grid "
                   "(colour: fraction of pairs done)")
        c = alt.Chart(bins).mark_rect().encode(
            x=alt.X("c0:Q", title="column item", scale=xs), x2="c1:Q",
            y=alt.Y("r0:Q", title="row item", scale=ys), y2="r1:Q",
            color=alt.Color("fraction_done:Q", scale=alt.Scale(domain=[0, 1], scheme="greens")),
            tooltip=["r0", "r1", "c0", "c1", "leaves", "pairs", "pairs_done", "running",
                     alt.Tooltip("fraction_done:Q", format=".1%")],
        ).properties(width=size, height=height)
        st.altair_chart(c, width="content")
        return
    c = alt.Chart(tiles).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("c0:Q", title="column item", scale=xs), x2="c1:Q",
        y=alt.Y("r0:Q", title="row item", scale=ys), y2="r1:Q", color=color,
        tooltip=["id", "state", "actor", "r0", "r1", "c0", "c1", "pairs", "depth", "order",
                 alt.Tooltip("sec_end:Q", title="done at (s)", format=".1f")],
    ).properties(width=size, height=height)
    st.altair_chart(c, width="content")

