"""What every view of the dashboard draws with: numbers as the page prints them, the status line
and header at the top of each view, charts, and the colours of stages and actors.

The status line is machine-readable (``state: running · tiles done: 12 / 36 · ...``): the browser
tests parse it, so it has one definition, here.
"""

from __future__ import annotations

import datetime as _dt

import pandas as pd
import streamlit as st

from pairflow.dashboard.rundir import STAGES, TERMINAL_STATES, WAITING, format_count, format_duration, format_r

STAGE_COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#2ca02c"]
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf"]


def n(x, digits: int = 0) -> str:
    """A number with thousands separators; "?" when unknown."""
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "?"
    return f"{x:,.{digits}f}"


def rate(x) -> str:
    """A rate per second in compact units; "—" when unknown."""
    if x is None:
        return "—"
    if x >= 100:
        return f"{format_count(x)}/s"
    return f"{x:.2f}/s"


def of(p: dict) -> str:
    """done / total of a headline metric in compact units (exact figures in its help)."""
    return f"{format_count(p.get('done'))} / {format_count(p.get('total'))}"


def ts(t) -> str:
    """A unix time as local date and time; "—" when unknown."""
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
            parts.append(f"{name} done: {n(p.get('done')).replace(',', '')} / {n(p.get('total')).replace(',', '')}")
    for name, p in prog.items():
        if name not in ("tiles", "pairs"):
            parts.append(f"{name} done: {p.get('done')} / {p.get('total')}")
    parts.append(f"R: {format_r(ov['R'])}")
    if ov["state"] not in TERMINAL_STATES and ov["state"] != WAITING:
        parts.append(f"ETA: {format_duration(ov['eta_s'])}")
    return " · ".join(f"`{p}`" for p in parts)


def header(ov: dict) -> None:
    """The status line, then what the reader must know first: waiting, failed, stale."""
    st.markdown(status_line(ov))
    state = ov["state"]
    if state == WAITING:
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


def palette(k: int) -> list[str]:
    return [PALETTE[i % len(PALETTE)] for i in range(k)]


def stage_colors(stages: list[str]) -> list[str]:
    """A colour per stage: the dataflow's stages keep theirs, others take the palette's."""
    out = []
    for s in stages:
        out.append(STAGE_COLORS[STAGES.index(s)] if s in STAGES else palette(len(out) + 7)[-1])
    return out
