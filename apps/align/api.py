"""``align()``: the Python form of ``pairflow app=align`` (run, trace the hits, write the
outputs).

Why apart from the CLI hooks: a notebook or a benchmark calls it with keyword arguments and
``pairflow.allpairs`` options, not with a Hydra config.
"""
from __future__ import annotations

from typing import Sequence

from .app import AlignApp
from .progress import watch
from .rbh import hit_sinks
from .results import finish
from .settings import TARGET_TILE_S


def align(queries, targets=None, *, top_k: int = 5, matrix: str | None = None,
          gap_open: int = 11, gap_extend: int = 1, convention: str = "standard",
          alphabet: str = "auto", min_length_ratio: float | None = None,
          min_shared_kmers: int | None = None, kmer: int | None = None, weighted: bool = True,
          evalue: float | None = None, evalue_method: str = "spouge", mode: str = "topk",
          kernel: str = "auto", extra_sinks: Sequence = (), validate_hits: int = 0, **options):
    """The Python form of ``pairflow app=align``: run, trace the hits, write the outputs.

    ``evalue`` keeps hits with E-value at most this; ``evalue_method`` is ``spouge`` (what blastp
    prints) or ``karlin``; ``mode="rbh"`` also finds reciprocal best hits (``.orthologs``);
    ``kernel`` is ``auto``, ``parasail`` or ``opal``. ``options`` are ``pairflow.allpairs``
    options (``run_dir``, ``runs_root``, ``leaf_items``, ``validate``, ``progress`` ...;
    ``target_tile_s`` defaults to 0.5 here). Returns the engine's result with ``.hits`` (a
    DataFrame), ``.align`` (the summary) and ``.orthologs`` (a DataFrame for ``mode="rbh"``,
    else None) attached.
    """
    from pairflow.engine import allpairs
    options.setdefault("target_tile_s", TARGET_TILE_S)
    app = AlignApp(queries, targets, top_k=top_k, matrix=matrix, gap_open=gap_open,
                   gap_extend=gap_extend, convention=convention, alphabet=alphabet,
                   min_length_ratio=min_length_ratio, min_shared_kmers=min_shared_kmers,
                   kmer=kmer, weighted=weighted, evalue=evalue, evalue_method=evalue_method,
                   mode=mode, kernel=kernel,
                   prefilter_options={"runs_root": options.get("runs_root", "runs")})
    sinks = hit_sinks(app) + list(extra_sinks)
    show = options.pop("progress", True)  # the cells/s display replaces the engine's bar
    handle = allpairs(app=app, sinks=sinks, progress=False, **options)
    stop = watch(handle.run_dir, app) if show else None
    try:
        result = handle.result()
    finally:
        if stop is not None:
            stop()
    finish(app, result, validate_hits=validate_hits)
    return result
