"""The results view's parts for a tree and for each app's own files (read by
:mod:`dashboard.results_files`): phylogeny's ``tree.nwk``, forensics' clusters against
``truth.csv``, microscopy's fused particle, align's hits, a pipeline's cutflow and histograms,
a farm's streams. Each starts with a line of ``key: value`` facts that the browser tests read.
"""
from __future__ import annotations

from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pairflow.dashboard import results_files as rf
from pairflow.dashboard.export import export_buttons


def facts(**kw) -> None:
    st.markdown(" · ".join(f"`{k.replace('_', ' ')}: {v}`" for k, v in kw.items()))


def parts(run_dir: Path) -> dict:
    """{part name: draw()} for the files ``result/`` holds now."""
    res = rf.result_dir(run_dir)
    out = {}
    if (res / "tree.nwk").is_file():
        out["tree"] = lambda: view_tree(res / "tree.nwk")
    if (res / "clusters.csv").is_file():
        out["clusters"] = lambda: view_clusters(run_dir)
    if (res / "fused.csv").is_file():
        out["fused particle"] = lambda: view_fused(res)
    if (res / "hits.parquet").is_file():
        out["hits"] = lambda: view_hits(res)
    if (res / "cutflow.json").is_file() or list(res.glob("hist-*.json")):
        out["cutflow"] = lambda: view_cutflow(run_dir)
    if (Path(run_dir) / "units.json").is_file():
        out["streams"] = lambda: view_streams(run_dir)
    return out


# --------------------------------------------------------------------------- tree


def view_tree(path: Path) -> None:
    tree = rf.read_tree(path)
    whole = rf.layout_tree(tree)
    labels = dict(zip(whole.clades["label"], whole.clades["clade"])) if not whole.clades.empty else {}
    chosen = st.multiselect("collapse clades", list(labels), key="tree_collapse",
                            help="each collapsed clade is drawn as one leaf (▸) with its size")
    lay = rf.layout_tree(tree, frozenset(labels[c] for c in chosen))
    facts(tree=path.name, leaves=whole.n_leaves, clades=len(whole.clades), shown_leaves=len(lay.leaves),
          collapsed=len(chosen))
    chart = tree_chart(lay, path.name)
    st.altair_chart(chart, width="content")
    data = lay.leaves.rename(columns={"x": "distance_from_root", "y": "position"})
    export_buttons("tree", chart, data, key="tree")
    st.download_button("Newick", path.read_text(), file_name=path.name, key="tree-nwk", on_click="ignore")


def tree_chart(lay: rf.TreeLayout, title: str):
    height = max(160, 18 * len(lay.leaves))
    x_max = float(max(lay.segments["x2"].max(), lay.leaves["x"].max()) if not lay.segments.empty else 1.0)
    xs = alt.Scale(domain=[0, x_max * 1.02], nice=False)
    ys = alt.Scale(domain=[-0.5, len(lay.leaves) - 0.5], reverse=True, nice=False)
    base = alt.Chart(lay.segments).mark_rule(strokeWidth=1.4).encode(
        x=alt.X("x:Q", title="distance from the root", scale=xs), x2="x2:Q",
        y=alt.Y("y:Q", axis=None, scale=ys), y2="y2:Q")
    text = alt.Chart(lay.leaves).mark_text(align="left", dx=4, fontSize=11).encode(
        x=alt.X("x:Q", scale=xs), y=alt.Y("y:Q", scale=ys), text="label:N",
        tooltip=["label", "leaves", alt.Tooltip("x:Q", title="distance from the root", format=".4f")])
    return (base + text).properties(width=560, height=height, title=title)


# --------------------------------------------------------------------------- forensics


