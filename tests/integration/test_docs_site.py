"""The documentation site: built as its readers get it, and its tour run as written.

- ``mkdocs build --strict`` (warnings are errors: a broken link, a page missing from the
  navigation's files, a docstring mkdocstrings cannot render) into a fresh directory, and every
  public name of ``pairflow`` (``pairflow.__all__`` but ``__version__``) rendered in the API
  reference under its own heading with the first line of its docstring, read here from the
  object itself (a value's from the source line after its assignment) and found in the HTML.
- The tour page's Python blocks, each in a fresh interpreter outside the repository (the
  installed package, nothing put on ``sys.path``), with its result checked against numpy: the
  same approach as tests/integration/test_readme_tour.py takes with the README's tour.
"""
import ast
import html
import importlib.util
import inspect
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOUR = os.path.join(REPO, "docs", "tour.md")


def _hooks():
    """docs/hooks/site_hooks.py, for ``defined_at``: where a name of the face is defined."""
    spec = importlib.util.spec_from_file_location(
        "pairflow_docs_hooks", os.path.join(REPO, "docs", "hooks", "site_hooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _plain(text: str) -> str:
    """Text to compare a docstring line with its rendering: code marks, emphasis and every space
    dropped (the HTML puts spaces where tags were: ``<code>keys</code>,`` reads ``keys ,``)."""
    return re.sub(r"`+|\*+|\s+", "", text)


def _value_docstring(path: str) -> str | None:
    """The docstring of module attribute ``path`` (a string statement right after it)."""
    module_name, _, attr = path.rpartition(".")
    source = inspect.getsource(sys.modules[module_name])
    body = ast.parse(source).body
    for node, after in zip(body, body[1:]):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                    and isinstance(after.value.value, str):
                return after.value.value
            return None
    return None


def _first_line(name: str, path: str) -> str | None:
    import pairflow
    obj = getattr(pairflow, name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        doc = obj.__doc__  # its own: a class without one would show its base's
    else:
        doc = _value_docstring(path)
    doc = inspect.cleandoc(doc or "")
    return doc.split("\n\n")[0].splitlines()[0].strip() if doc.strip() else None


def _rendered(api_html: str) -> dict[str, str]:
    """Each top-level object of the API page: its heading's text -> the text of its entry."""
    parts = re.split(r'(<h3 id="[^"]*" class="doc doc-heading">)', api_html)
    out = {}
    for head, body in zip(parts[1::2], parts[2::2]):
        title, _, rest = body.partition("</h3>")
        name = _text(title).replace("¶", "").split()[0]
        out[name] = _text(rest)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    mkdocs = os.path.join(os.path.dirname(sys.executable), "mkdocs")
    proc = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-5000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-5000:]
    return out


def test_the_site_builds_strict_with_every_page(site):
    pages = {os.path.relpath(os.path.join(d, f), site) for d, _, files in os.walk(site)
             for f in files if f == "index.html"}
    for page in ("getting-started", "tour", "clusters", "dashboard", "run-directory",
                 "pipelines", "align", "architecture", "benchmarks", "api", "apps",
                 *(f"apps/{app}" for app in ("jaccard", "align", "phylogeny", "forensics",
                                             "microscopy", "hep", "jaccard_filtered",
                                             "synthetic", "farm"))):
        assert f"{page}/index.html" in pages, sorted(pages)


def test_every_public_name_has_its_docstring_rendered(site):
    import pairflow
    defined_at = _hooks().defined_at
    with open(os.path.join(site, "api", "index.html")) as fh:
        rendered = _rendered(fh.read())
    names = [n for n in pairflow.__all__ if n != "__version__"]
    assert len(names) > 30, names
    missing, undocumented = [], []
    for name in names:
        first = _first_line(name, defined_at(name))
        if first is None:
            undocumented.append(f"{name} ({defined_at(name)})")
        elif name not in rendered or _plain(first) not in _plain(rendered[name]):
            missing.append(f"{name}: {first!r}")
    assert not undocumented, f"public names without a docstring: {undocumented}"
    assert not missing, f"not rendered under its name in the API reference: {missing}"


# -- the tour ----------------------------------------------------------------------------------

def tour_blocks() -> list[tuple[str, str]]:
    with open(TOUR) as fh:
        return re.findall(r"^```(\w*)\n(.*?)^```", fh.read(), re.M | re.S)


TOUR_CHECKS = {
    # the REPL block: every pair's dot product, and the top 5 per item
    "pairflow.allpairs(list(vecs)": """
V = np.array([vecs[k] for k in vecs])
want = V @ V.T
got = res.matrix()
i, j = np.triu_indices(len(V), 1)
assert np.allclose(got[i, j], want[i, j], rtol=1e-12), "matrix"
top = res.topk
assert len(top) == 5 * len(V) and {"query", "target", "score", "rank"} <= set(top.columns)
off = want - np.diag(np.full(len(V), np.inf))
best = np.argsort(-off, axis=1)[:, :5]
names = list(vecs)
got = top.sort_values(["query", "rank"]).groupby("query")["target"].apply(list).to_dict()
assert all(got[names[q]] == [names[t] for t in best[q]] for q in range(len(V))), "top 5"
assert res.R >= 1.0 and os.path.isdir(res.run_dir)
print("checked")
""",
    # the session block: two runs on one Ray, each checked against the dot products
    "pairflow.session(": """
V = np.array([vecs[k] for k in vecs])
want = V @ V.T
i, j = np.triu_indices(len(V), 1)
assert np.allclose(first.matrix()[i, j], want[i, j], rtol=1e-12), "first run"
best = np.argsort(-(want - np.diag(np.full(len(V), np.inf))), axis=1)[:, :3]
names = list(vecs)
got = again.topk.sort_values(["query", "rank"]).groupby("query")["target"].apply(list).to_dict()
assert all(got[names[q]] == [names[t] for t in best[q]] for q in range(len(V))), "top 3"
import json
assert json.load(open(os.path.join(again.run_dir, "summary.json")))["executor"] == "ray"
print("checked")
""",
    # queries x targets: the 3 smallest L1 distances of each query, by brute force
    "targets=list(targets)": """
Q = np.array([queries[k] for k in queries]); T = np.array([targets[k] for k in targets])
dist = np.abs(Q[:, None, :] - T[None, :, :]).sum(axis=2)
top = res.topk
assert len(top) == 3 * len(Q) and set(top["query"]) == set(queries)
tnames = list(targets)
for q, name in enumerate(queries):
    rows = top[top["query"] == name].sort_values("rank")
    assert list(rows["target"]) == [tnames[t] for t in np.argsort(dist[q], kind="stable")[:3]]
    assert np.allclose(rows["score"], np.sort(dist[q])[:3], rtol=1e-12)
print("checked")
""",
    # the pipeline block: the survivors counted by hand, every operator in the cutflow
    "Pipeline(": """
want = int(((d["x"] ** 2 > 1.0) & (d["y"] % 2 == 0)).sum())
assert res.n_selected == want, (res.n_selected, want)
assert {"x2", "far", "even"} <= set(res.cutflow["op"])
print("checked")
""",
}


def _tour_env() -> dict:
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    for key in ("PAIRFLOW_DEBUG", "RAY_ADDRESS", "PYTHONPATH"):
        env.pop(key, None)
    return env


@pytest.mark.ray
def test_the_tour_pages_python_runs_as_written(tmp_path):
    blocks = [body for lang, body in tour_blocks() if lang == "python"]
    assert len(blocks) >= 3, "the tour has lost its Python blocks"
    for body in blocks:
        assert re.search(r"^(import pairflow|from pairflow[\w.]* import )", body, re.M), body
        assert not re.search(r"^\s*(from|import) (engine|apps|operators|kernels)\b", body,
                             re.M), f"a tour block imports an old top-level name:\n{body}"
        checks = [check for marker, check in TOUR_CHECKS.items() if marker in body]
        assert len(checks) == 1, f"a tour Python block without one check:\n{body}"
        code = "import os\n" + body + "\n" + checks[0]
        out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_tour_env(),
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (body, out.stdout[-2000:], out.stderr[-3000:])
        assert out.stdout.strip().endswith("checked"), out.stdout[-2000:]
