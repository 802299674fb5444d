"""Statistics of hits: E-values and bit scores from BLAST's Karlin-Altschul tables
(``pairflow.kernels.karlin``), the database being the target set.

Why apart: they need only scores and lengths, so the E-value cut-off is applied before any
traceback; the tables themselves live in the kernel.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pairflow.kernels import karlin

if TYPE_CHECKING:
    from .app import AlignApp


def statistics(app: AlignApp, scores, qlen, slen) -> tuple[np.ndarray, np.ndarray]:
    """E-values and bit scores of hits (NaN when BLAST has no parameters for the scoring).

    The database is the target set (the queries themselves when all-vs-all): its residues and
    sequence count, as blastp would see them after makeblastdb of the targets."""
    if app.karlin is None:
        nan = np.full(len(scores), np.nan)
        return nan, nan.copy()
    if app.evalue_method == "spouge":
        ev = karlin.evalues_spouge(scores, qlen, slen, app.db_length, app.karlin)
    else:
        ev = karlin.evalues_karlin(scores, qlen, app.db_length, app.db_sequences, app.karlin)
    return ev, karlin.bit_scores(scores, app.karlin)