def view_clusters(run_dir: Path) -> None:
    res = rf.result_dir(run_dir)
    clusters = rf.cached_read(res / "clusters.csv", rf._csv)
    truth_path = rf.find_truth(run_dir)
    if truth_path is None:
        facts(images=len(clusters), clusters=clusters.iloc[:, 1].nunique(), truth="none found")
        st.dataframe(clusters, hide_index=True)
        export_buttons("clusters", None, clusters, key="clusters")
        return
    got = rf.clusters_vs_truth(clusters, rf.cached_read(truth_path, rf._csv))
    ari = got["ari"]
    facts(images=len(clusters), clusters=got["clusters"], true_groups=got["truths"],
          adjusted_Rand=("n/a" if ari is None else f"{ari:.3f}"), truth=str(truth_path))
    table = got["table"]
    long = table.reset_index().melt(id_vars="cluster", var_name="truth", value_name="images")
    long["cluster"], long["truth"] = long["cluster"].astype(str), long["truth"].astype(str)
    chart = (alt.Chart(long, title="found vs truth.csv").mark_rect().encode(
        x=alt.X("truth:N", title="true camera"), y=alt.Y("cluster:N", title="cluster found"),
        color=alt.Color("images:Q", scale=alt.Scale(scheme="blues")), tooltip=["cluster", "truth", "images"])
        + alt.Chart(long).mark_text().encode(x="truth:N", y="cluster:N", text="images:Q")
    ).properties(width=300, height=300)
    st.altair_chart(chart, width="content")
    export_buttons("clusters-vs-truth", chart, got["matched"], key="clusters")
    st.dataframe(got["matched"], hide_index=True)


# --------------------------------------------------------------------------- microscopy


def view_fused(res: Path) -> None:
    fused = rf.cached_read(res / "fused.csv", rf._csv)
    poses = rf.cached_read(res / "poses.csv", rf._csv) if (res / "poses.csv").is_file() else None
    facts(localisations=len(fused), particles=fused["particle"].nunique() if "particle" in fused else "?")
    pts = fused if len(fused) <= 20_000 else fused.sample(20_000, random_state=0)
    chart = alt.Chart(pts, title="fused particle").mark_circle(size=6, opacity=0.5).encode(
        x=alt.X("x:Q", title="x (nm)", scale=alt.Scale(zero=False)),
        y=alt.Y("y:Q", title="y (nm)", scale=alt.Scale(zero=False)),
        color=alt.Color("particle:N", legend=None) if "particle" in pts else alt.value("#1f77b4"),
        tooltip=[c for c in ("particle", "x", "y") if c in pts]).properties(width=520, height=520)
    st.altair_chart(chart, width="content")
    export_buttons("fused-particle", chart, fused, key="fused")
    if poses is not None:
        st.markdown("poses (rotation and shift of each particle into the common frame)")
        st.dataframe(poses, hide_index=True)


# --------------------------------------------------------------------------- align


BLAST = ["qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend", "sstart",
         "send", "evalue", "bitscore", "score", "rank"]


