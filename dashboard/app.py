"""pairflow live job dashboard (Streamlit).

    pairflow dashboard RUN_DIR                      # serves on 127.0.0.1:8501
    streamlit run dashboard/app.py -- RUN_DIR [--refresh 1.0]

Reads only the run directory (see docs/run-directory.md) through :mod:`dashboard.rundir`; never
imports Ray or the engine.  One :class:`~dashboard.rundir.RunView` per run directory
(``shared_view``) is shared by all browser sessions and refreshed incrementally (only the bytes
appended since the last refresh are read) inside a fragment that reruns every ``--refresh`` seconds.

The first line of every view is a machine-readable status line, e.g.
``state: running · tiles done: 12 / 36 · pairs done: 66 / 276 · R: 1.234 · ETA: 5 s``,
which the browser tests read.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

try:
    from pairflow.dashboard.rundir import (STAGES, TERMINAL_STATES, RunView, downsample, format_count, format_duration,
                                  format_r, shared_view)
except ImportError:  # run as a plain script from a source checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from pairflow.dashboard.rundir import (STAGES, TERMINAL_STATES, RunView, downsample, format_count, format_duration,
                                  format_r, shared_view)

VIEWS = ["overview", "devices", "cache", "matrix", "timeline", "pipelines", "farm", "scheduling", "results"]
MAX_RECTS = int(os.environ.get("PAIRFLOW_DASHBOARD_MAX_RECTS", "20000"))  # leaves drawn one by one
STATE_COLORS = {"done": "#2e7d32", "running": "#f9a825", "pending": "#cfd8dc"}
STAGE_COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#2ca02c"]

alt.data_transformers.disable_max_rows()


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dashboard/app.py", description="pairflow run dashboard")
    p.add_argument("run_dir", nargs="?", default=os.environ.get("PAIRFLOW_RUN_DIR", "."),
                   help="the run directory to show (may not exist yet)")
    p.add_argument("--refresh", type=float, default=float(os.environ.get("PAIRFLOW_DASHBOARD_REFRESH", "1.0")),
                   help="seconds between refreshes (default 1.0)")
    args, _unknown = p.parse_known_args(argv)
    args.refresh = min(max(args.refresh, 0.2), 60.0)
    return args


# --------------------------------------------------------------------------- formatting


def _n(x, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "?"
    return f"{x:,.{digits}f}"


def _rate(x) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"{format_count(x)}/s"
    return f"{x:.2f}/s"


def _of(p: dict) -> str:
    """done / total of a headline metric in compact units (exact figures in its help)."""
    return f"{format_count(p.get('done'))} / {format_count(p.get('total'))}"


def _ts(t) -> str:
    if t is None:
        return "—"
    return _dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")


def status_line(ov: dict) -> str:
    """The machine-readable first line of every view (the browser tests parse it)."""
    prog = ov["progress"]
    parts = [f"state: {ov['state']}"]
    for name in ("tiles", "pairs"):
        p = prog.get(name, {})
        if p.get("done") is not None or p.get("total") is not None:
            parts.append(f"{name} done: {_n(p.get('done')).replace(',', '')} / {_n(p.get('total')).replace(',', '')}")
    for name, p in prog.items():
        if name not in ("tiles", "pairs"):
            parts.append(f"{name} done: {p.get('done')} / {p.get('total')}")
    parts.append(f"R: {format_r(ov['R'])}")
    if ov["state"] not in TERMINAL_STATES and ov["state"] != "waiting for run":
        parts.append(f"ETA: {format_duration(ov['eta_s'])}")
    return " · ".join(f"`{p}`" for p in parts)


def header(view: RunView, ov: dict) -> None:
    st.markdown(status_line(ov))
    state = ov["state"]
    if state == "waiting for run":
        st.info(f"waiting for run: nothing written yet in `{ov['run_dir']}` "
                "(meta.json, status.json and metrics.jsonl appear when the run starts). This page refreshes by itself.")
    elif state == "failed":
        lines = str(ov["error"] or "").strip().splitlines()
        st.error("run failed: " + (lines[0] if lines else "(no error text in status.json)"))
        if ov["error"]:
            st.code(str(ov["error"]), language=None)
    elif ov["stale"]:
        st.warning(f"no update for {format_duration(ov['age_s'])}: the run may have died without "
                   "recording it, or this is a copy of an unfinished run.")
    if ov["bad_lines"]:
        st.caption(f"{ov['bad_lines']} malformed line(s) skipped")


def chart(c, **kw) -> None:
    st.altair_chart(c, width="stretch", **kw)


# --------------------------------------------------------------------------- views


def view_overview(view: RunView, ov: dict) -> None:
    st.subheader("overview")
    prog, thr = ov["progress"], ov["throughput"]
    # two rows of three: "24.5 M / 50.0 M" or "12 h 05 min" would not fit a sixth of the page
    cols = st.columns(3) + st.columns(3)
    cols[0].metric("state", ov["state"])
    cols[1].metric("ETA", format_duration(ov["eta_s"]) if ov["state"] not in TERMINAL_STATES else "—")
    cols[2].metric("R", format_r(ov["R"]), help="item loads / n items")
    t, p = prog.get("tiles", {}), prog.get("pairs", {})
    cols[3].metric("tiles", _of(t), help=f"{_n(t.get('done'))} / {_n(t.get('total'))} tiles")
    cols[4].metric("pairs", _of(p), help=f"{_n(p.get('done'))} / {_n(p.get('total'))} pairs")
    rate = thr.get("pairs_per_s") if thr.get("pairs_per_s") is not None else thr.get("pairs_per_s_avg")
    cols[5].metric("throughput", _rate(rate), help="pairs per second, recent window"
                   + (f": {rate:,.1f}" if rate is not None else ""))
    for name, pr in prog.items():
        if pr.get("fraction") is not None:
            st.progress(min(1.0, pr["fraction"]), text=f"{name}: {_n(pr['done'])} / {_n(pr['total'])} "
                                                       f"({100 * pr['fraction']:.1f} %)")
    info = {
        "app": ov["app"], "kind": ov["kind"],
        "space": ", ".join(f"{k}={v}" for k, v in (ov["space"] or {}).items() if k != "pairs") or None,
        "items": ov["n_items"], "leaf items": ov["leaf_items"], "plan": ov.get("plan"),
        "actors": ", ".join(map(str, ov["actors"])) or None,
        "started": _ts(ov["started"]), "elapsed": format_duration(ov["elapsed_s"]),
        "last update": _ts(ov["updated"]),
        "tiles/s (recent)": _rate(thr.get("tiles_per_s")),
        "pairs/s (average)": _rate(thr.get("pairs_per_s_avg")),
    }
    st.dataframe(pd.DataFrame({"": list(info), "value": [("—" if v is None else str(v)) for v in info.values()]}),
                 hide_index=True, width=720)
    m = view.metrics_frame()
    if not m.empty and "pairs_done" in m.columns:
        df = downsample(m[["sec", "pairs_done", "tiles_done"]].dropna(subset=["pairs_done"]))
        chart(alt.Chart(df, title="pairs done").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("pairs_done:Q", title="pairs done"),
            tooltip=["sec", "pairs_done", "tiles_done"]).properties(height=220))
    with st.expander("config.yaml"):
        txt = view.config_text
        st.code(txt if txt else "(config.yaml not written yet)", language="yaml")
    if view.summary:
        with st.expander("summary.json"):
            st.json(view.summary)


def view_devices(view: RunView, ov: dict) -> None:
    st.subheader("devices")
    summ = view.actor_summary()
    series = view.actor_series()
    if summ.empty and series.empty:
        st.info("no per-actor data yet (metrics.jsonl `actors` or tiles.jsonl)")
        return
    st.markdown(" · ".join(f"`{r.actor}: {_n(r.tiles)} tiles`" for r in summ.itertuples()))
    if not series.empty:
        df = downsample(series.dropna(subset=["pairs_per_s"]), by="actor")
        chart(alt.Chart(df, title="throughput per actor (pairs/s)").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("pairs_per_s:Q", title="pairs/s"),
            color="actor:N", tooltip=["actor", "sec", "pairs_per_s", "tiles"]).properties(height=240))
        if series["busy_frac"].notna().any():
            df = downsample(series.dropna(subset=["busy_frac"]), by="actor")
            df = df.assign(idle_frac=1.0 - df["busy_frac"])
            chart(alt.Chart(df, title="idle fraction per actor").mark_line().encode(
                x=alt.X("sec:Q", title="seconds since start"),
                y=alt.Y("idle_frac:Q", title="idle fraction", scale=alt.Scale(domain=[0, 1])),
                color="actor:N", tooltip=["actor", "sec", "idle_frac"]).properties(height=180))
    c1, c2 = st.columns(2)
    with c1:
        chart(alt.Chart(summ, title="tiles per actor").mark_bar().encode(
            x=alt.X("actor:N"), y=alt.Y("tiles:Q"), color="actor:N", tooltip=["actor", "tiles", "pairs"])
              .properties(height=220))
    with c2:
        if summ["idle_s"].notna().any():
            df = summ.melt(id_vars="actor", value_vars=["busy_s", "idle_s"], var_name="time", value_name="seconds")
            chart(alt.Chart(df, title="busy / idle seconds").mark_bar().encode(
                x="actor:N", y="seconds:Q", color=alt.Color("time:N", scale=alt.Scale(range=["#1f77b4", "#cfd8dc"])),
                tooltip=["actor", "time", "seconds"]).properties(height=220))
        else:
            st.caption("idle time needs `busy_s` per actor in metrics.jsonl")
    st.dataframe(summ, hide_index=True, width="stretch")


def view_cache(view: RunView, ov: dict) -> None:
    st.subheader("cache")
    st.markdown(f"`R: {format_r(ov['R'])}` · `bound R: {format_r(ov['bound_R'])}` · "
                f"`loads: {_n(ov['loads'])}` · `n: {_n(ov['n_items'])}`")
    st.caption("R = item loads / n (the number that decides speed); bound = 1 + n/(2S) for a host cache of "
               "S items. " + (f"R from {ov['source']}." if ov["source"] else ""))
    totals = view.tier_totals()
    if not totals.empty:
        st.dataframe(totals, hide_index=True, width="stretch")
    rs = view.r_series()
    if not rs.empty:
        base = alt.Chart(downsample(rs), title="R over time").mark_line().encode(
            x=alt.X("sec:Q", title="seconds since start"), y=alt.Y("R:Q", title="R"), tooltip=["sec", "R"])
        if ov["bound_R"] is not None:
            rule = alt.Chart(pd.DataFrame({"bound": [ov["bound_R"]]})).mark_rule(strokeDash=[6, 4], color="gray") \
                .encode(y="bound:Q", tooltip=["bound"])
            base = base + rule
        chart(base.properties(height=200))
    view_l3(view)
    ts = view.tier_series()
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
            d = df[df["counter"] == counter]
            yscale = alt.Scale(domain=[0, 1]) if counter == "hit_ratio" else alt.Scale()
            with cols[i % len(cols)]:
                title = f"{counter.replace('_', ' ')} ({'last 2 s' if counter == 'hit_ratio' and y == 'rate' else mode})"
                chart(alt.Chart(d, title=title).mark_line().encode(
                    x=alt.X("sec:Q", title="seconds since start"), y=alt.Y(f"{y}:Q", title=counter, scale=yscale),
                    color="tier:N", tooltip=["tier", "sec", y]).properties(height=180))


def view_l3(view: RunView) -> None:
    """The L3 directory panel: items taken from a peer node's cache, per hop and node
    (summary.json ``l3``, written when the run finishes)."""
    totals = view.l3_totals()
    if not totals:
        st.caption("L3 directory: off for this run (`cache.l3=true` on a cluster), or the run "
                   "has not finished")
        return
    hops = totals.get("hits_per_hop") or []
    st.markdown("**L3 directory** · " + " · ".join(f"`hop {k + 1}: {_n(h)}`" for k, h in enumerate(hops))
                + f" · `misses: {_n(totals.get('misses'))}` · `failed: {_n(totals.get('failed'))}`")
    st.caption("hits: items taken from the k-th most recent holder's cache instead of storage; "
               "misses: items no peer handed over (loaded); failed: hand-overs that broke off")
    df = view.l3_hops()
    if not df.empty:
        chart(alt.Chart(df, title="L3 hits per hop").mark_bar().encode(
            x=alt.X("hop:N", title="hop"), y=alt.Y("hits:Q", title="items"),
            color="node:N", xOffset="node:N", tooltip=["node", "hop", "hits"]).properties(height=200))


def view_matrix(view: RunView, ov: dict) -> None:
    st.subheader("matrix")
    tiles = view.tile_states()
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
                                                     range=_palette(len(actors)) + ["#eceff1"]))
    size = 560
    aspect = float(n_rows) / float(n_cols) if n_cols else 1.0
    height = max(120, int(size * min(aspect, 2.0)))
    xs = alt.Scale(domain=[0, float(n_cols)], nice=False)
    ys = alt.Scale(domain=[0, float(n_rows)], nice=False, reverse=True)
    if len(tiles) > MAX_RECTS:  # too many leaves to draw one by one: a coarse grid of fraction done
        bins = view.matrix_bins()
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


def view_timeline(view: RunView, ov: dict) -> None:
    st.subheader("timeline")
    extent = view.span_extent()
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
    spans = view.spans(window=(start, end), max_rows=5000)
    stages = [s for s in STAGES if s in set(spans["stage"])] + sorted(set(spans["stage"]) - set(STAGES))
    st.markdown(f"`spans: {len(spans)} in window` · `window: {start:.1f}–{end:.1f} s`")
    if not spans.empty:
        n_actors = spans["actor"].nunique()
        c = alt.Chart(spans).mark_bar().encode(
            x=alt.X("s0:Q", title="seconds since start", scale=alt.Scale(domain=[start, end], nice=False)),
            x2="s1:Q",
            y=alt.Y("actor:N", title=None),
            yOffset=alt.YOffset("stage:N", sort=stages),
            color=alt.Color("stage:N", sort=stages, scale=alt.Scale(domain=stages, range=_stage_colors(stages))),
            tooltip=["actor", "stage", "what", alt.Tooltip("s0:Q", format=".3f"),
                     alt.Tooltip("duration:Q", format=".3f")],
        ).properties(height=max(160, 22 * len(stages) * n_actors))
        chart(c)
    totals = view.stage_totals()
    if not totals.empty:
        chart(alt.Chart(totals, title="seconds per stage (all actors, cumulative)").mark_bar().encode(
            x="seconds:Q", y=alt.Y("stage:N", sort=list(totals["stage"]), axis=alt.Axis(labelOverlap=False)),
            color=alt.Color("stage:N", legend=None, scale=alt.Scale(domain=list(totals["stage"]),
                                                                    range=_stage_colors(list(totals["stage"])))),
            tooltip=["stage", "seconds"]).properties(height=34 * len(totals) + 20))


def view_pipelines(view: RunView, ov: dict) -> None:
    st.subheader("pipelines")
    if not view.has_pipeline():
        st.info("this run has no operator pipeline or farm data (pipeline.jsonl not present)")
        return
    order, table, series = view.pipeline_frames()
    st.markdown("`order: " + " → ".join(order) + "`")
    st.dataframe(table, hide_index=True, width="stretch")
    orders = view.order_report()
    if not orders.empty:
        saved = (view.summary.get("order_report") or {}).get("saved")
        st.markdown("**written and chosen order**" + (
            f" · the chosen order is expected to save {100 * saved:.1f} % per event" if saved else ""))
        st.dataframe(orders, hide_index=True, width="stretch")
    if not series.empty:
        c1, c2 = st.columns(2)
        with c1:
            chart(alt.Chart(downsample(series.dropna(subset=["cost_s"]), by="op"), title="cost per record (s)")
                  .mark_line(point=True).encode(x=alt.X("sec:Q", title="seconds since start"), y="cost_s:Q",
                                                color="op:N", tooltip=["op", "sec", "cost_s"]).properties(height=220))
        with c2:
            chart(alt.Chart(downsample(series.dropna(subset=["pass_rate"]), by="op"), title="pass rate")
                  .mark_line(point=True).encode(x=alt.X("sec:Q", title="seconds since start"),
                                                y=alt.Y("pass_rate:Q", scale=alt.Scale(domain=[0, 1])),
                                                color="op:N", tooltip=["op", "sec", "pass_rate"])
                  .properties(height=220))


def view_farm(view: RunView, ov: dict) -> None:
    st.subheader("farm")
    if not view.has_farm():
        st.info("this run is not a tool farm (no farm.jsonl)")
        return
    f = view.farm_frames()
    units = ov["progress"].get("units", {})
    st.markdown(f"`units done: {_n(units.get('done'))} / {_n(units.get('total'))} · "
                f"retries: {_n(f['retries'])} · failed units: {_n(f['units_failed'])}`")
    st.dataframe(f["workers"], hide_index=True, width="stretch")
    if not f["workers"].empty:
        chart(alt.Chart(f["workers"], title="units per worker")
              .mark_bar().encode(x=alt.X("units:Q"), y=alt.Y("worker:N", sort=None),
                                 tooltip=["worker", "node", "units", "busy_s", "units_per_s"])
              .properties(height=24 * len(f["workers"]) + 20))
    if f["node_bytes"]:
        st.caption("shared-file bytes fetched per node: " +
                   ", ".join(f"{k[:8]}: {_n(v)}" for k, v in f["node_bytes"].items()))
    for g in f["given_up"]:
        st.error(f"unit {g.get('unit')} (records {g.get('records')} of {g.get('file')}: "
                 f"{', '.join(g.get('names') or [])}) failed after {g.get('attempts')} attempts: "
                 f"{g.get('error')}")
        if g.get("stderr"):
            st.code(g["stderr"], language=None)
    if not f["failed_runs"].empty:
        st.markdown("failed tool runs (each attempt)")
        st.dataframe(f["failed_runs"], hide_index=True, width="stretch")


def view_scheduling(view: RunView, ov: dict) -> None:
    st.subheader("scheduling")
    s = view.scheduling_frames()
    if not s["known"]:
        st.info("no scheduling counters yet (summary.json `scheduling`, written when the run ends)")
        return
    rtt = s["round_trips_per_tile"]
    mode = "hierarchical (node frontiers, work stealing)" if s["hierarchical"] else "one pull queue on the head"
    st.markdown(f"`scheduling: {mode}` · `steals: {_n(s['steals'])}` · "
                f"`local hand-outs: {_n(s['local_handouts'])}` · "
                f"`head round trips: {_n(s['head_round_trips'])}` · "
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
            chart(alt.Chart(long, title="hand-outs per node: local vs round trips to the head")
                  .mark_bar().encode(x=alt.X("count:Q"), y=alt.Y("node:N", sort=None), color="hand-out:N",
                                     tooltip=["node", "hand-out", "count"])
                  .properties(height=40 * len(nodes) + 40))
        with cols[1]:
            st_long = nodes.melt(id_vars="node", value_vars=["steals", "stolen_from"], var_name="role",
                                 value_name="count").dropna()
            chart(alt.Chart(st_long, title="steals per node (made / suffered)")
                  .mark_bar().encode(x=alt.X("count:Q"), y=alt.Y("node:N", sort=None), color="role:N",
                                     tooltip=["node", "role", "count"])
                  .properties(height=40 * len(nodes) + 40))
    log = s["steal_log"]
    if log.empty:
        st.caption("no steals in this run")
    else:
        chart(alt.Chart(log, title="steals over time").mark_line(point=True, interpolate="step-after")
              .encode(x=alt.X("sec:Q", title="seconds since the scheduler started"),
                      y=alt.Y("steals_so_far:Q", title="steals"),
                      tooltip=["sec", "thief", "victim", "tiles"]).properties(height=200))


def view_results(view: RunView, ov: dict) -> None:
    """What the run found (dashboard/results_view.py), imported on first use."""
    from pairflow.dashboard.results_view import view_results as draw
    draw(view, ov)


RENDER = {"overview": view_overview, "devices": view_devices, "cache": view_cache, "matrix": view_matrix,
          "timeline": view_timeline, "pipelines": view_pipelines, "farm": view_farm,
          "scheduling": view_scheduling, "results": view_results}


def _palette(n: int) -> list[str]:
    base = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf"]
    return [base[i % len(base)] for i in range(n)]


def _stage_colors(stages: list[str]) -> list[str]:
    out = []
    for s in stages:
        out.append(STAGE_COLORS[STAGES.index(s)] if s in STAGES else _palette(len(out) + 7)[-1])
    return out


# --------------------------------------------------------------------------- page


def main() -> None:
    args = parse_args(sys.argv[1:])
    run_dir = str(Path(args.run_dir).expanduser().resolve())
    st.set_page_config(page_title=f"pairflow · {Path(run_dir).name}", layout="wide")
    view = shared_view(run_dir)  # one per server process, refreshed incrementally
    with st.sidebar:
        st.markdown("### pairflow")
        st.caption(run_dir)
        choice = st.radio("view", VIEWS, key="view", bind="query-params")
        live = st.toggle("live refresh", value=True, key="live", help=f"every {args.refresh:g} s")

    @st.fragment(run_every=args.refresh if live else None)
    def body() -> None:
        try:
            view.refresh()
            ov = view.overview()
        except Exception as e:  # noqa: BLE001 - an unreadable directory must not become a traceback page
            st.markdown("`state: unreadable`")
            st.warning(f"cannot read {run_dir}: {type(e).__name__}: {e}")
            return
        header(view, ov)
        if ov["state"] == "waiting for run":
            return
        try:
            RENDER.get(choice or "overview", view_overview)(view, ov)
        except Exception as e:  # noqa: BLE001 - a view must not take the page down with a traceback
            st.warning(f"{choice} view: cannot draw this yet ({type(e).__name__}: {e})")
        st.caption(f"refreshed {_dt.datetime.now().strftime('%H:%M:%S')} · read in "
                   f"{1000 * view.refresh_seconds:.1f} ms")

    body()


main()
