"""Reading a run's result files other than the dense matrix, for the results view.

No Streamlit and nothing of pairflow: pandas/pyarrow for Parquet and CSV, Biopython for Newick.
What a view shows is chosen by what ``RUN_DIR/result/`` holds (docs/run-directory.md and each
app's docstring name the files):

* ``topk.parquet`` / ``topk_cols.parquet`` (query, target, qi, ti, score, rank) and
  ``edges.parquet`` (a, b, i, j, value); while the run writes, a threshold sink's finished
  tiles are already in ``edges.parquet.parts/`` (one ``.npy`` per tile) and are shown from there.
* ``tree.nwk`` (phylogeny).
* ``clusters.csv`` (forensics: image, camera) against a ``truth.csv`` (file, camera) found in
  ``result/``, the run directory, or beside the inputs ``config.yaml`` names (the data sets ship
  theirs there).
* ``fused.csv`` / ``poses.csv`` (microscopy), ``hits.parquet`` / ``orthologs.tsv`` /
  ``align_summary.json`` (align), ``cutflow.json`` and ``hist-NAME.json`` (pipelines),
  ``units.json`` + ``farm.jsonl`` + the journal's stream lines (farms).

Every reader returns None (or an empty frame) for a file that does not exist yet.
"""
from __future__ import annotations

import glob
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


def result_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "result"


def _sig(path: Path):
    try:
        st = path.stat()
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        return None


_CACHE: dict = {}


def cached_read(path: Path, reader):
    """``reader(path)``, re-read only when the file changes (inode, mtime, size)."""
    sig = _sig(path)
    if sig is None:
        return None
    key = (str(path), reader.__name__)
    hit = _CACHE.get(key)
    if hit and hit[0] == sig:
        return hit[1]
    value = reader(path)
    _CACHE[key] = (sig, value)
    return value


def _parquet(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def _json(path: Path):
    return json.loads(path.read_text())


def _csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",")


# --------------------------------------------------------------------------- edges


def edge_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """{"top-k": ..., "top-k (columns)": ..., "threshold edges": ...} for what exists."""
    res = result_dir(run_dir)
    out = {}
    for label, name in (("top-k", "topk.parquet"), ("top-k (columns)", "topk_cols.parquet"),
                        ("threshold edges", "edges.parquet")):
        df = cached_read(res / name, _parquet)
        if df is not None:
            out[label] = df
    if "threshold edges" not in out:
        live = edges_from_parts(res / "edges.parquet.parts")
        if live is not None:
            out["threshold edges (finished tiles so far)"] = live
    return out


def edges_from_parts(parts: Path) -> pd.DataFrame | None:
    """A threshold sink's parts (one .npy per finished tile: i, j, value), concatenated."""
    if not parts.is_dir():
        return None
    frames = []
    for p in sorted(parts.glob("tile-*.npy")):
        try:
            a = np.load(p, allow_pickle=False)
        except (OSError, ValueError):
            continue  # being written (parts are renamed into place, so rarely)
        if a.dtype.names:
            frames.append(pd.DataFrame({k: a[k] for k in a.dtype.names}))
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).sort_values(["i", "j"]).reset_index(drop=True)


def pair_columns(df: pd.DataFrame) -> tuple[str, str, str]:
    """(first item, second item, score) column names of an edge table."""
    if {"query", "target", "score"} <= set(df.columns):
        return "query", "target", "score"
    if {"a", "b", "value"} <= set(df.columns):
        return "a", "b", "value"
    if {"i", "j", "value"} <= set(df.columns):
        return "i", "j", "value"
    raise ValueError(f"not an edge table: columns {list(df.columns)}")


def larger_is_better(df: pd.DataFrame) -> bool:
    """A top-k table ranks by score: rank 1 holding the larger scores means larger is better."""
    if "rank" not in df.columns or "score" not in df.columns or df.empty:
        return True
    first = df.loc[df["rank"] == df["rank"].min(), "score"].mean()
    rest = df.loc[df["rank"] != df["rank"].min(), "score"].mean()
    return not (pd.notna(rest) and first < rest)


# --------------------------------------------------------------------------- tree


@dataclass
class TreeLayout:
    """A rectangular drawing of a tree: one segment per branch (horizontal) and per internal
    node (vertical), one label per shown leaf; collapsed clades are one leaf each."""
    segments: pd.DataFrame  # x, x2, y, y2, kind ("branch" | "join")
    leaves: pd.DataFrame    # x, y, label, leaves (1, or the clade's size when collapsed), clade
    clades: pd.DataFrame    # clade id, label, leaves, depth (internal nodes one can collapse)
    n_leaves: int


def read_tree(path: Path):
    return cached_read(path, _newick)


def _newick(path: Path):
    from Bio import Phylo
    return Phylo.read(io.StringIO(path.read_text()), "newick")


def layout_tree(tree, collapsed: set[str] | frozenset = frozenset()) -> TreeLayout:
    """x = distance from the root (branch lengths; 1 where absent), y = leaf position."""
    segs, leaves, clades = [], [], []
    ids = {}
    for i, c in enumerate(tree.find_clades(order="preorder")):
        ids[id(c)] = f"c{i}"
    y_next = [0]

    def name(c) -> str:
        terms = c.get_terminals()
        first, last = terms[0].name or "?", terms[-1].name or "?"
        return f"{first} … {last} ({len(terms)})"

    def walk(c, x0: float, depth: int) -> float:
        bl = c.branch_length if c.branch_length is not None else (0.0 if depth == 0 else 1.0)
        x = x0 + bl
        cid = ids[id(c)]
        if not c.is_terminal():
            clades.append({"clade": cid, "label": name(c), "leaves": c.count_terminals(),
                           "depth": depth})
        if c.is_terminal() or cid in collapsed:
            y = float(y_next[0])
            y_next[0] += 1
            n = c.count_terminals()
            leaves.append({"x": x, "y": y, "label": c.name if c.is_terminal() else "▸ " + name(c),
                           "leaves": n, "clade": cid})
        else:
            ys = [walk(k, x, depth + 1) for k in c.clades]
            y = (min(ys) + max(ys)) / 2.0
            segs.append({"x": x, "x2": x, "y": min(ys), "y2": max(ys), "kind": "join"})
        segs.append({"x": x0, "x2": x, "y": y, "y2": y, "kind": "branch"})
        return y

    walk(tree.root, 0.0, 0)
    return TreeLayout(pd.DataFrame(segs), pd.DataFrame(leaves), pd.DataFrame(clades),
                      tree.count_terminals())


