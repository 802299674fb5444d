"""Many-to-many Smith-Waterman: every query against every target, the k best hits per query,
tracebacks only for those hits (``pairflow app=align``, or ``align()`` from Python).

    pairflow app=align data.queries=q.fa data.targets=db.fa align.top_k=5 \\
        align.matrix=blosum62 align.gap_open=11 align.gap_extend=1

This package holds the align app, one concept a module: ``settings`` (option values, defaults,
the tie rule), ``filters`` (pair filters run before any cell), ``app`` (``AlignApp``, what the
engine calls; its docstring maps the app onto the engine), ``tracebacks`` (the alignments behind
the reported scores), ``evalues`` (bit scores and E-values), ``rbh`` (the hit sinks and
reciprocal best hits), ``results`` (``finish``: the hit table and the files of ``result/``),
``progress`` (the cells/s display), ``api`` (``align()``) and ``hooks`` (the CLI's ``build``,
``after`` and ``report``, per ``pairflow.apps.protocol.AllPairsAppModule``). docs/align.md has
the whole story. Everything others import is named here.
"""
from __future__ import annotations

from .api import align
from .app import AlignApp
from .evalues import statistics
from .filters import LengthRatioFilter, PairFilter, SharedKmerFilter
from .hooks import after, build, report
from .progress import watch
from .rbh import hit_sinks, reciprocal_best_hits
from .results import ORTHOLOG_COLUMNS, TSV_COLUMNS, cigar_counts, finish
from .settings import (ALPHABETS, DEFAULT_MATRIX, KERNELS, MODES, PAIR_BATCH, TARGET_TILE_S,
                       TIE_RULE)
from .tracebacks import (TRACE_DIRECT_CELLS, TRACE_FANOUT_CELLS, TRACE_MAX_CELLS, trace_hits,
                         traceback_hit)

__all__ = [
    # the CLI hooks (pairflow.apps.protocol.AllPairsAppModule)
    "build", "watch", "after", "report",
    # the Python API and the app
    "align", "AlignApp", "hit_sinks", "finish",
    # the parts
    "PairFilter", "LengthRatioFilter", "SharedKmerFilter",
    "traceback_hit", "trace_hits", "statistics", "cigar_counts", "reciprocal_best_hits",
    # settings
    "ALPHABETS", "MODES", "KERNELS", "DEFAULT_MATRIX", "TIE_RULE", "TSV_COLUMNS",
    "ORTHOLOG_COLUMNS", "TARGET_TILE_S", "PAIR_BATCH", "TRACE_DIRECT_CELLS", "TRACE_MAX_CELLS",
    "TRACE_FANOUT_CELLS",
]
