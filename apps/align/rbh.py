"""The hit sinks and reciprocal best hits (``mode=rbh``): a second ``TopK(1, per="col")`` sink
keeps each target's best query in the same pass, and pairs that are each other's rank-1 hit are
orthologs.

Why together: which sinks a run needs is decided by the mode, and the pairing reads exactly what
those sinks wrote (all-vs-all's top-k already has both directions).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import AlignApp


def hit_sinks(app: AlignApp) -> list:
    """The k best targets per query; for ``mode=rbh`` of two sets also the best query per
    target (all-vs-all's top-k already has both directions)."""
    from pairflow.engine import TopK
    sinks = [TopK(app.top_k, field="score")]
    if app.mode == "rbh" and not app.all_vs_all:
        sinks.append(TopK(1, field="score", per="col"))
    return sinks


def reciprocal_best_hits(rows, cols, order: dict | None = None) -> list[tuple[str, str]]:
    """Pairs (query, target) where each is the other's best hit: rank 1 of ``rows`` (per query)
    and rank 1 of ``cols`` (per target, its ``query`` column the target), scores above zero.

    Ranks carry the tie rule (score, then the shorter partner, then input order), so each
    sequence has exactly one best hit. With one table for both sides (all-vs-all, ``order`` the
    input order) each mutual pair is reported once, the query first in input order."""
    best_row = {q: t for q, t, s, r in zip(rows["query"], rows["target"], rows["score"],
                                            rows["rank"]) if r == 1 and s > 0}
    best_col = {c: q for c, q, s, r in zip(cols["query"], cols["target"], cols["score"],
                                            cols["rank"]) if r == 1 and s > 0}
    pairs = [(q, t) for q, t in best_row.items() if best_col.get(t) == q]
    if order is not None:
        pairs = [(q, t) for q, t in pairs if order[q] < order[t]]
    return pairs