# --------------------------------------------------------------------------- apps


def config_inputs(run_dir: Path) -> list[str]:
    """The input paths ``config.yaml`` names (``data.inputs``), as written there."""
    import yaml
    try:
        cfg = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    inputs = (cfg.get("data") or {}).get("inputs") if isinstance(cfg, dict) else None
    if isinstance(inputs, str):
        inputs = [inputs]
    return [str(x) for x in inputs or []]


def find_truth(run_dir: Path) -> Path | None:
    for p in (result_dir(run_dir) / "truth.csv", Path(run_dir) / "truth.csv"):
        if p.is_file():
            return p
    for pattern in config_inputs(run_dir):
        for d in {os.path.dirname(p) for p in glob.glob(pattern)} or {os.path.dirname(pattern)}:
            t = Path(os.path.normpath(Path(d) / "truth.csv"))
            if t.is_file():
                return t
    return None


def clusters_vs_truth(clusters: pd.DataFrame, truth: pd.DataFrame) -> dict:
    """Contingency of found clusters against true labels, and the adjusted Rand index."""
    c = clusters.rename(columns={clusters.columns[0]: "item", clusters.columns[1]: "cluster"})
    t = truth.rename(columns={truth.columns[0]: "item", truth.columns[1]: "truth"})
    t["item"] = t["item"].astype(str).map(lambda s: os.path.splitext(os.path.basename(s))[0])
    c["item"] = c["item"].astype(str).map(lambda s: os.path.splitext(os.path.basename(s))[0])
    m = c.merge(t, on="item", how="inner")
    table = pd.crosstab(m["cluster"], m["truth"])
    return {"matched": m, "table": table, "ari": adjusted_rand(table.to_numpy()),
            "clusters": int(c["cluster"].nunique()), "truths": int(t["truth"].nunique())}


def adjusted_rand(table: np.ndarray) -> float | None:
    """Hubert and Arabie's adjusted Rand index of a contingency table."""
    comb2 = lambda x: x * (x - 1) / 2.0  # noqa: E731
    n = table.sum()
    if n < 2:
        return None
    index = comb2(table).sum()
    a, b = comb2(table.sum(axis=1)).sum(), comb2(table.sum(axis=0)).sum()
    expected = a * b / comb2(n)
    top = (a + b) / 2.0
    return 1.0 if top == expected else float((index - expected) / (top - expected))


def histograms(run_dir: Path) -> dict[str, dict]:
    """hist-NAME.json of a pipeline's histogram sinks: {NAME: {edges, counts, sumw2, ...}}."""
    out = {}
    for p in sorted(result_dir(run_dir).glob("hist-*.json")):
        h = cached_read(p, _json)
        if isinstance(h, dict) and "edges" in h and "counts" in h:
            out[h.get("name") or p.stem[5:]] = h
    return out


def histogram_frame(h: dict) -> pd.DataFrame:
    e = np.asarray(h["edges"], float)
    return pd.DataFrame({"lo": e[:-1], "hi": e[1:], "count": np.asarray(h["counts"], float),
                         "error": np.sqrt(np.asarray(h.get("sumw2") or h["counts"], float))})


def cutflow(run_dir: Path) -> tuple[pd.DataFrame, dict] | None:
    d = cached_read(result_dir(run_dir) / "cutflow.json", _json)
    if not isinstance(d, dict):
        return None
    df = pd.DataFrame(d.get("ops") or [])
    if not df.empty:
        df["order"] = range(len(df))
    return df, d.get("totals") or {}


def farm_streams(run_dir: Path) -> pd.DataFrame | None:
    """Per stream of a farm: units with output / units, bytes, and units that failed (the
    journal's last line per unit and stream counts; farm.jsonl says which runs failed)."""
    units = cached_read(Path(run_dir) / "units.json", _json)
    if not isinstance(units, dict):
        return None
    total = len(units.get("units") or [])
    written: dict = {}
    for line in _lines(Path(run_dir) / "journal.jsonl"):
        if "sink" in line and "tile" in line:
            written.setdefault(line["sink"], {})[line["tile"]] = int(line.get("length") or 0)
    failed_units, runs = set(), 0
    ok_units = set()
    for line in _lines(Path(run_dir) / "farm.jsonl"):
        runs += 1
        (ok_units if line.get("ok") else failed_units).add(line.get("unit"))
    rows = [{"stream": s, "units with output": len(u), "units": total, "bytes": sum(u.values())}
            for s, u in sorted(written.items())]
    for s in units.get("streams") or []:
        if s not in written:
            rows.append({"stream": s, "units with output": 0, "units": total, "bytes": 0})
    df = pd.DataFrame(rows)
    df.attrs.update(units=total, tool_runs=runs, units_ok=len(ok_units),
                    units_never_ok=len(failed_units - ok_units))
    return df


def _lines(path: Path) -> list[dict]:
    out = []
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue  # a partial last line
                if isinstance(rec, dict):
                    out.append(rec)
    except OSError:
        pass
    return out
