"""pairflow's engine: pair spaces, caches, scheduling, sinks and runs on Ray.

The Python API lives here: ``from engine import allpairs, Triangle, Rectangle, PairList``.
"""
from .app import BasePairApp, FunctionApp, PairApp
from .errors import InputError, PairflowError
from .space import PairList, Rectangle, Tile, Triangle, leaves, quadtree
from .sinks import DenseMatrix, Threshold, TopK

__all__ = ["allpairs", "AllPairsConfig", "BasePairApp", "FunctionApp", "PairApp", "InputError",
           "PairflowError", "PairList", "Rectangle", "Tile", "Triangle", "leaves", "quadtree",
           "DenseMatrix", "Threshold", "TopK"]


def __getattr__(name):  # Ray is imported only when a run is started
    if name in ("allpairs", "AllPairsConfig", "RunHandle", "AllPairsResult"):
        import importlib
        return getattr(importlib.import_module(".driver", __name__), name)
    raise AttributeError(name)
