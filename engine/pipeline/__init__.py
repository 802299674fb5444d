"""Filter pipelines: record batches through maps and filters, reordered by measured cost.

The public names are re-exported here; ``engine`` re-exports them again.
"""
from .core import (ArraySource, Batch, DaskSource, Filter, Histogram, Map, PairSource,
                   ParquetSink, Pipeline, PipelineConfig, PipelineResult, PipelineSink, Source,
                   as_source, prefilter)

__all__ = ["ArraySource", "Batch", "DaskSource", "Filter", "Histogram", "Map", "PairSource",
           "ParquetSink", "Pipeline", "PipelineConfig", "PipelineResult", "PipelineSink",
           "Source", "as_source", "prefilter"]
