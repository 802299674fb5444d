"""Sinks: where a tile's result fields go. The package holds the contract every sink keeps
(``base``: opened and finalized in the driver, tiles written by the device actors, journal
entries returned); ``DenseMatrix`` (``dense``: one zarr v3 array per field in chunks of whole
tiles sized for the reader, about 8 MiB, staged in a log per writer, ``tile_log``, until the
driver moves them into their chunks; readable with ``dask.array.from_zarr``); ``TopK(k)`` and
``Threshold(t)`` (``parts``: a part per tile, merged into Parquet by ``finalize``, with the
compiled passes of ``topk_passes``); and the results of a run where nothing is shared, on
their way to the driver (``shipped``). This module names the sinks (``SINKS``) and makes them
from config entries (``make_sink``)."""
from __future__ import annotations

from ...run.registry import Registry
from .base import Sink, SinkContext, ThresholdReduction, TileCandidates, TopKReduction
from .dense import DenseMatrix
from .parts import Threshold, TopK

__all__ = ["Sink", "SinkContext", "TopKReduction", "ThresholdReduction", "TileCandidates",
           "DenseMatrix", "TopK", "Threshold", "SINKS", "make_sink"]

SINKS = Registry("sink", {"dense": DenseMatrix, "topk": TopK, "threshold": Threshold})


def make_sink(spec) -> Sink:
    """A sink from a config entry: 'dense', {'type': 'topk', 'k': 5}, or a Sink instance."""
    if isinstance(spec, Sink):
        return spec
    if isinstance(spec, str):
        spec = {"type": spec}
    spec = dict(spec)
    return SINKS.make(spec.pop("type"), **spec)
