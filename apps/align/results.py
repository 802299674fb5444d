"""The align run's results: E-values and the cut-off, tracebacks of the hits kept, reciprocal
best hits, then the output files.

Why one straight pass (``finish``): trace, validate, tabulate, write and summarise each feed the
next and none is used alone, so splitting it would only pass the same dozen values around.

Outputs (``result/`` of the run directory): ``hits.tsv`` (a header row, then BLAST's tabular
columns ``qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore``
plus ``score cigar``), ``hits.parquet`` (the same plus keys, ranks, lengths and aligned
strings), ``orthologs.tsv`` for ``mode=rbh``, ``align_summary.json``, and the engine's
``topk.parquet`` (and ``topk_cols.parquet``).
"""
from __future__ import annotations

import dataclasses
import os
import re
import time
from typing import TYPE_CHECKING

import numpy as np

from pairflow.engine import PairflowError, write_json
from pairflow.kernels.smith_waterman import Alignment

from .evalues import statistics
from .rbh import reciprocal_best_hits
from .settings import TIE_RULE
from .tracebacks import trace_hits

if TYPE_CHECKING:
    from .app import AlignApp

# BLAST's tabular columns (-outfmt 6's default twelve), then the raw score and the CIGAR
TSV_COLUMNS = ["qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend",
               "sstart", "send", "evalue", "bitscore", "score", "cigar"]
ORTHOLOG_COLUMNS = ["qseqid", "sseqid", "score", "evalue", "bitscore", "pident", "length",
                    "qstart", "qend", "sstart", "send", "cigar"]


