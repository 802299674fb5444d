"""The extras rule (pairflow.apps.extras) against what the code really imports and what
pyproject.toml really installs, and the CLI's one line when an extra is missing.

The oracle for "what an app needs" is the source itself: every import (top-level and lazy, read
with ``ast``) of the app's module and of every pairflow module it reaches, resolved to the
distribution that provides it (``importlib.metadata``) and to the requirements, followed
transitively, of the core and of the app's extras as pyproject.toml lists them. A missing extra
is simulated the way Python itself records a module that is absent: ``sys.modules[name] = None``,
which ``importlib.util.find_spec`` reports as not found.
"""
from __future__ import annotations

import ast
import importlib.metadata as md
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pairflow.apps import APPS
from pairflow.apps import extras
from pairflow.apps.cli import main

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGE_DIR = PYPROJECT["tool"]["setuptools"]["package-dir"]
STDLIB = set(sys.stdlib_module_names)

# Imports that no app needs from its extra, each for a stated reason.
# The device backends: imported where cluster.devices names them (check_command asks for torch).
DEVICE_BACKENDS = {"torch", "cupy"}
# (importing module, module): fft_of, the one use of scipy in kernels/backend.py, is called by
# kernels/prnu.py only (app=forensics, whose imaging extra has scipy)
NOT_NEEDED = {("pairflow.kernels.backend", "scipy")}


# -- what the code imports ----------------------------------------------------------------------

def _source(module: str) -> tuple[Path, bool] | None:
    """The file of a pairflow module (mapped through package-dir) and whether it is a package."""
    for prefix in sorted(PACKAGE_DIR, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            rest = module[len(prefix) + 1:].split(".") if module != prefix else []
            base = REPO / PACKAGE_DIR[prefix] / Path(*rest)
            if base.with_suffix(".py").is_file():
                return base.with_suffix(".py"), False
            if (base / "__init__.py").is_file():
                return base / "__init__.py", True
            return None
    return None


def _imports(module: str) -> list[str]:
    """Every name ``module`` imports, anywhere in it (top-level and inside functions); for
    ``from X import y`` both X and X.y (y may be a submodule)."""
    path, is_package = _source(module)
    package = module if is_package else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


def third_party(*start: str) -> dict[str, set[str]]:
    """The third-party top-level modules reachable from ``start`` through pairflow's own
    modules: {module: the pairflow modules that import it}, less NOT_NEEDED."""
    seen, found, todo = set(), {}, list(start)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in _imports(module):
            top = name.split(".")[0]
            if top == "pairflow":
                parts = name.split(".")
                todo += [".".join(parts[:i]) for i in range(1, len(parts) + 1)
                         if _source(".".join(parts[:i])) is not None]
            elif top not in STDLIB | DEVICE_BACKENDS | {"hydra_plugins"} and \
                    (module, top) not in NOT_NEEDED:
                found.setdefault(top, set()).add(module)
    return found


# -- what pyproject installs --------------------------------------------------------------------

def _closure(requirements: list[str]) -> set[str]:
    """The distributions a list of requirements installs, followed through each installed
    distribution's own requirements (with the extras asked for)."""
    out, todo = set(), [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name == "pairflow":  # pairflow[docs] inside an extra: its extras' requirements
            for extra in req.extras:
                todo += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
            continue
        key = (name, tuple(sorted(req.extras)))
        if key in out:
            continue
        out.add(key)
        for text in md.distribution(name).requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e})
                                         for e in ("", *req.extras)):
                todo.append(sub)
    return {name for name, _ in out}


def provided(*extra_names: str) -> set[str]:
    """The top-level modules the core plus ``extra_names`` install."""
    reqs = list(PYPROJECT["project"]["dependencies"])
    for extra in extra_names:
        reqs += PYPROJECT["project"]["optional-dependencies"][extra]
    dists = _closure(reqs)
    return {module for module, owners in md.packages_distributions().items()
            if any(canonicalize_name(d) in dists for d in owners)}


