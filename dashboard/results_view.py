"""The results view: what a run found, chosen by what ``RUN_DIR/result/`` holds.

Parts (a radio picks one; only the parts the run directory has are offered):

* **matrix** — any field of ``matrix.zarr`` as a heatmap (:mod:`dashboard.results_dense`):
  cells, or block means beyond ``cells a side``; a region by its numbers or by dragging a box on
  the heatmap; rows and columns in item order or clustered; names on hover; missing (grey) where
  a tile is not finished; one cell looked up by name; the value distribution.
* **pairs** — top-k and threshold tables, searchable and sortable, one item's neighbours, the
  score distribution.
* **tree**, and each app's own results (:mod:`dashboard.results_apps`).

Every part starts with a line of ``key: value`` facts in code spans that the browser tests read
(e.g. ``field: similarity`` · ``tiles finished: 20 / 36`` · ``missing cells: 112``).
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pairflow.dashboard import results_apps as apps
from pairflow.dashboard import results_files as rf
from pairflow.dashboard.export import export_buttons
from pairflow.dashboard.results_dense import DEFAULT_SIDE, Grid, shared_dense

MISSING = "#cfd8dc"


def facts(**kw) -> None:
    st.markdown(" · ".join(f"`{k.replace('_', ' ')}: {v}`" for k, v in kw.items()))


def parts_available(view, ov: dict) -> dict:
    """{part: callable} for what the run directory holds now."""
    run_dir = view.run_dir
    plan = view.matrix.plan()
    dense = shared_dense(run_dir)
    has_dense = dense.refresh(plan.to_dict("records") if not plan.empty else None, ov.get("space"),
                              final=ov["state"] in ("finished", "failed", "interrupted"))
    out = {}
    if has_dense and dense.fields:
        out["matrix"] = lambda: view_matrix(dense)
    if rf.edge_tables(run_dir):
        out["pairs"] = lambda: view_pairs(run_dir)
    out.update(apps.parts(run_dir))
    return out


def view_results(view, ov: dict) -> None:
    st.subheader("results")
    parts = parts_available(view, ov)
    if not parts:
        st.info("no results yet: `result/` holds none of matrix.zarr, topk.parquet, edges.parquet, "
                "tree.nwk, clusters.csv, fused.csv, hits.parquet, cutflow.json, units.json "
                "(a run writes them as it goes or when it finishes)")
        return
    names = list(parts)
    choice = st.radio("part", names, horizontal=True, key="results_part")
    parts.get(choice or names[0], parts[names[0]])()


# --------------------------------------------------------------------------- matrix


REGION = "mx_region"  # (r0, r1, c0, c1) the user picked; None: the whole matrix, whatever its shape
REGION_GEN = "mx_region_gen"  # bumped when a button or a box sets the region: new inputs show it
REGION_LABELS = ("rows from", "rows to", "columns from", "columns to")


def region_inputs(shape: tuple[int, int], picked) -> tuple[tuple, tuple, tuple]:
    """(values, lows, highs) of the four region inputs: the picked region (None: the whole
    matrix) held within each input's bounds for a matrix of ``shape``.

    The values are the inputs' own defaults (``value=``), never written to their keys: a browser
    that mounts an input from a later rerun's element than the one that set it (a loaded
    browser applying several reruns at once) takes the element's default and sends it back.
    With defaults of 0 / min (the bounds' floor) and the region written to the keys, a live page
    showed rows 0-1 x columns 0-1, one cell, until "whole matrix" was pressed."""
    n_rows, n_cols = shape
    lows = (0, 1, 0, 1)
    highs = (max(0, n_rows - 1), max(1, n_rows), max(0, n_cols - 1), max(1, n_cols))
    want = (0, n_rows, 0, n_cols) if picked is None else picked
    values = tuple(min(max(int(v), lo), hi) for v, lo, hi in zip(want, lows, highs))
    return values, lows, highs


def _set_region(region) -> None:
    """A region set by a button or a box (not typed in the inputs): new inputs, which show it."""
    st.session_state[REGION] = region
    st.session_state[REGION_GEN] = st.session_state.get(REGION_GEN, 0) + 1


def _on_brush(n_rows: int, n_cols: int):
    """A box dragged on the heatmap becomes the region (its numbers fill the inputs)."""
    def apply():
        sel = (st.session_state.get("mx_heat") or {}).get("selection", {}).get("zoom") or {}
        xs, ys = sel.get("c0"), sel.get("r0")
        if not xs or not ys:
            return
        _set_region((int(max(0, np.floor(min(ys)))), int(min(n_rows, np.ceil(max(ys)))),
                     int(max(0, np.floor(min(xs)))), int(min(n_cols, np.ceil(max(xs))))))
    return apply


def view_matrix(dense) -> None:
    fields = dense.fields
    n_rows, n_cols = dense.shape
    c1, c2, c3 = st.columns([2, 2, 1])
    name = c1.selectbox("field", fields, key="mx_field")
    order = c2.radio("order", ["items", "clustered"], horizontal=True, key="mx_order",
                     help="clustered: average linkage of the rows' (and columns') profiles")
    side = int(c3.number_input("cells a side", min_value=10, max_value=400, value=DEFAULT_SIDE, step=10,
                               key="mx_side", help="above this many items a side: means of blocks"))
    values, lows, highs = region_inputs((n_rows, n_cols), st.session_state.get(REGION))
    # inputs of their own for each region set by a button or a box and for each shape (a
    # whole matrix's inputs follow it as it changes); typed values are read back below
    gen = f"{st.session_state.get(REGION_GEN, 0)}_{n_rows}x{n_cols}"
    rc = st.columns([1, 1, 1, 1, 1])
    r0, r1, q0, q1 = (int(rc[i].number_input(REGION_LABELS[i], lows[i], highs[i], value=values[i],
                                             key=f"mx_{('r0', 'r1', 'c0', 'c1')[i]}_{gen}"))
                      for i in range(4))
    rc[4].button("whole matrix", on_click=_set_region, args=(None,), key="mx_whole")
    st.session_state[REGION] = None if (r0, r1, q0, q1) == (0, n_rows, 0, n_cols) else (r0, r1, q0, q1)
    region = st.session_state[REGION]
    grid = dense.grid(name, side, order=order, region=region)
    done, planned = dense.tiles()
    row_keys, col_keys = dense.keys()
    shown = "cells" if grid.factor == 1 else f"means of {grid.factor}×{grid.factor} blocks"
    facts(field=name, items=f"{n_rows} × {n_cols}", tiles_finished=f"{done} / {planned}",
          missing_cells=dense.missing_cells(), shown=f"{grid.values.shape[0]} × {grid.values.shape[1]} {shown}",
          order=order)
    df, names = grid_frame(grid, row_keys, col_keys)
    chart = heatmap(df, names, name, grid, order)
    st.altair_chart(chart, key="mx_heat", on_select=_on_brush(n_rows, n_cols), selection_mode=["zoom"],
                    width="content")
    st.caption("drag a box on the heatmap to show that region (cell by cell once it fits); grey: "
               "missing (its tile has not finished)")
    cells = df.merge(names[0], on="ri").merge(names[1], on="ci").drop(columns=["ri", "ci"])
    export_buttons(f"heatmap-{name}", heatmap(df, names, name, grid, order, brush=False), cells, key="mx")
    cell_lookup(dense, name, row_keys, col_keys)
    if dense.large and not st.toggle("value distribution (reads the whole field once)", key="mx_hist_on"):
        return
    value_distribution(dense, name)


def value_distribution(dense, name: str) -> None:
    edges, counts, n = dense.histogram(name)
    hist = pd.DataFrame({"lo": edges[:-1], "hi": edges[1:], "cells": counts})
    st.markdown(f"`value distribution: {n} cells`")
    hchart = alt.Chart(hist, title=f"{name}: value distribution (finished cells)").mark_bar().encode(
        x=alt.X("lo:Q", title=name, bin="binned"), x2="hi:Q", y=alt.Y("cells:Q"),
        tooltip=["lo", "hi", "cells"]).properties(width=560, height=180)
    st.altair_chart(hchart, width="content")
    export_buttons(f"distribution-{name}", hchart, hist, key="mx-hist")


def _span(keys: list[str], idx: np.ndarray, a: int, b: int) -> str:
    if b - a <= 1:
        return keys[idx[a]] if a < len(idx) else ""
    return f"{keys[idx[a]]} … {keys[idx[b - 1]]} ({b - a})"


def grid_frame(grid: Grid, row_keys: list[str], col_keys: list[str]):
    """The heatmap's data: one row per cell (its block indices ri, ci, position range and value,
    None where missing), and the rows' and columns' names once each (joined in the browser, so
    a big grid does not carry a name per cell)."""
    gr, gc = grid.values.shape
    ri, ci = np.meshgrid(np.arange(gr), np.arange(gc), indexing="ij")
    ri, ci = ri.ravel(), ci.ravel()
    vals = grid.values.ravel()
    rows = pd.DataFrame({"ri": np.arange(gr), "row": [
        _span(row_keys, grid.rows, grid.r_edges[i], grid.r_edges[i + 1]) for i in range(gr)]})
    cols = pd.DataFrame({"ci": np.arange(gc), "column": [
        _span(col_keys, grid.cols, grid.c_edges[j], grid.c_edges[j + 1]) for j in range(gc)]})
    cells = pd.DataFrame({
        "ri": ri, "ci": ci,
        "r0": grid.r_edges[ri], "r1": grid.r_edges[ri + 1], "c0": grid.c_edges[ci], "c1": grid.c_edges[ci + 1],
        "value": [None if not np.isfinite(v) else float(v) for v in vals]})
    return cells, (rows, cols)


def heatmap(df: pd.DataFrame, names, name: str, grid: Grid, order: str, brush: bool = True):
    n_r = grid.r_edges[-1] - grid.r_edges[0]
    n_c = grid.c_edges[-1] - grid.c_edges[0]
    width = 620
    height = int(max(160, min(2.0, n_r / max(1, n_c)) * width))
    pos = " (clustered order)" if order == "clustered" else ""
    xs = alt.Scale(domain=[float(grid.c_edges[0]), float(grid.c_edges[-1])], nice=False, zero=False)
    ys = alt.Scale(domain=[float(grid.r_edges[0]), float(grid.r_edges[-1])], nice=False, zero=False,
                   reverse=True)
    c = alt.Chart(df, title=f"{name}").transform_lookup(
        lookup="ri", from_=alt.LookupData(names[0], "ri", ["row"])).transform_lookup(
        lookup="ci", from_=alt.LookupData(names[1], "ci", ["column"])).transform_calculate(
        shown="isValid(datum.value) ? format(datum.value, '.6g') : 'none'",
    ).mark_rect(invalid="show").encode(  # missing cells drawn (grey), not left out
        x=alt.X("c0:Q", title=f"column{pos}", scale=xs), x2="c1:Q",
        y=alt.Y("r0:Q", title=f"row{pos}", scale=ys), y2="r1:Q",
        color=alt.Color("value:Q", title=name, scale=alt.Scale(scheme="viridis")),
        tooltip=["row:N", "column:N", alt.Tooltip("shown:N", title="value")],
    ).properties(width=width, height=height)
    if brush:
        c = c.add_params(alt.selection_interval(name="zoom", encodings=["x", "y"]))
    # a missing value's colour (Vega-Lite 6: a condition on isValid does not reach it)
    return c.configure_scale(invalid={"color": {"value": MISSING}})


def cell_lookup(dense, name: str, row_keys: list[str], col_keys: list[str]) -> None:
    """One cell by its items' names: the exact value the field holds (or missing)."""
    c1, c2 = st.columns(2)
    if len(row_keys) > 5000:  # a select box of many thousands is no use: type an index or name
        a = c1.text_input("row item (name or index)", value=row_keys[0], key="mx_cell_r")
        b = c2.text_input("column item (name or index)", value=col_keys[-1], key="mx_cell_c")
        i = row_keys.index(a) if a in row_keys else (int(a) if a.isdigit() and int(a) < len(row_keys) else None)
        j = col_keys.index(b) if b in col_keys else (int(b) if b.isdigit() and int(b) < len(col_keys) else None)
        if i is None or j is None:
            st.caption("no such item")
            return
    else:
        i = c1.selectbox("row item", range(len(row_keys)), format_func=lambda x: row_keys[x], key="mx_cell_r")
        j = c2.selectbox("column item", range(len(col_keys)), index=len(col_keys) - 1,
                         format_func=lambda x: col_keys[x], key="mx_cell_c")
    v = dense.cell(name, int(i), int(j))
    shown = "missing (its tile has not finished)" if not np.isfinite(v) else repr(float(v))
    st.markdown(f"`cell: {name}[{row_keys[i]}, {col_keys[j]}] = {shown}`")


