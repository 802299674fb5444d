"""The ``pairflow`` command: Hydra-configured runs, and ``pairflow dashboard RUN_DIR``.

    pairflow                                   # Jaccard on the bundled genomes, local Ray
    pairflow app=jaccard data.inputs='g/*.fa' data.k=21 sink=dense
    pairflow app=align data.queries=q.fa data.targets=db.fa align.top_k=5 align.matrix=blosum62
    pairflow scheduler=zorder cache.host_cache_items=4
    pairflow app=hep hep.order=poor             # a filter pipeline (apps with their own run())
    pairflow dashboard runs/jaccard/20261122-101500
    pairflow app=farm farm=blastp farm.queries=q.fa farm.db=db.fa   # a tool farm
    pairflow gather RUN_DIR stdout -o hits.tsv                      # its output in input order

``pairflow --help`` lists the apps, the subcommands and a short tour (``help_text``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pairflow.apps.data import check_inputs
from pairflow.apps.extras import check_command, require_app
from pairflow.apps.help import help_text
from pairflow.apps.overrides import check_composed, check_keys, quote_input_lists
from pairflow.apps.protocol import load_app_module, optional_hook, resumes, runs_itself
from pairflow.apps.resolvers import register_resolvers
from pairflow.apps.resume import wants_resume
from pairflow.configs import CONFIG_DIR
from pairflow.engine import InputError, PairflowError



def _apps_registry() -> dict[str, str]:
    """The apps by name (``pairflow.apps.APPS``: app name -> its module)."""
    from pairflow.apps import APPS
    return APPS


def run_config(cfg, run_dir: str | None = None):
    """Run the app a config names; returns the result (used by the CLI and by tests)."""
    from omegaconf import OmegaConf

    from pairflow.apps.options import allpairs_options, check_sinks
    name = cfg.app.name
    if name not in _apps_registry():
        raise PairflowError(f"unknown app {name!r}; known: {sorted(_apps_registry())}")
    require_app(name)  # its extra installed, or one line naming it
    module = load_app_module(_apps_registry()[name])  # held to pairflow.apps.protocol
    if runs_itself(module):  # an app that is not an all-pairs run (e.g. a pipeline)
        if cfg.get("sink") is not None:  # its config takes none (sink: null): one was chosen
            raise PairflowError(f"app={name} writes no all-pairs sink: sink="
                                f"{cfg.sink.get('type')} would be ignored (it writes its own "
                                f"results)")
        return module, module.run(cfg, run_dir or cfg.get("run_dir"))
    app, sinks = module.build(cfg)
    check_sinks(name, cfg.get("sink"), sinks)  # before any compute
    options = allpairs_options(cfg)
    from pairflow.engine import allpairs  # imports Ray: only once there is a run to start
    # optional app hooks: extra engine options, its own progress display, a step after the run
    extra_options = optional_hook(module, "options")
    if extra_options is not None:
        options.update(extra_options(cfg))
    watch = optional_hook(module, "watch") if cfg.progress else None
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
    after = optional_hook(module, "after")
    if after is not None:
        after(app, result, cfg)
    return module, result


# Keys whose value is a list of input patterns: "a.fa,b.fa" there is a list, not a Hydra sweep.
VERBOSE_FLAGS = ("-v", "--verbose")


def _interrupted(run_dir: str | None) -> None:
    """Say where an interrupted run stands, and mark its run directory interrupted (the engine
    marks it too; this covers an interrupt outside the engine's run)."""
    import shlex
    status = os.path.join(run_dir, "status.json") if run_dir else None
    if status and os.path.exists(status):
        from pairflow.engine import RunDir, read_json
        if (read_json(status, {}) or {}).get("state") != "interrupted":
            RunDir(run_dir).set_status("interrupted", error=None)
        if os.path.exists(os.path.join(run_dir, "meta.json")):
            print(f"pairflow: interrupted; the run directory {run_dir} is marked interrupted.\n"
                  f"resume it with: pairflow resume=true run_dir={shlex.quote(run_dir)}",
                  file=sys.stderr)
            return
        print(f"pairflow: interrupted before the run started ({run_dir}); run the command "
              "again", file=sys.stderr)
    else:
        print("pairflow: interrupted before the run started", file=sys.stderr)


def _fail(exc: BaseException, verbose: bool) -> None:
    """One line for the user; the traceback only when asked for: the driver's, then, for a
    failure inside a worker, the worker's own (its last frame is where it broke)."""
    if verbose:
        import traceback

        from pairflow.engine import elsewhere_traceback
        traceback.print_exception(exc)  # with a WorkerError's note: the worker's traceback
        remote = elsewhere_traceback(exc)
        if remote and not getattr(exc, "__notes__", None):
            print(f"\nwhere it happened, in the worker:\n{remote.rstrip()}", file=sys.stderr)
    from hydra.errors import HydraException
    expected = isinstance(exc, (InputError, PairflowError, ValueError, HydraException))
    what = str(exc) if expected else f"{type(exc).__name__}: {exc}"
    stage = getattr(exc, "worker_stage", None)
    if stage and not expected:  # a bug in an app's step: which step, on what
        what = f"{stage} failed: {what}"
    hint = "" if verbose or expected else " (run with -v for the traceback)"
    print(f"pairflow: error: {what}{hint}", file=sys.stderr)


def _run_and_report(cfg, run_dir: str | None, verbose: bool) -> int:
    """Run a composed config, print the app's report (and what a resume did); the exit code."""
    from pairflow.apps.resume import resume_line
    try:
        module, result = run_config(cfg, run_dir)
    except KeyboardInterrupt:
        _interrupted(run_dir)
        return 130
    except Exception as exc:
        if _SIGINT.is_set():  # the engine may turn the interrupt into its own error
            _interrupted(run_dir)
            return 130
        _fail(exc, verbose)
        return 2
    print(module.report(result))
    line = resume_line((getattr(result, "summary", None) or {}).get("resumed"))
    if line:
        print(line)
    return 0


def _task(cfg, verbose: bool) -> int:
    """A run of the composed config (``cfg`` without its ``hydra`` node), in the output
    directory Hydra made for it."""
    from hydra.core.hydra_config import HydraConfig
    run_dir = cfg.get("run_dir") or HydraConfig.get().runtime.output_dir
    if cfg.resume and not cfg.get("run_dir"):
        print("pairflow: error: resume=true needs run_dir=<the run directory to resume>",
              file=sys.stderr)
        return 2
    return _run_and_report(cfg, run_dir, verbose)


def _hydra_main(argv: list[str], verbose: bool = False) -> int:
    """Hydra's own entry point: for its commands (``--cfg``, ``-m``, ``--hydra-help`` ...)."""
    import hydra

    from pairflow.apps.sweeps import in_multirun, job_failed
    register_resolvers()
    outcome = {"code": 0}

    @hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
    def _main(cfg):
        code = _task(cfg, verbose)
        outcome["code"] = max(outcome["code"], code)
        if code and in_multirun():
            raise job_failed(code)  # Hydra's contract: a failed job's task raises

    sys.argv = ["pairflow"] + argv
    _main()
    return outcome["code"]


def _plain_run(argv: list[str]) -> bool:
    """Only overrides, no Hydra flag: a run that ``compose_run`` composes once."""
    return not any(a.startswith("-") for a in argv)


def compose_run(argv: list[str]):
    """The run's config, composed once, as ``@hydra.main`` composes it (same search path, task
    name ``cli``, logging), and its keys checked. ``@hydra.main`` composes three times for a run
    (the key check, the run mode, the run), each costing a small run a tenth of a second or so.
    Returns Hydra (initialized; ``run_composed`` clears it) and the config."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    register_resolvers()
    GlobalHydra.instance().clear()
    hydra = Hydra.create_main_hydra2(task_name="cli",
                                     config_search_path=create_config_search_path(CONFIG_DIR))
    try:
        cfg = hydra.compose_config("config", [*argv, "hydra.mode=RUN"], run_mode=RunMode.RUN,
                                   with_log_configuration=True)
    except Exception:
        GlobalHydra.instance().clear()
        check_keys(argv)  # a key Hydra refused: named, with the closest known ones
        raise
    try:
        check_composed(argv, cfg)
    except Exception:
        GlobalHydra.instance().clear()
        raise
    return hydra, cfg


def run_composed(hydra, cfg, verbose: bool) -> int:
    """What ``@hydra.main`` does with a composed config (``Hydra.run``): the output directory
    with its ``.hydra/`` and ``cli.log``, Hydra's callbacks, then the run (``_task``)."""
    from hydra._internal.callbacks import Callbacks
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext
    outcome = {"code": 0}

    def task(task_cfg):
        outcome["code"] = _task(task_cfg, verbose)

    try:
        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name="config")
        ret = run_job(hydra_context=HydraContext(config_loader=hydra.config_loader,
                                                 callbacks=callbacks),
                      task_function=task, config=cfg, job_dir_key="hydra.run.dir",
                      job_subdir_key=None, configure_logging=True)
        callbacks.on_run_end(config=cfg, config_name="config", job_return=ret)
        _ = ret.return_value  # a failure of the task itself is raised here
    finally:
        GlobalHydra.instance().clear()
    return outcome["code"]


