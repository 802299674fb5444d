"""pairflow: a dataflow engine on Ray for data-intensive science.

Compare everything with everything (``pairflow.allpairs``), push events through a pipeline of
filters (``pairflow.Pipeline``, ``Map``, ``Filter``), or run an unmodified tool over every unit
of a big input (``pairflow.farm``, ``gather``), on a laptop or a Ray cluster::

    import pairflow
    run = pairflow.allpairs(keys, load=load, compare=compare, sinks=["dense"])
    res = run.result()

The names here are the engine's public face (``pairflow.engine``); the apps (``pairflow.apps``),
kernels, operators and the dashboard are subpackages. Nothing here imports Ray: a run starts it.
"""
from importlib import metadata as _metadata

from .engine import *  # noqa: F401,F403  (the eager names; Ray is not imported)
from .engine import __all__ as _ENGINE_ALL

try:
    __version__ = _metadata.version("pairflow")
except _metadata.PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"

__all__ = list(_ENGINE_ALL) + ["__version__"]


def __getattr__(name):
    """The lazy names of ``pairflow.engine`` (``allpairs``, ``session``, ``Pipeline``, ``farm``
    ...): importing them waits until first use, so ``import pairflow`` stays cheap."""
    if name in _ENGINE_ALL:
        from . import engine
        return getattr(engine, name)
    raise AttributeError(f"module 'pairflow' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
