"""The package's shape, read from its source with ``ast`` (nothing is imported): no module
imports in a circle, the engine's layers import only downward (the order below, the same as in
engine/pairs/__init__.py), every package folder's ``__init__.py`` says what it holds in one
paragraph, and every module stays under 500 lines (house style: one concept a module).

Every import counts, at the top of a module or inside a function: a lazy import still ties the
two modules together. An import of a package's ``__init__`` is an edge to that ``__init__``; the
parents a Python import runs implicitly are not edges (else everything would circle through
``pairflow.engine``)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# folder -> the package it installs as (pyproject [tool.setuptools] package-dir)
FOLDERS = {"pairflow": "pairflow", "engine": "pairflow.engine", "apps": "pairflow.apps",
           "kernels": "pairflow.kernels", "operators": "pairflow.operators",
           "dashboard": "pairflow.dashboard"}
MAX_LINES = 500

E = "pairflow.engine"
PAIRS = f"{E}.pairs"
# The engine's layers, lowest first: a module imports only from its own layer or one below.
# A name is a module or a package (then every module under it); the longest name that matches
# a module places it.
LAYERS = [
    [f"{E}.errors"],
    [f"{E}.run"],
    # the shared vocabulary of all-pairs
    [f"{PAIRS}.{m}" for m in ("tiles", "space", "items", "app", "config", "codec", "result")],
    [f"{PAIRS}.sinks", f"{PAIRS}.cache"],
    [f"{PAIRS}.plan"],
    [f"{PAIRS}.workers"],
    # the run
    [PAIRS] + [f"{PAIRS}.{m}" for m in ("driver", "preflight", "membership", "summary",
                                         "validation", "session")],
    [f"{E}.pipeline", f"{E}.toolfarm"],
    [E],
    [f"{E}.testing"],  # conformance suites for tests: they may use the face
]
# layers whose parts are siblings: neither imports the other
SIBLINGS = [(f"{PAIRS}.sinks", f"{PAIRS}.cache"), (f"{E}.pipeline", f"{E}.toolfarm")]


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package] + parts)] = path
    return out


def imports(name: str, path: Path, known: dict) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = base
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                module = parent + ("." + node.module if node.module else "")
            else:
                module = node.module
            for alias in node.names:  # ``from pkg import module`` imports the module
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in known else module)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def place(name: str) -> tuple[int, str] | None:
    """(layer, the name in LAYERS that places it) by the longest matching name."""
    best = None
    for rank, names in enumerate(LAYERS):
        for n in names:
            if (name == n or name.startswith(n + ".")) and (best is None or len(n) > len(best[1])):
                best = (rank, n)
    return best


def test_no_import_circles_in_the_engine():
    found = [c for c in circles(graph()) if any(m.startswith(E + ".") or m == E for m in c)]
    assert not found, f"modules importing each other in a circle: {found}"


def test_no_import_circles_elsewhere_in_the_package():
    found = [c for c in circles(graph()) if not any(m.startswith(E + ".") or m == E for m in c)]
    assert not found, f"modules importing each other in a circle: {found}"


def test_the_engine_imports_only_down_its_layers():
    g = graph()
    engine = [m for m in g if m == E or m.startswith(E + ".")]
    unplaced = [m for m in engine if place(m) is None]
    assert not unplaced, f"engine modules in no layer (add them to LAYERS here): {unplaced}"
    up, across = [], []
    for m in sorted(engine):
        rank, home = place(m)
        for dep in sorted(g[m]):
            if not (dep == E or dep.startswith(E + ".")):
                continue
            dep_rank, dep_home = place(dep)
            if dep_rank > rank:
                up.append(f"{m} (layer {rank}) -> {dep} (layer {dep_rank})")
            if dep_rank == rank and {home, dep_home} in [set(s) for s in SIBLINGS]:
                across.append(f"{m} -> {dep}")
    assert not up, "imports running up the layers:\n" + "\n".join(up)
    assert not across, "imports between sibling parts of one layer:\n" + "\n".join(across)


def test_the_layer_checks_see_an_import_up_and_a_circle():
    """The checks above on planted graphs: an import up a layer and a circle are both caught."""
    vocabulary, worker = f"{PAIRS}.space", f"{PAIRS}.workers.actors"
    assert place(vocabulary)[0] < place(worker)[0]
    assert place(f"{PAIRS}.driver")[0] > place(worker)[0] > place(f"{PAIRS}.plan.sizing")[0]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    g = graph()  # the real graph has the edges the layers rely on, so the walk sees imports
    assert f"{PAIRS}.space" in g[f"{PAIRS}.sinks.base"]          # ``from ..space import``
    assert f"{PAIRS}.workers.actors" in g[f"{PAIRS}.workers.executor"]  # ``from . import actors``
    assert f"{PAIRS}.plan.simulate" in g[f"{PAIRS}.plan.sizing"]   # inside a function


def test_every_package_says_what_it_holds():
    """Each package's ``__init__.py`` opens with a paragraph that says what the package holds
    (more may follow it: engine/pairs/__init__.py goes on with its layers)."""
    missing = []
    for name, path in sorted(modules().items()):
        if path.name != "__init__.py" or name == "pairflow.configs":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if len(" ".join(doc.split("\n\n")[0].split())) < 60:
            missing.append(f"{path.relative_to(REPO)}: {doc[:60]!r}")
    assert not missing, "packages whose __init__ does not say what they hold:\n" + "\n".join(missing)


def test_every_module_is_under_500_lines():
    long = sorted(f"{path.relative_to(REPO)}: {n}" for path in modules().values()
                  if (n := len(path.read_text().splitlines())) >= MAX_LINES)
    assert not long, f"modules of {MAX_LINES} lines or more (split by concept):\n" + "\n".join(long)
