"""MkDocs hooks of the documentation site (mkdocs.yml: ``hooks``).

1. Let mkdocstrings read pairflow's source as the package it installs as. The repository keeps
   its folders at the top (``engine/``, ``apps/`` ...) and setuptools installs them as
   ``pairflow.engine``, ``pairflow.apps`` ... (pyproject's ``package-dir``). Griffe, which
   mkdocstrings uses to read docstrings from the source without importing it, looks for a
   subpackage in its parent's folder only, so it would not find ``pairflow.engine``. For the
   length of a build a folder ``pairflow/`` of symbolic links is made (the face's own files, and
   each subpackage's folder under its installed name, read from ``package-dir``) and put first
   on the handler's search paths. Nothing is imported: attribute docstrings are read too.
2. A page's link to a file of the repository outside ``docs/`` (``../benchmarks/RESULTS.md``:
   figures live there and only there) is a link on a forge's view of ``docs/``; on the site it
   goes to the repository at ``repo_url`` when mkdocs.yml names one, and is shown as the file's
   path otherwise. A link to a file that does not exist is left alone, so the strict build
   still fails on it.
3. ``::: pairflow.NAME`` on a page, for a name of ``pairflow.__all__``, documents the object
   where it is defined (``pairflow.engine.pairs.driver.allpairs``) under the heading ``NAME``:
   the face re-exports lazily (``pairflow.engine.__getattr__``), which static analysis cannot
   follow, and the API reference should not name the modules the code happens to live in.
"""
from __future__ import annotations

import ast
import importlib
import os
import re
import sys
import shutil
import tempfile

from mkdocs.plugins import event_priority

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

_TREES: list[str] = []
_FACE = re.compile(r"^::: pairflow\.(\w+)[ \t]*$", re.M)
_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((\.\./[^)\s#]+)(#[^)\s]*)?\)")


def _root(config) -> str:
    return os.path.dirname(os.path.abspath(config.config_file_path))


def _package_tree(root: str) -> str:
    with open(os.path.join(root, "pyproject.toml"), "rb") as fh:
        package_dir = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    tree = tempfile.mkdtemp(prefix="pairflow-griffe-")
    face = os.path.join(tree, "pairflow")
    os.mkdir(face)
    source = os.path.join(root, package_dir["pairflow"])
    for name in os.listdir(source):
        if name.endswith(".py"):
            os.symlink(os.path.join(source, name), os.path.join(face, name))
    for package, folder in package_dir.items():
        head, _, sub = package.partition(".")
        if head == "pairflow" and sub and "." not in sub:
            os.symlink(os.path.join(root, folder), os.path.join(face, sub))
    _TREES.append(tree)
    return tree


@event_priority(100)  # before mkdocstrings reads its handler options
def on_config(config):
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [_package_tree(_root(config))] + list(python.get("paths") or [])
    return config


def defined_at(name: str) -> str:
    """Where ``pairflow.NAME`` is defined, as a dotted path: a class's or function's module and
    qualified name; for a value (``RUN_CONFIG``), the ``pairflow.engine`` module attribute that
    holds that very object and is assigned there, not imported (its name there may differ)."""
    pairflow = importlib.import_module("pairflow")
    obj = getattr(pairflow, name)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        return f"{module}.{qualname}"
    found = sorted(f"{mod_name}.{attr}" for mod_name, mod in list(sys.modules.items())
                   if mod_name.startswith("pairflow.engine.") and mod is not None
                   for attr, value in list(vars(mod).items())
                   if value is obj and attr in assigned_names(mod))
    if len(found) != 1:
        raise ValueError(f"pairflow.{name}: assigned in one engine module, found {found}")
    return found[0]


def assigned_names(module) -> set[str]:
    """The names a module's own top-level statements assign (not those it imports)."""
    path = getattr(module, "__file__", None)
    if not path or not path.endswith(".py"):
        return set()
    with open(path) as fh:
        tree = ast.parse(fh.read())
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _face_entry(match) -> str:
    name = match.group(1)
    return (f"::: {defined_at(name)}\n    options:\n      heading: {name}\n"
            f"      toc_label: {name}\n")


def on_page_markdown(markdown, page, config, files):
    markdown = _FACE.sub(_face_entry, markdown)
    root, docs = _root(config), os.path.abspath(config.docs_dir)
    here = os.path.dirname(page.file.abs_src_path)

    def repository_link(match):
        text, target, anchor = match.group(1), match.group(2), match.group(3) or ""
        path = os.path.normpath(os.path.join(here, target))
        inside_docs = os.path.commonpath([path, docs]) == docs
        if inside_docs or os.path.commonpath([path, root]) != root or not os.path.exists(path):
            return match.group(0)
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if config.repo_url:
            return f"[{text}]({config.repo_url.rstrip('/')}/blob/main/{rel}{anchor})"
        return f"`{rel}`" if text.strip("`") == rel else f"{text} (`{rel}` in the repository)"

    return _LINK.sub(repository_link, markdown)


def on_shutdown():
    while _TREES:
        shutil.rmtree(_TREES.pop(), ignore_errors=True)