# --------------------------------------------------------------------------- pairs


def first_row(df: pd.DataFrame, cols: list[str]) -> None:
    """The table's first row as text (the grid itself is drawn on a canvas)."""
    if len(df):
        row = df.iloc[0]
        st.markdown("`first row: " + ", ".join(f"{c}={row[c]}" for c in cols if c in df.columns) + "`")


def view_pairs(run_dir) -> None:
    tables = rf.edge_tables(run_dir)
    label = st.radio("table", list(tables), horizontal=True, key="pairs_table") if len(tables) > 1 \
        else next(iter(tables))
    df = tables.get(label, next(iter(tables.values())))
    a, b, score = rf.pair_columns(df)
    desc = rf.larger_is_better(df)
    c1, c2, c3 = st.columns([2, 2, 1])
    text = c1.text_input("search items", key="pairs_search", help="rows whose items contain this text")
    items = sorted(set(df[a].astype(str)) | set(df[b].astype(str)))
    one = c2.selectbox("neighbours of", ["(all pairs)"] + items, key="pairs_item")
    limit = int(c3.number_input("rows shown", 10, 100_000, 1000, step=100, key="pairs_limit"))
    sel = df
    if one != "(all pairs)":
        sel = sel[(sel[a].astype(str) == one) | (sel[b].astype(str) == one)]
    if text:
        t = text.lower()
        sel = sel[sel[a].astype(str).str.lower().str.contains(t, regex=False)
                  | sel[b].astype(str).str.lower().str.contains(t, regex=False)]
    sel = sel.sort_values(score, ascending=not desc, kind="mergesort")
    facts(table=label, rows=len(df), matching=len(sel), shown=min(limit, len(sel)),
          strongest="largest score" if desc else "smallest score")
    first_row(sel, [a, b, score, "rank"])
    st.dataframe(sel.head(limit), hide_index=True, width="stretch", key="pairs_df")
    export_buttons(f"pairs-{label}", None, sel, key="pairs")
    v = pd.to_numeric(df[score], errors="coerce").dropna()
    if len(v):
        counts, edges = np.histogram(v, bins=40)
        hist = pd.DataFrame({"lo": edges[:-1], "hi": edges[1:], "pairs": counts})
        ch = alt.Chart(hist, title=f"{score} distribution ({label})").mark_bar().encode(
            x=alt.X("lo:Q", bin="binned", title=score), x2="hi:Q", y="pairs:Q",
            tooltip=["lo", "hi", "pairs"]).properties(width=560, height=180)
        st.altair_chart(ch, width="content")
        export_buttons(f"score-distribution-{label}", ch, hist, key="pairs-hist")
