"""Sinks: where a tile's result fields go. The contract every sink keeps (opened and finalized
in the driver, tiles written by the device actors, journal entries returned) is in
``sink_base.py``; this module names the sinks and makes them from config entries.

* ``DenseMatrix`` (``sink_dense.py``): one zarr v3 array per field, in chunks of whole tiles
  sized for the reader (about 8 MiB); tiles are staged in a log per writer (``tile_log.py``)
  and moved into their chunks by the driver at the end. Readable with
  ``dask.array.from_zarr``.
* ``TopK(k)`` (``sink_parts.py``): the k best columns per row (and per column for symmetric
  spaces); ties go to the lower column index. Each tile writes its candidates as a part;
  ``finalize`` merges them into Parquet.
* ``Threshold(t)`` (``sink_parts.py``): an edge list of pairs with value >= t (or <= t), as
  Parquet.
"""
from __future__ import annotations

from ..run.registry import Registry
from .sink_base import Sink, SinkContext, ThresholdReduction, TileCandidates, TopKReduction
from .sink_dense import DenseMatrix
from .sink_parts import Threshold, TopK

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