def finish(app: AlignApp, result, validate_hits: int = 0, seed: int = 0):
    """E-values, the cut-off, tracebacks for the hits kept, reciprocal best hits, then hits.tsv,
    hits.parquet (orthologs.tsv) and align_summary.json in the run's ``result/`` directory.
    Returns the hits as a DataFrame (also ``result.hits``)."""
    import pandas as pd
    t0 = time.time()
    top_all = pd.read_parquet(result.outputs["topk"])
    # statistics need only scores and lengths: the cut-off comes before any traceback
    evalues, bits = statistics(app, top_all["score"].to_numpy(np.int64),
                               np.array([app.lengths[k] for k in top_all["query"]], np.int64),
                               np.array([app.lengths[k] for k in top_all["target"]], np.int64))
    keep = evalues <= app.evalue if app.evalue is not None else np.ones(len(top_all), bool)
    top = top_all[keep].reset_index(drop=True)
    evalues, bits = evalues[keep], bits[keep]
    keys = set(top["query"]) | set(top["target"])
    seqs = app.sequences(sorted(keys))
    jobs = [(seqs[q], seqs[t], int(s)) for q, t, s in zip(top["query"], top["target"],
                                                          top["score"])]
    alns = trace_hits(jobs, app.scoring)
    trace_s = time.time() - t0
    checked = 0
    if validate_hits and len(jobs):
        from pairflow.kernels.smith_waterman import sw_reference
        rng = np.random.default_rng(seed)
        for i in rng.choice(len(jobs), min(int(validate_hits), len(jobs)), replace=False):
            q, t, s = jobs[int(i)]
            ref = sw_reference(q, t, app.scoring, validate=False)
            if ref != s:
                raise PairflowError(f"validation failed: {top['query'].iloc[i]} x "
                                    f"{top['target'].iloc[i]} scored {s} in the run but {ref} "
                                    f"by the numpy reference")
            checked += 1
    # the report's order (queries as input, then rank) first, and every column built in it: a
    # sort of the finished table took each arrow string column again (0.03 s for 2,000 hits)
    qkeys, tkeys = top["query"].tolist(), top["target"].tolist()
    rank = top["rank"].to_numpy(np.int64)
    order = app.query_order
    perm = np.lexsort((rank, np.array([order.get(k, len(order)) for k in qkeys], np.int64)))
    pick = perm.tolist()
    qkeys, tkeys, alns = [qkeys[i] for i in pick], [tkeys[i] for i in pick], [alns[i] for i in pick]
    a = {f.name: [r[f.name] for r in alns] for f in dataclasses.fields(Alignment)}
    names = {k: app.record_name(k) for k in set(qkeys) | set(tkeys)}
    counts = [cigar_counts(c) for c in a["cigar"]]
    hits = pd.DataFrame({
        "qseqid": [names[k] for k in qkeys],
        "sseqid": [names[k] for k in tkeys],
        "pident": np.round(100.0 * np.array(a["identity"], np.float64), 3),
        "length": np.array(a["length"], np.int64),
        "mismatch": np.array([c[0] for c in counts], dtype=np.int64),
        "gapopen": np.array([c[1] for c in counts], dtype=np.int64),
        "qstart": np.array(a["qstart"], np.int64), "qend": np.array(a["qend"], np.int64),
        "sstart": np.array(a["sstart"], np.int64), "send": np.array(a["send"], np.int64),
        "evalue": evalues[perm], "bitscore": bits[perm],
        "score": top["score"].to_numpy(np.int64)[perm],
        "cigar": pd.Series(a["cigar"], dtype=str),
        "rank": rank[perm],
        "query": pd.Series(qkeys, dtype=str), "target": pd.Series(tkeys, dtype=str),
        "qlen": np.array([app.lengths[k] for k in qkeys], dtype=np.int64),
        "slen": np.array([app.lengths[k] for k in tkeys], dtype=np.int64),
        "matches": np.array(a["matches"], np.int64),
        "query_aligned": pd.Series(a["query_aligned"], dtype=str),
        "target_aligned": pd.Series(a["target_aligned"], dtype=str),
    })

    out_dir = os.path.dirname(result.outputs["topk"])
    outputs = {}
    orthologs = None
    if app.mode == "rbh":
        # best hits from the whole top-k (the cut-off does not change who is best); the merge
        # with the hits kept applies the cut-off to the pairs
        cols = top_all if app.all_vs_all else pd.read_parquet(result.outputs["topk_cols"])
        pairs = reciprocal_best_hits(top_all, cols,
                                     app.query_order if app.all_vs_all else None)
        key = pd.DataFrame(pairs, columns=["query", "target"])
        orthologs = hits[hits["rank"] == 1].merge(key, on=["query", "target"])
        orthologs = orthologs.reset_index(drop=True)
        path = os.path.join(out_dir, "orthologs.tsv")
        _write_tsv(orthologs[ORTHOLOG_COLUMNS], path)
        outputs["orthologs"] = path
        outputs["topk_cols"] = result.outputs.get("topk_cols")
    hits_before_evalue = len(top_all)

    tsv, parquet = os.path.join(out_dir, "hits.tsv"), os.path.join(out_dir, "hits.parquet")
    _write_tsv(hits[TSV_COLUMNS], tsv)
    hits.to_parquet(parquet + ".tmp", index=False)
    os.replace(parquet + ".tmp", parquet)

    s = result.summary
    cells = app.cells()
    compute_s = float(s.get("compute_s") or s["wall_s"])
    stats = ({"method": app.evalue_method, **app.karlin.describe(),
              "db_length": app.db_length, "db_sequences": app.db_sequences}
             if app.karlin is not None else {"method": None, "why": app.karlin_missing})
    summary = {
        "queries": len(app.row_keys()), "targets": len(app.col_keys()),
        "all_vs_all": app.all_vs_all, "pairs": int(app.space().total),
        "pairs_before_filters": int(getattr(app, "pairs_before_filters", app.space().total)),
        "filters": app.filter_report, "filter_orders": app.filter_orders,
        "cells": cells, "compute_s": compute_s,
        "cells_per_s": cells / compute_s if compute_s > 0 else None,
        "wall_s": float(s["wall_s"]), "tiles": s["tiles_total"], "leaf_items": s["leaf_items"],
        "max_tile_cells": s.get("measured", {}).get("max_weight"),
        "probe_cells_per_s": s.get("measured", {}).get("weight_per_s"),
        "top_k": app.top_k, "hits": len(hits), "tie_rule": TIE_RULE,
        "kernel": app.kernel, "mode": app.mode, "evalue_cutoff": app.evalue,
        "hits_before_evalue": hits_before_evalue,
        "statistics": stats,
        "orthologs": None if orthologs is None else len(orthologs),
        "scoring": {"matrix": app.scoring.matrix, "gap_open": app.scoring.gap_open,
                    "gap_extend": app.scoring.gap_extend,
                    "convention": app.scoring.convention},
        "alphabet": app.alphabet, "traceback_s": trace_s, "validated_hits": checked,
        "outputs": {"tsv": tsv, "parquet": parquet, "topk": result.outputs["topk"], **outputs},
    }
    write_json(os.path.join(out_dir, "align_summary.json"), summary)
    result.hits, result.align, result.orthologs = hits, summary, orthologs
    return hits


def cigar_counts(cigar: str) -> tuple[int, int]:
    """(mismatches, gap openings) of an extended CIGAR: the letters of its ``X`` runs, and its
    ``I``/``D`` runs (BLAST counts a gap in one sequence followed by one in the other as two)."""
    return sum(map(int, _X_RUNS.findall(cigar))), cigar.count("I") + cigar.count("D")


_X_RUNS = re.compile(r"(\d+)X")


def _write_tsv(table, path: str) -> None:
    """A header row, then BLAST's formats: E-values with three significant digits, bit scores
    with one decimal."""
    out = table.copy()
    if "evalue" in out:
        out["evalue"] = [("" if np.isnan(e) else f"{e:.3g}") for e in out["evalue"]]
    if "bitscore" in out:
        out["bitscore"] = [("" if np.isnan(b) else f"{b:.1f}") for b in out["bitscore"]]
    out.to_csv(path + ".tmp", sep="\t", index=False)
    os.replace(path + ".tmp", path)
