"""The hooks an app module gives the ``pairflow`` command, declared once.

Why: ``apps/cli.py`` calls an app by the names its module defines (the module
``pairflow.apps.APPS`` maps the app's name to); these protocols are where those names, their
arguments and what they return are written down, and ``check_app_module`` is how the CLI (on
loading an app) and the tests (for every app in ``APPS``) hold a module to them.

An app module is one of two kinds:

* **An all-pairs app** (``AllPairsAppModule``): ``build(cfg)`` returns the app and its sinks,
  and the CLI runs ``pairflow.allpairs`` with them (resuming from the run's journal on
  ``resume=true``). Three hooks are optional: ``options(cfg)`` adds engine options
  (``OptionsHook``), ``watch(run_dir, app)`` starts the app's own progress display in place of
  the engine's bar and returns its ``stop`` (``WatchHook``), ``after(app, result, cfg)`` runs
  after the engine, e.g. tracebacks and output files (``AfterHook``).
* **An app with its own run** (``OwnRunAppModule``): ``run(cfg, run_dir)`` does everything and
  returns the result (a pipeline, a tool farm). It takes no sink. It resumes on
  ``resume=true`` only if it says so with ``resumes = True`` (``ResumesHook``).

Both give ``report(result)``: the text the CLI prints after the run. ``cfg`` is the composed
Hydra config (an omegaconf ``DictConfig``). The hooks are module-level functions; the protocols'
``self`` stands for the module, as PEP 544 reads a module against a protocol.
"""
from __future__ import annotations

import importlib
import inspect
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from pairflow.engine import PairApp


class AppModule(Protocol):
    """What every app module gives."""

    def report(self, result: Any) -> str:
        """What the run did, in a few lines for the terminal."""


class AllPairsAppModule(AppModule, Protocol):
    """An app the CLI runs through ``pairflow.allpairs``."""

    def build(self, cfg: Any) -> tuple[PairApp, list]:
        """The app and its sinks, from the config; every input checked before any compute."""


class OwnRunAppModule(AppModule, Protocol):
    """An app that runs itself (a pipeline, a tool farm)."""

    def run(self, cfg: Any, run_dir: str | None = None) -> Any:
        """Run in ``run_dir`` (None: the config's ``run_dir``, else a new one); the result."""


class OptionsHook(Protocol):
    """Optional, all-pairs apps: engine options of the app's own (``pairflow.allpairs``
    keywords), over those the config gives."""

    def options(self, cfg: Any) -> dict:
        ...


class WatchHook(Protocol):
    """Optional, all-pairs apps: the app's own progress display, started once the run
    directory exists (the engine's bar is then off); returns the function that stops it.
    Called only when the config asks for progress."""

    def watch(self, run_dir: str, app: PairApp) -> Callable[[], None]:
        ...


class AfterHook(Protocol):
    """Optional, all-pairs apps: a step after the engine's run, before ``report``."""

    def after(self, app: PairApp, result: Any, cfg: Any) -> None:
        ...


class ResumesHook(Protocol):
    """Optional, apps with their own run: True when ``run`` resumes the run directory it is
    given (``resume=true``); without it such an app refuses to resume."""

    resumes: bool


KINDS: dict[str, type] = {"allpairs": AllPairsAppModule, "run": OwnRunAppModule}
# the optional hooks of each kind, by name: the protocol that declares each
OPTIONAL: dict[str, dict[str, type]] = {
    "allpairs": {"options": OptionsHook, "watch": WatchHook, "after": AfterHook},
    "run": {"resumes": ResumesHook},
}


