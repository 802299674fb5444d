"""The wheel's contents, as pyproject.toml declares them: every folder of Python files with an
``__init__.py`` in the installed trees is a listed package (mapped through ``package-dir``).

A package missing from ``packages`` is missing from the wheel: the editable install of the
checkout still finds it (so every other test passes), and an installed pairflow fails with an
ImportError. tests/integration/test_install.py installs the built wheel itself.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
TREES = ("engine", "apps", "kernels", "operators", "dashboard", "configs", "pairflow",
         "hydra_plugins")


def _folder(package: str) -> Path:
    """The folder a package name installs from (package-dir's longest matching prefix)."""
    mapping = SETUPTOOLS.get("package-dir", {})
    for prefix in sorted(mapping, key=len, reverse=True):
        if package == prefix or package.startswith(prefix + "."):
            rest = package[len(prefix) + 1:].split(".") if package != prefix else []
            return REPO / mapping[prefix] / Path(*rest)
    return REPO / Path(*package.split("."))


def _package_folders() -> set[Path]:
    """Every folder under TREES with an __init__.py and Python files (caches excluded)."""
    found = set()
    for tree in TREES:
        for init in (REPO / tree).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(init.parent)
    return found


def test_every_package_folder_is_listed():
    listed = {_folder(p) for p in SETUPTOOLS["packages"]}
    unlisted = sorted(str(f.relative_to(REPO)) for f in _package_folders() - listed)
    assert not unlisted, (f"folders with an __init__.py missing from [tool.setuptools] packages "
                          f"in pyproject.toml (the wheel would lack them): {unlisted}")


# Hydra's plugin folder: a namespace package (no __init__.py, as Hydra requires), listed so an
# editable install gives it a real path (without it, Hydra finds no pairflow launcher outside
# the checkout's working directory)
NAMESPACES = ("hydra_plugins",)


def test_every_listed_package_exists():
    missing = [p for p in SETUPTOOLS["packages"]
               if not (_folder(p) / "__init__.py").is_file()
               and not (p in NAMESPACES and _folder(p).is_dir())]
    assert not missing, f"packages listed in pyproject.toml without a folder: {missing}"


def test_python_folders_without_init_are_not_shipped_silently():
    """A folder of .py files without __init__.py under a package would be left out of the
    wheel (namespace packages are not collected by a ``packages`` list)."""
    orphans = []
    for tree in TREES:
        for py in (REPO / tree).rglob("*.py"):
            folder = py.parent
            if "__pycache__" in folder.parts or folder == REPO / "hydra_plugins":
                continue
            if not (folder / "__init__.py").is_file():
                orphans.append(str(folder.relative_to(REPO)))
    assert not orphans, f"folders of Python files without __init__.py: {sorted(set(orphans))}"