def view_hits(res: Path) -> None:
    hits = rf.cached_read(res / "hits.parquet", rf._parquet)
    summ = rf.cached_read(res / "align_summary.json", rf._json) if (res / "align_summary.json").is_file() else {}
    facts(hits=len(hits), queries=hits["qseqid"].nunique() if "qseqid" in hits else "?",
          top_k=(summ or {}).get("top_k", "?"), evalue_cutoff=(summ or {}).get("evalue_cutoff"))
    c1, c2 = st.columns([2, 1])
    q = c1.text_input("search query or subject", key="hits_search")
    max_e = c2.number_input("E-value at most", value=float(hits["evalue"].max()) if len(hits) else 1.0,
                            format="%.3g", key="hits_evalue")
    cols = [c for c in BLAST if c in hits.columns]
    sel = hits[hits["evalue"] <= max_e] if "evalue" in hits else hits
    if q:
        t = q.lower()
        sel = sel[sel["qseqid"].astype(str).str.lower().str.contains(t, regex=False)
                  | sel["sseqid"].astype(str).str.lower().str.contains(t, regex=False)]
    st.markdown(f"`hits shown: {len(sel)}`")
    if len(sel):
        row = sel.iloc[0]
        st.markdown("`first row: " + ", ".join(f"{c}={row[c]}" for c in ("qseqid", "sseqid", "evalue", "bitscore")
                                                 if c in sel.columns) + "`")
    st.dataframe(sel[cols], hide_index=True, width="stretch", key="hits_df")
    if "evalue" in hits and len(hits):
        e = hits["evalue"].clip(lower=1e-300)
        log_e = np.log10(e.to_numpy(float))
        counts, edges = np.histogram(log_e, bins=30)
        hist = pd.DataFrame({"lo": edges[:-1], "hi": edges[1:], "hits": counts})
        chart = alt.Chart(hist, title="E-values of the hits").mark_bar().encode(
            x=alt.X("lo:Q", bin="binned", title="log10 E-value"), x2="hi:Q", y="hits:Q",
            tooltip=["lo", "hi", "hits"]).properties(width=520, height=180)
        st.altair_chart(chart, width="content")
        export_buttons("evalues", chart, sel[cols], key="hits")
    if (res / "orthologs.tsv").is_file():
        orth = rf.cached_read(res / "orthologs.tsv", rf._csv)
        st.markdown(f"`orthologs (reciprocal best hits): {len(orth)}`")
        st.dataframe(orth, hide_index=True)


# --------------------------------------------------------------------------- pipelines


def view_cutflow(run_dir: Path) -> None:
    got = rf.cutflow(run_dir)
    if got is not None:
        df, totals = got
        facts(records_in=totals.get("records_in"), selected=totals.get("records_selected"),
              weight_selected=("—" if totals.get("weight_selected") is None
                               else f"{totals['weight_selected']:.6g}"), operators=len(df))
        if not df.empty:
            show = df[[c for c in ("op", "kind", "records_in", "passed", "pass_rate", "cost_s") if c in df]]
            st.dataframe(show, hide_index=True, width="stretch")
            chart = alt.Chart(df, title="cutflow: records passed per operator (written order)").mark_bar().encode(
                x=alt.X("passed:Q", title="records passed"), y=alt.Y("op:N", sort=list(df["op"]), title=None),
                tooltip=["op", "records_in", "passed", alt.Tooltip("pass_rate:Q", format=".3f")],
            ).properties(width=520, height=22 * len(df) + 20)
            st.altair_chart(chart, width="content")
            export_buttons("cutflow", chart, show, key="cutflow")
    for name, h in rf.histograms(run_dir).items():
        hd = rf.histogram_frame(h)
        st.markdown(f"`histogram {name}: entries {h.get('entries')} · sum of weights {hd['count'].sum():.6g}`")
        chart = alt.Chart(hd, title=f"{name} ({h.get('column')}"
                          + (f", weighted by {h['weight']})" if h.get("weight") else ")")).mark_bar().encode(
            x=alt.X("lo:Q", bin="binned", title=name), x2="hi:Q", y=alt.Y("count:Q", title="weighted count"),
            tooltip=["lo", "hi", "count", "error"]).properties(width=520, height=180)
        st.altair_chart(chart, width="content")
        export_buttons(f"hist-{name}", chart, hd, key=f"hist-{name}")


# --------------------------------------------------------------------------- farms


def view_streams(run_dir: Path) -> None:
    df = rf.farm_streams(run_dir)
    if df is None:
        st.info("units.json not written yet")
        return
    a = df.attrs
    facts(units=a.get("units"), tool_runs=a.get("tool_runs"), units_ok=a.get("units_ok"),
          units_failed=a.get("units_never_ok"), streams=len(df))
    st.dataframe(df, hide_index=True, width="stretch")
    export_buttons("streams", None, df, key="streams")
    st.caption("a stream's output in input order: `pairflow gather RUN_DIR STREAM`")
