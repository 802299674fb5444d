"""Every app in ``pairflow.apps.APPS`` follows ``pairflow.apps.protocol``: its kind agrees with its
config (an app whose config drops the sink group runs itself), it has the hooks of its kind with
signatures the CLI can call, and no hook the CLI would ignore. The checker is itself checked on
modules with one planted fault each, and the protocol's declarations against the calls
``apps/cli.py`` makes (read with ``ast``)."""
import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

from pairflow.apps import APPS
from pairflow.apps import protocol as pr
from pairflow.engine import PairflowError

ROOT = Path(__file__).parents[2]


def drops_sink(name: str) -> bool:
    """The config says the app writes its own results (``override /sink: null``)."""
    text = (ROOT / "configs" / "app" / f"{name}.yaml").read_text()
    return any(line.split("#")[0].replace(" ", "") == "-override/sink:null"
               for line in text.splitlines())


@pytest.mark.parametrize("name", sorted(APPS))
def test_every_app_follows_the_protocol(name):
    module = importlib.import_module(APPS[name])
    assert pr.check_app_module(module) == []
    kind = "run" if drops_sink(name) else "allpairs"
    assert pr.app_kind(module) == kind
    assert callable(module.report)
    assert callable(module.run if kind == "run" else module.build)
    assert pr.load_app_module(APPS[name]) is module
    for hook in ("options", "watch", "after"):
        assert pr.optional_hook(module, hook) is getattr(module, hook, None)


def test_the_hooks_the_apps_have():
    """Which optional hooks each app gives, as the modules' source defines them at top level."""
    found = {}
    for name, path in APPS.items():
        module = importlib.import_module(path)
        tree = ast.parse(Path(module.__file__).read_text())
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        top |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)}
        top |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                for a in n.names}
        hooks = {h for h in ("options", "watch", "after", "resumes") if h in top}
        assert hooks == {h for h in ("options", "watch", "after", "resumes")
                         if hasattr(module, h)}, name
        found[name] = hooks
    assert found["align"] == {"watch", "after"}
    assert found["farm"] == {"resumes"}
    assert pr.resumes(importlib.import_module(APPS["farm"]))
    assert not pr.resumes(importlib.import_module(APPS["hep"]))
    assert pr.resumes(importlib.import_module(APPS["jaccard"]))  # all-pairs: the journal


def fake(**hooks) -> types.ModuleType:
    module = types.ModuleType("fake_app")
    for name, value in hooks.items():
        setattr(module, name, value)
    return module


def report(result):
    return ""


def build(cfg):
    return None, []


def run(cfg, run_dir=None):
    return None


def test_a_conforming_module_passes():
    assert pr.check_app_module(fake(build=build, report=report,
                                    after=lambda app, result, cfg: None,
                                    watch=lambda run_dir, app, interval=0.5: None,
                                    options=lambda cfg: {})) == []
    assert pr.check_app_module(fake(run=run, report=report, resumes=True)) == []
    assert pr.check_app_module(fake(run=lambda cfg, run_dir=None, *, quiet=False: None,
                                    report=report)) == []


@pytest.mark.parametrize("module, words", [
    (fake(report=report), "defines neither"),
    (fake(build=build, run=run, report=report), "defines both"),
    (fake(build=build), "report is missing"),
    (fake(build=lambda config: None, report=report), "takes (cfg) first"),
    (fake(build=build, report=report, after=lambda result, app, cfg: None),
     "takes (app, result, cfg) first"),
    (fake(build=build, report=report, watch=lambda run_dir: None), "takes (run_dir, app) first"),
    (fake(build=build, report=report, options=lambda cfg, extra: {}), "extra without a default"),
    (fake(build=build, report=report, options=lambda cfg, *, extra: {}),
     "extra without a default"),
    (fake(run=lambda cfg, run_dir: None, report=report), "run_dir needs a default"),
    (fake(run=run, report=report, after=lambda app, result, cfg: None),
     "after is a hook of allpairs apps"),
    (fake(build=build, report=report, resumes=True), "resumes is a hook of run apps"),
    (fake(run=run, report=report, resumes="yes"), "resumes must be True or False"),
    (fake(build=build, report="a text"), "report is not a function"),
])
def test_each_planted_fault_is_named(module, words):
    problems = pr.check_app_module(module)
    assert len(problems) == 1 and words in problems[0], problems


def test_loading_a_module_that_does_not_follow_fails_before_any_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "fake_app", fake(build=lambda: None, report=report))
    with pytest.raises(PairflowError, match="fake_app does not follow.*takes \\(cfg\\) first"):
        pr.load_app_module("fake_app")
    with pytest.raises(ValueError, match="not an optional hook"):
        pr.optional_hook(fake(run=run, report=report), "resumes")


def test_the_declarations_match_the_calls_cli_makes():
    """Each hook ``apps/cli.py`` calls gets as many positional arguments as its protocol
    declares (the CLI passes them by position)."""
    tree = ast.parse((ROOT / "apps" / "cli.py").read_text())
    bound = {}  # local name -> hook, from ``x = optional_hook(module, "name")``
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Name) and c.func.id == "optional_hook"]
            if calls:
                bound[node.targets[0].id] = calls[0].args[1].value
    called = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                f.value.id == "module" and f.attr in ("build", "run", "report"):
            called[f.attr] = len(node.args)
        elif isinstance(f, ast.Name) and f.id in bound:
            called[bound[f.id]] = len(node.args)
    declared = {"build": pr.AllPairsAppModule, "run": pr.OwnRunAppModule,
                "report": pr.AppModule, **{h: p for h, p in pr.OPTIONAL["allpairs"].items()}}
    assert set(called) == set(declared)
    for hook, protocol in declared.items():
        params = [p for p in pr._declared(protocol, hook).parameters.values()]
        assert called[hook] == len(params), hook


def test_resume_of_an_own_run_app_that_does_not_say_it_resumes_is_refused(capsys, tmp_path):
    """``resume=true`` on a hep run (its own run(), no ``resumes``): one line, nothing
    written; a farm run (``resumes = True``) gets past that refusal (refused later for its
    changed tool, by its own check)."""
    from pairflow.apps.cli import main
    from tests.unit.test_cli import _listing, _saved_run
    run_dir = _saved_run(tmp_path / "hep", app="hep")
    before = _listing(tmp_path)
    code = main(["resume=true", f"run_dir={run_dir}"])
    err = capsys.readouterr().err
    assert code == 2 and "app=hep runs on its own and does not resume" in err, err
    assert _listing(tmp_path) == before
    farm = _saved_run(tmp_path / "farm", "farm=blastp", "farm.queries=/x/q.fa", app="farm")
    code = main(["app=farm", "farm=blastn", "farm.queries=/x/q.fa", "resume=true",
                 f"run_dir={farm}"])
    err = capsys.readouterr().err
    assert code == 2 and "farm=blastn" in err and "does not resume" not in err, err
