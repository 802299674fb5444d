"""Shared fixtures for the unit tests, and the rule that unit tests never import Ray.

Real data comes from scripts/setup.sh; a test that needs it fails (does not skip) without it.

Unit tests check pure code: importing ``ray`` costs seconds and hides a module that should not
need it (policy, sizing, tiers, sinks are meant to run without Ray). So the run fails when
``ray`` is imported while tests/unit is collected (every test of the module whose import pulled
it in fails, naming the import chain) or while a unit test runs (that test fails). The check can
only see the first import: when another directory of the same session imported Ray first
(``pytest tests``), the collection half runs in a fresh interpreter instead, and the run-time
half applies when tests/unit runs on its own (``make test-fast``).
"""
from __future__ import annotations

import importlib.abc
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from pairflow.apps.data import data_root
from tests.conftest import need

REPO = Path(__file__).resolve().parents[2]
UNIT = Path(__file__).resolve().parent
SHARE = Path(data_root()) / "usr" / "share"  # PAIRFLOW_DATA, else the user data directory
RAGOUT = SHARE / "doc" / "ragout" / "examples"
LAMBDA = SHARE / "doc" / "bowtie2" / "examples" / "reference" / "lambda_virus.fa.gz"
KLEBSIELLA = SHARE / "kaptive" / "reference_database" / "Klebsiella_k_locus_primary_reference.gbk"


@pytest.fixture(scope="session")
def lambda_path() -> Path:
    return need(LAMBDA)


@pytest.fixture(scope="session")
def klebsiella_path() -> Path:
    return need(KLEBSIELLA)


@pytest.fixture(scope="session")
def ragout_path():
    """ragout_path("H.Pylori", "G27") -> path of that reference genome."""

    def get(species: str, strain: str) -> Path:
        return need(RAGOUT / species / "references" / f"{strain}.fasta.gz")

    return get


# -- no Ray in unit tests -----------------------------------------------------------------------

class RayImportWitness(importlib.abc.MetaPathFinder):
    """Records the chain of repository files that first imports ``ray``; loads nothing itself."""

    def __init__(self, repo: Path):
        self.repo = str(repo)
        self.chain: list[str] | None = None

    def find_spec(self, name, path=None, target=None):
        if name == "ray" and self.chain is None:
            here = os.path.abspath(__file__)
            self.chain = [f"{os.path.relpath(f.filename, self.repo)}:{f.lineno}"
                          for f in traceback.extract_stack()
                          if f.filename.startswith(self.repo) and f.filename != here
                          and "site-packages" not in f.filename]
        return None


WITNESS = RayImportWitness(REPO)
sys.meta_path.insert(0, WITNESS)

# Run in a fresh interpreter when this one already holds Ray: import each unit test module in
# turn (this conftest installs its witness first) and report the chain of the first to import Ray.
_FRESH_CHECK = """
import importlib.util, json, sys
sys.path.insert(0, {repo!r})
from tests.unit.conftest import WITNESS
for number, path in enumerate({paths!r}):
    spec = importlib.util.spec_from_file_location(f"unit_test_module_{{number}}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: dataclasses look their module up
    spec.loader.exec_module(module)
    if "ray" in sys.modules:
        break
print(json.dumps(WITNESS.chain))
"""


def _chain_text(chain) -> str:
    return " -> ".join(list(chain) + ["ray"])


def _offending_module(chain) -> str | None:
    """The unit test module at the root of an import chain (repository-relative path)."""
    for frame in chain:
        path = frame.rsplit(":", 1)[0]
        if (REPO / path).resolve().parent == UNIT and Path(path).name.startswith("test_"):
            return path
    return None


def _chain_in_fresh_interpreter(paths: list[str]):
    script = _FRESH_CHECK.format(repo=str(REPO), paths=paths)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    if out.returncode != 0:
        return [f"(a unit test module failed to import: {out.stderr.strip()[-500:]})"]
    return json.loads(out.stdout.strip().splitlines()[-1])


def pytest_collection_modifyitems(session, config, items):
    unit_items = [i for i in items if UNIT in Path(str(i.path)).resolve().parents]
    if not unit_items:
        return
    if "ray" not in sys.modules:
        return
    chain = WITNESS.chain
    if chain is None or _offending_module(chain) is None:  # imported by another directory
        chain = _chain_in_fresh_interpreter(sorted({str(i.path) for i in unit_items}))
    if not chain:
        return
    culprit = _offending_module(chain)
    message = f"tests/unit must not import ray; collecting it did: {_chain_text(chain)}"
    for item in unit_items:
        if culprit is None or os.path.relpath(str(item.path), REPO) == culprit:
            item.add_marker(pytest.mark.ray_imported(message))


@pytest.fixture(autouse=True)
def _no_ray_in_unit_tests(request):
    marker = request.node.get_closest_marker("ray_imported")
    if marker:
        pytest.fail(marker.args[0], pytrace=False)
    before = "ray" in sys.modules
    yield
    if not before and "ray" in sys.modules:
        pytest.fail(f"tests/unit must not import ray; {request.node.nodeid} did: "
                    f"{_chain_text(WITNESS.chain or [])}", pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "ray_imported(message): this unit module imports ray")
