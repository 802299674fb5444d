"""The apps' import rule (docs/architecture.md): an app imports the engine's public face
``engine`` only, never a module under it, and every name it takes from there is one the face
gives. Read from the source with ``ast``, so an import inside a function counts too."""
import ast
import importlib
from pathlib import Path

import pytest

APPS_DIR = Path(__file__).parents[2] / "apps"
APPS = sorted(APPS_DIR.rglob("*.py"))  # the modules of app packages (apps/align/) too


def engine_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every import of ``engine`` or below it in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                (node.module == "pairflow.engine" or node.module.startswith("pairflow.engine.")):
            found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names
                      if a.name == "pairflow.engine" or a.name.startswith("pairflow.engine.")]
    return found


def test_the_rule_sees_a_deep_import(tmp_path):
    """The check itself: a module under the engine, imported inside a function, is found."""
    path = tmp_path / "app.py"
    path.write_text("def f():\n    from pairflow.engine.run.rundir import META\n    import pairflow.engine.pairs\n")
    assert [(m, n) for _, m, n in engine_imports(path)] == [("pairflow.engine.run.rundir", "META"),
                                                            ("pairflow.engine.pairs", None)]


@pytest.mark.parametrize("path", APPS, ids=lambda p: str(p.relative_to(APPS_DIR)))
def test_an_app_imports_only_the_public_face(path):
    deep = [f"{path.name}:{line}: {module}" for line, module, _ in engine_imports(path)
            if module != "pairflow.engine"]
    assert not deep, f"apps import only `pairflow.engine`, not a module under it: {deep}"


@pytest.mark.parametrize("path", APPS, ids=lambda p: str(p.relative_to(APPS_DIR)))
def test_every_name_an_app_takes_is_on_the_public_face(path):
    engine = importlib.import_module("pairflow.engine")
    for line, module, name in engine_imports(path):
        if module == "pairflow.engine" and name is not None:
            assert hasattr(engine, name), f"{path.name}:{line}: engine has no {name}"
