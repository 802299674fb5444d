"""The ``pairflow`` command: Hydra-configured runs, and ``pairflow dashboard RUN_DIR``.

    pairflow                                   # Jaccard on the bundled genomes, local Ray
    pairflow app=jaccard data.inputs='g/*.fa' data.k=21 sink=dense
    pairflow app=align data.queries=q.fa data.targets=db.fa align.top_k=5 align.matrix=blosum62
    pairflow scheduler=zorder cache.host_cache_items=4
    pairflow app=hep hep.order=poor             # a filter pipeline (apps with their own run())
    pairflow dashboard runs/jaccard/20261122-101500
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import fields

from engine.errors import InputError, PairflowError

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


def _register_resolvers() -> None:
    from omegaconf import OmegaConf
    from apps.data import data_path
    if not OmegaConf.has_resolver("pairflow_data"):
        OmegaConf.register_new_resolver("pairflow_data", lambda rel="": data_path(rel))
    if not OmegaConf.has_resolver("pairflow_or"):  # first non-null argument (oc.select keeps a null)
        OmegaConf.register_new_resolver("pairflow_or", lambda *xs: next(
            (x for x in xs if x is not None), None))


def run_config(cfg, run_dir: str | None = None):
    """Run the app a config names; returns the result (used by the CLI and by tests)."""
    from omegaconf import OmegaConf
    from engine.pairs.driver import AllPairsConfig, allpairs
    name = cfg.app.name
    if name not in __import__("apps").APPS:
        raise PairflowError(f"unknown app {name!r}; known: {sorted(__import__('apps').APPS)}")
    module = importlib.import_module(__import__("apps").APPS[name])
    if hasattr(module, "run"):  # an app that is not an all-pairs run (e.g. a pipeline)
        return module, module.run(cfg, run_dir or cfg.get("run_dir"))
    app, sinks = module.build(cfg)
    options = {}
    flat = {**OmegaConf.to_container(cfg.cluster, resolve=True),
            **OmegaConf.to_container(cfg.cache, resolve=True),
            **OmegaConf.to_container(cfg.scheduler, resolve=True)}
    known = {f.name for f in fields(AllPairsConfig)}
    for key, value in flat.items():
        if key not in known:
            raise PairflowError(f"unknown setting {key!r} in the config")
        options[key] = value
    options.update(progress=bool(cfg.progress), preflight=bool(cfg.preflight),
                   runs_root=str(cfg.runs_root), resume=bool(cfg.resume),
                   validate=float(cfg.validate), max_retries=int(cfg.max_retries),
                   seed=int(cfg.seed))
    # optional app hooks: extra engine options, its own progress display, a step after the run
    options.update(getattr(module, "options", lambda c: {})(cfg))
    watch = getattr(module, "watch", None) if cfg.progress else None
    if watch is not None:
        options["progress"] = False
    handle = allpairs(app=app, sinks=sinks, run_dir=run_dir or cfg.get("run_dir"),
                      config_dump=OmegaConf.to_container(cfg, resolve=True), **options)
    stop = watch(handle.run_dir, app) if watch is not None else None
    try:
        result = handle.result()
    finally:
        if stop is not None:
            stop()
    if hasattr(module, "after"):
        module.after(app, result, cfg)
    return module, result


def _hydra_main(argv: list[str]) -> int:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    _register_resolvers()
    outcome = {"code": 0}

    @hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
    def _main(cfg):
        run_dir = cfg.get("run_dir") or HydraConfig.get().runtime.output_dir
        if cfg.resume and not cfg.get("run_dir"):
            print("pairflow: error: resume=true needs run_dir=<the run directory to resume>",
                  file=sys.stderr)
            outcome["code"] = 2
            return None
        try:
            module, result = run_config(cfg, run_dir)
        except (InputError, PairflowError, ValueError) as exc:
            print(f"pairflow: error: {exc}", file=sys.stderr)
            outcome["code"] = 2
            return None
        print(module.report(result))
        return result

    sys.argv = ["pairflow"] + argv
    _main()
    return outcome["code"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if argv and argv[0] == "dashboard":
        from dashboard.cli import main as dashboard_main
        return dashboard_main(argv[1:])
    return _hydra_main(argv)


if __name__ == "__main__":
    sys.exit(main())