def _resume(argv: list[str], verbose: bool) -> int:
    """``resume=true``: the run's saved configuration, without Hydra composing (or creating)
    anything; a refused resume writes nothing."""
    from pairflow.apps.resume import resume_config
    try:
        register_resolvers()
        cfg, run_dir = resume_config(argv, CONFIG_DIR)
        module = load_app_module(_apps_registry()[cfg.app.name])
        # an app with its own run() resumes only if it says so (``resumes = True``)
        if not resumes(module):
            raise PairflowError(f"cannot resume {run_dir}: app={cfg.app.name} runs on its own "
                                "and does not resume from a journal yet; start it again")
    except Exception as exc:
        _fail(exc, verbose)
        return 2
    return _run_and_report(cfg, run_dir, verbose)


def _bench(argv: list[str]) -> int:
    """``pairflow bench``: the suite of this checkout's benchmarks/ (not part of the installed
    package: it needs the repository's data and tools)."""
    import importlib.util
    path = os.path.join(os.path.dirname(CONFIG_DIR), "benchmarks", "suite.py")
    if not os.path.exists(path):
        print(f"pairflow: error: {path} not found: pairflow bench runs from a checkout of the "
              "repository", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("pairflow_bench_suite", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.main(argv)


_SIGINT = threading.Event()


def _on_sigint(signum, frame):
    _SIGINT.set()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:  # the extra an app or a subcommand needs, before any work (pairflow.apps.extras)
        check_command(argv, CONFIG_DIR)
    except PairflowError as exc:
        _fail(exc, False)
        return 2
    if argv and argv[0] == "dashboard":
        from pairflow.dashboard.cli import main as dashboard_main
        return dashboard_main(argv[1:])
    if argv and argv[0] == "gather":
        from pairflow.apps.farm import gather_main
        return gather_main(argv[1:])
    if argv and argv[0] == "bench":
        return _bench(argv[1:])
    if argv and argv[0] == "data":  # pairflow data install | where (apps/data_install.py)
        from pairflow.apps.data_install import main as data_main
        return data_main(argv[1:])
    verbose = any(a in VERBOSE_FLAGS for a in argv) or \
        os.environ.get("PAIRFLOW_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a not in VERBOSE_FLAGS]
    if not verbose:
        # Ray prints the traceback of every failed task nobody waited for: after bad input is
        # reported by name, the other items' checks failing the same way are only noise
        os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    if any(a in ("-h", "--help") for a in argv):
        print(help_text())
        return 0
    argv = quote_input_lists(argv)
    resume = wants_resume(argv) and not any(a.startswith("--cfg") or a in ("-m", "--multirun")
                                            for a in argv)
    plain = not resume and _plain_run(argv)
    try:
        from pairflow.apps.sweeps import refuse_old_launcher
        refuse_old_launcher(argv)
        if plain:
            composed = compose_run(argv)
            check_inputs(composed[1])  # default inputs not installed: one line, no run dir
        elif not resume:
            check_keys(argv)
    except Exception as exc:  # a bad group choice too: Hydra's message, without its traceback
        _fail(exc, verbose)
        return 2
    _SIGINT.clear()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _on_sigint) if main_thread else None
    try:
        if resume:
            return _resume(argv, verbose)
        return run_composed(*composed, verbose) if plain else _hydra_main(argv, verbose)
    except KeyboardInterrupt:
        print("pairflow: interrupted", file=sys.stderr)
        return 130
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)


def console() -> None:
    """The ``pairflow`` command: ``main()``, then out without the interpreter's teardown."""
    leave(main())


def leave(code: int) -> None:
    """Exit with ``code`` once what the interpreter's teardown does that matters has been done,
    in its order: non-daemon threads joined, exit handlers run (logging's flush and close,
    Ray's shutdown), the standard streams flushed. The rest, freeing every object and module,
    is slow once numba's compiled kernels are loaded: it could outlast a small run
    (benchmarks/startup.py measures the command end to end).
    Only for a normal return; an exception leaves as Python does."""
    import atexit
    try:
        threading._shutdown()  # what Py_Finalize does first
    except Exception:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":
    # `python -m apps.cli`: run the importable module's main, not this __main__ copy's, so a
    # launcher that ships the job to another process (hydra/launcher=pairflow) pickles functions
    # by reference to apps.cli instead of by value with this module's state
    from pairflow.apps.cli import console as _console
    _console()
