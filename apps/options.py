"""The Hydra config's engine groups as engine options: one place that knows which key of
``cluster``, ``cache`` and ``scheduler`` means what, for every app.

``runtime_options`` is what starting or joining Ray needs (the all-pairs engine, pipelines and
an app's side work take the same three keys); ``allpairs_options`` adds the all-pairs knobs and
refuses a key the engine does not know, so a typo in a config group cannot pass silently.
"""
from __future__ import annotations

RUNTIME_KEYS = ("ray_address", "num_cpus", "object_store_mb")


def _group(cfg, name: str) -> dict:
    from omegaconf import OmegaConf
    group = cfg.get(name)
    return dict(OmegaConf.to_container(group, resolve=True)) if group is not None else {}


def runtime_options(cfg) -> dict:
    """Ray's start or join options from the ``cluster`` group; a null keeps the engine's
    default, so it is left out."""
    cluster = _group(cfg, "cluster")
    return {k: cluster[k] for k in RUNTIME_KEYS if cluster.get(k) is not None}


def executor_options(cfg) -> dict:
    """In-process or Ray from the ``cluster`` group (``executor``, ``inprocess_max_s``): the
    keys and the rule all-pairs runs follow, for farms and pipelines; a null is left out."""
    cluster = _group(cfg, "cluster")
    return {k: cluster[k] for k in ("executor", "inprocess_max_s") if cluster.get(k) is not None}


def allpairs_options(cfg) -> dict:
    """Every ``pairflow.allpairs`` option the config sets: the ``cluster``, ``cache`` and
    ``scheduler`` groups and the run-wide keys (progress, resume, validate ...)."""
    from dataclasses import fields

    from pairflow.engine import AllPairsConfig, PairflowError
    known = {f.name for f in fields(AllPairsConfig)}
    options = {}
    for name in ("cluster", "cache", "scheduler"):
        for key, value in _group(cfg, name).items():
            if key not in known:
                raise PairflowError(f"unknown setting {name}.{key} in the config")
            options[key] = value
    options.update(progress=bool(cfg.progress), preflight=bool(cfg.preflight),
                   runs_root=str(cfg.runs_root), resume=bool(cfg.resume),
                   validate=float(cfg.validate), max_retries=int(cfg.max_retries),
                   seed=int(cfg.seed))
    if cfg.get("result_store"):
        options["result_store"] = str(cfg.result_store)
    return options


def check_sinks(app: str, sink_cfg, sinks: list) -> None:
    """Refuse, before any compute, a run whose app would not write the sink the ``sink`` group
    chose: one of ``sinks`` (what the app's ``build`` made) must be of that kind, with every
    setting of the group that its kind takes (``sink.k=5``: a top-k of 5). Without this, an
    app that wires a sink of its own ignored the choice without a word (``app=synthetic
    sink=topk`` wrote a dense matrix, n^2 cells nobody asked for)."""
    import inspect

    from pairflow.engine import PairflowError
    if not sink_cfg:
        return
    settings = dict(sink_cfg)
    kind = settings.pop("type", None)
    kinds = sorted({type(s).name for s in sinks})
    same = [s for s in sinks if type(s).name == kind]
    if not same:
        raise PairflowError(f"app={app} does not write sink={kind}: it writes "
                            f"{' and '.join(kinds) or 'no sink'} (choose sink="
                            f"{' or sink='.join(kinds) or '...'})")
    takes = inspect.signature(type(same[0])).parameters
    for key, value in settings.items():
        if key in takes and not any(_same(getattr(s, key, None), value) for s in same):
            has = sorted({repr(getattr(s, key, None)) for s in same})
            raise PairflowError(f"app={app} does not honour sink.{key}={value} (sink={kind}): "
                                f"its {kind} sink has {key}={' and '.join(has)}")


def _same(have, want) -> bool:
    if isinstance(have, float) or isinstance(want, float):
        try:
            return float(have) == float(want)
        except (TypeError, ValueError):
            return False
    return have == want
