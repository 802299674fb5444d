"""The align app's CLI hooks (``pairflow app=align``), as
``pairflow.apps.protocol.AllPairsAppModule`` declares them: ``build`` the app and its sinks from
the Hydra config, ``watch`` (from ``progress``), ``after`` the run, and ``report``.

Why apart: they translate the Hydra config into the same calls ``align()`` makes.
"""
from __future__ import annotations

import os

from pairflow.engine import read_json

from .app import AlignApp
from .progress import _si
from .rbh import hit_sinks
from .results import finish


def _urls(value) -> list[str] | None:
    from pairflow.apps.data import expand_inputs
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        value = [str(v) for v in value]
    return expand_inputs(value)


def build(cfg):
    """The app and its sinks from the Hydra config (``app=align``)."""
    from pairflow.engine import DenseMatrix, Threshold
    a, d = cfg.align, cfg.data
    sink_cfg = dict(cfg.sink)
    kind = sink_cfg.pop("type", "topk")
    if kind not in ("topk", "dense", "threshold"):
        raise ValueError(f"unknown sink {kind!r} for app=align: choose topk, dense or threshold")
    weighted = bool(a.get("capacity_tiles", True)) and kind != "dense"
    # the hits are the top-k sink: sink.k (align.top_k unless set on its own) is their k
    top_k = sink_cfg["k"] if kind == "topk" and sink_cfg.get("k") is not None else a.top_k
    app = AlignApp(_urls(d.queries) or [], _urls(d.get("targets")), top_k=top_k,
                   matrix=a.get("matrix"), gap_open=a.gap_open, gap_extend=a.gap_extend,
                   convention=str(a.get("convention", "standard")),
                   alphabet=str(a.get("alphabet", "auto")),
                   min_length_ratio=a.get("min_length_ratio"),
                   min_shared_kmers=a.get("min_shared_kmers"), kmer=a.get("kmer"),
                   weighted=weighted, fmt=str(a.get("format", "auto")),
                   evalue=a.get("evalue"), evalue_method=str(a.get("evalue_method", "spouge")),
                   mode=str(a.get("mode", "topk")), kernel=str(a.get("kernel", "auto")),
                   prefilter_options={"runs_root": str(cfg.runs_root)})
    sinks = hit_sinks(app)
    if kind == "dense":  # every score as a matrix (tiles on the chunk grid: no weighting)
        sinks.append(DenseMatrix(fields=["score"], fill=-1))
    elif kind == "threshold":
        sinks.append(Threshold(float(sink_cfg.get("t", 0)), field="score"))
    return app, sinks


def after(app: AlignApp, result, cfg) -> None:
    """After the run: tracebacks for the hits and the output files."""
    finish(app, result, validate_hits=int(cfg.align.get("validate_hits", 0) or 0))


def report(result) -> str:
    s = result.summary
    al = getattr(result, "align", None) or read_json(
        os.path.join(result.run_dir, "result", "align_summary.json"), {})
    sc = al.get("scoring", {})
    kind = "all-vs-all" if al.get("all_vs_all") else "queries x targets"
    lines = [f"app=align {kind}: {al.get('queries')} queries x {al.get('targets')} targets, "
             f"pairs={al.get('pairs')} tiles={s['tiles_total']}",
             f"scoring {sc.get('matrix')} {sc.get('gap_open')}/{sc.get('gap_extend')} "
             f"({sc.get('convention')}), alphabet {al.get('alphabet')}, top_k={al.get('top_k')}",
             f"cells {al.get('cells', 0):,} in {al.get('compute_s', 0):.2f} s of compute: "
             f"{_si(al.get('cells_per_s') or 0)}cells/s (wall {s['wall_s']:.2f} s, "
             f"tracebacks {al.get('traceback_s', 0):.2f} s)"]
    if al.get("filters"):
        lines.append("pair filters, in the order the measurements chose: "
                     + " > ".join(f["name"] for f in al["filters"]))
    for f in al.get("filters") or []:
        lines.append(f"filter {f['name']}: {f['pairs_out']}/{f['pairs_in']} pairs pass "
                     f"({f['seconds']:.3f} s)")
    st = al.get("statistics") or {}
    if st.get("method"):
        lines.append(f"E-values ({st['method']}): lambda={st['lambda']} K={st['K']} against "
                     f"{st['db_sequences']} targets, {st['db_length']:,} residues"
                     + (f"; cut-off E <= {al['evalue_cutoff']:g} kept {al.get('hits')} of "
                        f"{al.get('hits_before_evalue')}" if al.get("evalue_cutoff") else ""))
    elif st.get("why"):
        lines.append(f"no E-values: {st['why']}")
    lines.append(f"hits: {al.get('hits')}")
    if al.get("orthologs") is not None:
        lines.append(f"reciprocal best hits (ortholog pairs): {al['orthologs']}")
    for name, path in (al.get("outputs") or {}).items():
        lines.append(f"{name}: {path}")
    for name, path in s["outputs"].items():
        if name not in (al.get("outputs") or {}):
            lines.append(f"{name}: {path}")
    return "\n".join(lines)
