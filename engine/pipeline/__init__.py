"""Filter pipelines: record batches through maps and filters, reordered by measured cost.

    from pairflow.engine import Pipeline, Map, Filter
    from pairflow.operators.arrays import as_source
    from pairflow.operators.parquet import ParquetSink
    from pairflow.operators.histogram import Histogram
    p = Pipeline(as_source(data, batch_size=10_000),
                 [Map("pt", lambda b: np.hypot(b["px"], b["py"])),
                  Filter("hard", lambda b: b["pt"] > 20, after=["pt"]),
                  Filter("met", lambda b: b["met"] > 30)],
                 sinks=[ParquetSink(), Histogram("pt", "pt", bins=50, range=(0, 200))])
    result = p.run()           # on Ray; p.run(executor="local") runs in this process
    result.cutflow, result.to_pandas(), result.to_dask()

The modules, each one concept: ``batch`` (Batch), ``protocol`` (Map, Filter, Source,
PipelineSink: what ``operators/`` implement), ``measure`` (operator statistics, the sample rule),
``ordering`` (the order policy, the DS/DP balancer, the back-off both re-examine by),
``processor`` (one batch through the operators), ``run`` (Pipeline, PipelineConfig, the run's
lifecycle), ``record`` (the run directory and the progress line), ``result``
(PipelineResult), ``local`` and ``ray_executor`` (the executors; only the latter imports Ray)
and ``prefilter`` (pair filters in front of an all-pairs run). See docs/pipelines.md.
"""
from .batch import Batch
from .prefilter import PairSource, prefilter
from .protocol import Filter, Map, Op, PipelineSink, Source
from .result import PipelineResult
from .run import Pipeline, PipelineConfig

__all__ = ["Batch", "Filter", "Map", "Op", "PairSource", "Pipeline", "PipelineConfig",
           "PipelineResult", "PipelineSink", "Source", "prefilter"]
