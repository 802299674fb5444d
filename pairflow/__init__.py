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
from . import engine as _engine
from .engine import __all__ as _ENGINE_ALL

# The names the engine's face defines at import (classes, spaces, sinks, errors); the others
# (allpairs, session, Pipeline, farm ...) stay lazy, as they are there: a star import would
# fetch every one of them, and their modules, at ``import pairflow``.
globals().update({_name: getattr(_engine, _name) for _name in _ENGINE_ALL
                  if _name in vars(_engine)})

__all__ = list(_ENGINE_ALL) + ["__version__"]


def __getattr__(name):
    """The lazy names of ``pairflow.engine`` (``allpairs``, ``session``, ``Pipeline``, ``farm``
    ...): importing them waits until first use, so ``import pairflow`` stays cheap."""
    if name in _ENGINE_ALL:
        return getattr(_engine, name)
    if name == "__version__":  # read on first use: importlib.metadata costs ~20 ms an import
        from importlib import metadata
        try:
            version = metadata.version("pairflow")
        except metadata.PackageNotFoundError:  # a checkout that was never installed
            version = "0+unknown"
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module 'pairflow' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