def _direct(extra: str) -> set[str]:
    return {canonicalize_name(Requirement(r).name)
            for r in PYPROJECT["project"]["optional-dependencies"][extra]}


# -- the tables against the code and pyproject ----------------------------------------------

@pytest.mark.parametrize("app", sorted(APPS))
def test_an_app_imports_only_what_the_core_and_its_extras_install(app):
    needs = third_party(APPS[app])
    have = provided(*extras.APP_EXTRAS.get(app, ()))
    missing = {m: sorted(by) for m, by in needs.items() if m not in have}
    assert not missing, (f"app={app} imports modules that neither the core nor its extras "
                         f"{extras.APP_EXTRAS.get(app, ())} install: {missing}")


def test_the_core_alone_runs_the_cli_and_the_engine():
    """Every module of the engine (but pairflow.engine.testing, the conformance kit a user's
    pytest runs), the face and the CLI need the core alone. The example data sets
    (pairflow.apps.datasets) are made by ``pairflow data install``, each with its extra
    (DATASET_EXTRAS): what that module needs is the extras' together."""
    engine = [".".join(("pairflow",) + path.relative_to(REPO).with_suffix("").parts)
              .removesuffix(".__init__") for path in (REPO / "engine").rglob("*.py")
              if "__pycache__" not in path.parts and "testing" not in path.parts]
    needs = third_party("pairflow", "pairflow.apps.cli", *engine)
    datasets = third_party("pairflow.apps.datasets") if _source("pairflow.apps.datasets") \
        else {}
    for module, by in datasets.items():
        needs[module] = needs.get(module, set()) | by
    by_data = provided(*extras.DATASET_EXTRAS.values())
    missing = {m: sorted(by) for m, by in needs.items() if m not in provided()
               and not (by <= {"pairflow.apps.datasets"} and m in by_data)}
    assert not missing, missing


def test_a_command_imports_only_what_the_core_and_its_extras_install():
    for command, start in {"dashboard": ("pairflow.dashboard.cli", "pairflow.dashboard.serve",
                                         "pairflow.dashboard.app")}.items():
        needs = third_party(*start)
        missing = {m for m in needs if m not in provided(*extras.COMMAND_EXTRAS[command])}
        assert not missing, (command, missing)
    bench = {n.split(".")[0] for n in _imports_of_file(REPO / "benchmarks" / "report.py")}
    assert "matplotlib" in bench and "matplotlib" in extras.EXTRAS["bench"]


def _imports_of_file(path: Path) -> set[str]:
    return {a.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Import) for a in node.names}


def test_the_proof_modules_are_exactly_the_extras_requirements():
    """An extra's proof modules come from the distributions pyproject lists for it, and every
    distribution it lists is proven by one of them (so the table and pyproject move together)."""
    owners = md.packages_distributions()
    for extra, modules in extras.EXTRAS.items():
        dists = {canonicalize_name(d) for m in modules for d in owners.get(m, [])}
        assert dists == _direct(extra), (extra, dists, _direct(extra))
    assert set(PYPROJECT["project"]["optional-dependencies"]) == \
        set(extras.EXTRAS) | {"all", "test", "docs"}
    every = Requirement(PYPROJECT["project"]["optional-dependencies"]["all"][0])
    assert every.name == "pairflow" and every.extras == set(extras.EXTRAS) - {"torch"}


def test_no_extra_module_is_a_core_requirement():
    """An extra's module that the core installed anyway would make its check pass for nothing."""
    core = provided()
    for extra, modules in extras.EXTRAS.items():
        assert not set(modules) & core, (extra, set(modules) & core)


def test_every_extra_installed_here_passes():
    """This environment has .[all,test] (scripts/setup.sh): every app and command passes."""
    for app in APPS:
        extras.require_app(app)
    for command in extras.COMMAND_EXTRAS:
        extras.check_command([command, "RUN_DIR"])


# -- the one line -------------------------------------------------------------------------------

