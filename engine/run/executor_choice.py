"""In-process or Ray: the one rule every engine (all-pairs, tool farms, filter pipelines) follows.

Starting Ray costs seconds; a small run computes in a fraction of one. So each engine measures
its work before it dispatches any (all-pairs: the probe's parse and compare times; a farm: the
tool on its first units; a pipeline: a sample of its first batch through every operator), turns
it into seconds of work per CPU, and asks ``choose``. ``executor="inprocess"`` or ``"ray"``
forces one; ``"auto"`` runs in-process when no cluster is named, no Ray is up in this process
and the estimate is at most ``max_s`` (``INPROCESS_MAX_S`` unless the run says otherwise); no
estimate (the work's size unknown) means Ray, where a large run belongs. Where the in-process
executor already uses every core (``parallel_here``: a farm's tools are child processes run from
threads), Ray on one machine brings nothing but its start-up, so ``"auto"`` stays in-process
whatever the estimate unless a cluster is named or Ray is up.
"""
from __future__ import annotations

import sys

from ..errors import PairflowError

EXECUTORS = ("auto", "inprocess", "ray")
INPROCESS_MAX_S = 20.0  # seconds of estimated work per CPU up to which a run stays in-process


def ray_is_up() -> bool:
    """True when this process has a Ray session; never imports Ray to find out."""
    ray = sys.modules.get("ray")
    # a thread may be importing Ray right now (a session starts it in the background): a
    # module half imported is not a session yet
    is_initialized = getattr(ray, "is_initialized", None)
    return is_initialized is not None and is_initialized()


def choose(executor: str, ray_address: str | None, estimate_s: float | None,
           max_s: float = INPROCESS_MAX_S, ray_up: bool = False,
           parallel_here: bool = False) -> str:
    """``"inprocess"`` or ``"ray"`` (the rule; see the module docstring). Pure: whether Ray
    is up in this process (``ray_is_up()``) is the caller's to say (``ray_up``)."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, not {executor!r}")
    if executor != "auto":
        if executor == "inprocess" and ray_address:
            raise PairflowError(f"executor=inprocess runs without Ray, but a cluster is named "
                                f"(ray_address={ray_address!r})")
        return executor
    if ray_address or ray_up:
        return "ray"
    if parallel_here:
        return "inprocess"
    if estimate_s is None:
        return "ray"
    return "inprocess" if estimate_s <= max_s else "ray"