def _declared(protocol: type, name: str) -> inspect.Signature:
    """A hook's signature as its protocol declares it, without ``self`` (the module)."""
    sig = inspect.signature(getattr(protocol, name))
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _positional(sig: inspect.Signature) -> list[inspect.Parameter]:
    return [p for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _signature_problem(name: str, func: Any, want: inspect.Signature) -> str | None:
    """Why ``func`` cannot stand for the hook ``want`` (None when it can): the CLI passes the
    declared parameters by position, so the function takes them first, under the same names
    (they document it), with a default where the declaration has one; anything it takes beyond
    them has a default."""
    if not callable(func):
        return f"{name} is not a function"
    try:
        got = inspect.signature(func)
    except (TypeError, ValueError):
        return None  # a builtin or C callable: nothing to read, taken on trust
    shown = f"{name}{got} (declared: {name}{want})"
    params = _positional(got)
    declared = _positional(want)
    if [p.name for p in params[:len(declared)]] != [p.name for p in declared]:
        return f"{shown}: takes ({', '.join(p.name for p in declared)}) first"
    for p, d in zip(params, declared):
        if d.default is not d.empty and p.default is p.empty:
            return f"{shown}: {p.name} needs a default"
    extra = [p.name for p in params[len(declared):] if p.default is p.empty]
    extra += [p.name for p in got.parameters.values()
              if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if extra:
        return f"{shown}: {', '.join(extra)} without a default"
    return None


def app_kind(module: Any) -> str | None:
    """``"allpairs"`` (it has ``build``), ``"run"`` (it has ``run``), or None (neither, or
    both)."""
    build, run = hasattr(module, "build"), hasattr(module, "run")
    return None if build == run else "allpairs" if build else "run"


def check_app_module(module: Any) -> list[str]:
    """What keeps ``module`` from following its kind's protocol (empty when it does): a
    required hook missing, a hook whose signature the CLI cannot call, or a hook of the other
    kind, which the CLI would ignore."""
    kind = app_kind(module)
    if kind is None:
        which = "both" if hasattr(module, "build") else "neither"
        return [f"an app module defines build(cfg) (an all-pairs app) or run(cfg, run_dir) (its "
                f"own run): this one defines {which}"]
    problems = []
    protocol = KINDS[kind]
    for name in ("report", "build" if kind == "allpairs" else "run"):
        if not hasattr(module, name):
            problems.append(f"{name} is missing (declared: {name}{_declared(protocol, name)})")
            continue
        problem = _signature_problem(name, getattr(module, name), _declared(protocol, name))
        if problem:
            problems.append(problem)
    for other, hooks in OPTIONAL.items():
        for name, hook in hooks.items():
            if not hasattr(module, name):
                continue
            if other != kind:
                problems.append(f"{name} is a hook of {other} apps; the CLI ignores it in a "
                                f"{kind} app")
            elif name == "resumes":
                if not isinstance(module.resumes, bool):
                    problems.append(f"resumes must be True or False, got {module.resumes!r}")
            else:
                problem = _signature_problem(name, getattr(module, name), _declared(hook, name))
                if problem:
                    problems.append(problem)
    return problems


def load_app_module(path: str) -> ModuleType:
    """Import the app module ``path`` (a value of ``pairflow.apps.APPS``), held to the
    protocol: a module that does not follow it is a ``PairflowError`` naming what is wrong,
    before any run starts."""
    from pairflow.engine import PairflowError
    module = importlib.import_module(path)
    problems = check_app_module(module)
    if problems:
        raise PairflowError(f"app module {path} does not follow pairflow.apps.protocol: "
                            + "; ".join(problems))
    return module


def runs_itself(module: Any) -> bool:
    """An app with its own ``run`` (``OwnRunAppModule``), not an all-pairs app."""
    return app_kind(module) == "run"


def optional_hook(module: Any, name: str) -> Callable | None:
    """The optional hook ``name`` of an all-pairs app module, or None when it has none."""
    if name not in OPTIONAL["allpairs"]:
        raise ValueError(f"{name!r} is not an optional hook of all-pairs apps: "
                         f"{sorted(OPTIONAL['allpairs'])}")
    return getattr(module, name, None)


def resumes(module: Any) -> bool:
    """Whether ``resume=true`` may start this app on a run directory: all-pairs apps always
    (the engine resumes from its journal), apps with their own run when they say so."""
    return not runs_itself(module) or bool(getattr(module, "resumes", False))