def _cli(argv, capsys) -> tuple[int, list[str]]:
    code = main(argv)
    out = capsys.readouterr()
    return code, [line for line in (out.out + out.err).splitlines() if line.strip()]


@pytest.mark.parametrize("choice", ["hep", "hep_poor"])
def test_app_hep_without_its_extra_stops_before_any_work(choice, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uproot", None)  # as Python records a missing module
    run_dir = tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    code, lines = _cli([f"app={choice}", f"hydra.run.dir={run_dir}"], capsys)
    assert code == 2
    assert lines == ["pairflow: error: app=hep needs pairflow's hep extra: "
                     "pip install 'pairflow[hep]'"]
    assert list(tmp_path.iterdir()) == []  # no run directory, no outputs/


def test_a_sweep_over_apps_checks_each(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pyopal", None)
    monkeypatch.chdir(tmp_path)
    code, lines = _cli(["-m", "app=jaccard,align"], capsys)
    assert code == 2 and lines == ["pairflow: error: app=align needs pairflow's align extra: "
                                   "pip install 'pairflow[align]'"]
    assert list(tmp_path.iterdir()) == []


def test_commands_and_options_name_their_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    for hidden, argv, line in [
            ("streamlit", ["dashboard", "runs/x"],
             "pairflow dashboard needs pairflow's dashboard extra: pip install "
             "'pairflow[dashboard]'"),
            ("matplotlib", ["bench", "--quick"],
             "pairflow bench needs pairflow's bench extra: pip install 'pairflow[bench]'"),
            ("s3fs", ["data.inputs=s3://bucket/g/*.fa"],
             "data.inputs=s3://bucket/g/*.fa needs pairflow's s3 extra: pip install "
             "'pairflow[s3]'"),
            ("torch", ["cluster.devices=cuda,cpu"],
             "cluster.devices=cuda,cpu needs pairflow's torch extra: pip install "
             "'pairflow[torch]'")]:
        with monkeypatch.context() as m:
            m.setitem(sys.modules, hidden, None)
            code, lines = _cli(argv, capsys)
        assert code == 2 and lines == [f"pairflow: error: {line}"], (argv, lines)
    assert list(tmp_path.iterdir()) == []


def test_help_needs_no_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uproot", None)
    code, lines = _cli(["app=hep", "--help"], capsys)
    assert code == 0 and any("apps (app=NAME" in line for line in lines)


def test_the_api_checks_too(monkeypatch):
    """run_config (what tests and resume call) refuses the app before importing it."""
    from omegaconf import OmegaConf

    from pairflow.apps.cli import run_config
    from pairflow.engine import PairflowError
    monkeypatch.setitem(sys.modules, "skbio", None)
    with pytest.raises(PairflowError, match=r"^app=phylogeny needs pairflow's phylogeny extra: "
                                            r"pip install 'pairflow\[phylogeny\]'$"):
        run_config(OmegaConf.create({"app": {"name": "phylogeny"}}))


def test_the_core_import_path_imports_no_extra():
    """import pairflow, the CLI's module and --help, the default app's module: none of them
    imports a module of any extra (each is imported when its app or command runs). Counted are
    the imports pairflow's own code makes (a library may try an optional one: numba imports
    scipy when it is there, to check its version)."""
    code = """
import os, sys
from pairflow.apps import extras
NAMES = {m for ms in extras.EXTRAS.values() for m in ms}
ROOTS = tuple(os.path.join(sys.argv[1], d) + os.sep for d in sys.argv[2:])
found = set()

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in NAMES:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
                frame = frame.f_back
            if frame is not None and frame.f_code.co_filename.startswith(ROOTS):
                found.add(f"{name} by {frame.f_code.co_filename}")
        return None

sys.meta_path.insert(0, Watch())
import pairflow, pairflow.apps.cli, pairflow.apps.jaccard, pairflow.apps.synthetic
pairflow.apps.cli.help_text()
print(sorted(found) or "none")
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code, str(REPO), *PACKAGE_DIR.values()],
                         capture_output=True, text=True, cwd="/", env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "none"
