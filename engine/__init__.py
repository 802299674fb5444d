"""pairflow's engine: pair spaces, caches, scheduling, sinks and runs on Ray.

The Python API lives here, and the package's face ``pairflow`` gives the same names:
``from pairflow import allpairs, Triangle, Rectangle, PairList``, for filter pipelines
``from pairflow import Pipeline, Map, Filter``, for tool farms ``from pairflow import farm, gather``.
"""
import os as _os

# Before anything imports Ray: Ray reads this once, at import, and without it a local Ray's
# servers listen on every interface of the machine instead of 127.0.0.1 alone. Joining a
# cluster (``ray_address=``) is unaffected; set it to 1 yourself to start a multi-host head.
_os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
from .pairs.app import BasePairApp, FunctionApp, PackKey, PairApp, url_digest
from .errors import (InputError, PairflowError, WorkerError, elsewhere_traceback,
                     worker_traceback)
from .pairs.space import PairList, PairWeights, Rectangle, Tile, Triangle, leaves, quadtree
from .pairs.sinks import (DenseMatrix, Threshold, ThresholdReduction, TileCandidates, TopK,
                          TopKReduction, make_sink)

__all__ = ["allpairs", "AllPairsConfig", "BasePairApp", "FunctionApp", "PackKey", "PairApp",
           "InputError", "PairflowError", "WorkerError", "worker_traceback",
           "elsewhere_traceback", "url_digest",
           "PairList", "Rectangle", "Tile", "Triangle", "leaves",
           "quadtree",
           "DenseMatrix", "Threshold", "TopK", "TopKReduction", "ThresholdReduction",
           "TileCandidates", "Pipeline", "Map", "Filter", "Batch",
           "PairSource", "prefilter", "PairWeights", "make_sink", "fetch", "read_json",
           "write_json", "map_chunks", "RunDir", "farm", "FarmSpec", "gather", "Session",
           "session", "RUN_CONFIG", "RUN_META"]

_PIPELINE = ("Pipeline", "Map", "Filter", "Batch", "PairSource", "prefilter", "PipelineConfig",
             "PipelineResult", "Source")
# helpers the apps use, each from its one home (none of these modules imports Ray at import)
_HELPERS = {"fetch": ".run.io", "read_json": ".run.rundir", "write_json": ".run.rundir",
            "map_chunks": ".run.tasks", "RunDir": ".run.rundir",
            "farm": ".toolfarm.driver", "FarmResult": ".toolfarm.driver",
            "FarmSpec": ".toolfarm.spec", "gather": ".toolfarm.gather",
            "ItemCodec": ".pairs.codec",
            "import_in_background": ".run.runtime", "ray_is_up": ".run.executor_choice",
            # a run directory's files by name (module:attribute where the names differ)
            "RUN_CONFIG": ".run.rundir:CONFIG", "RUN_META": ".run.rundir:META"}


def __getattr__(name):  # Ray is imported only when a run is started
    if name in ("allpairs", "AllPairsConfig", "RunHandle", "AllPairsResult"):
        import importlib
        return getattr(importlib.import_module(".pairs.driver", __name__), name)
    if name in ("Session", "session"):  # Ray is started when a session opens
        from .pairs import session
        return getattr(session, name)
    if name in _HELPERS:
        import importlib
        module, _, attr = _HELPERS[name].partition(":")
        return getattr(importlib.import_module(module, __name__), attr or name)
    if name in _PIPELINE:
        import importlib
        return getattr(importlib.import_module(".pipeline", __name__), name)
    raise AttributeError(name)
