"""pairflow as a user installs it: the wheel built from this checkout, installed into a fresh
virtualenv outside the repository, run from another directory with nothing of the checkout on
``sys.path``. With ``[all]``: the import, the site-packages layout (one ``pairflow``, plus the
``hydra_plugins`` Hydra needs), ``pairflow --help``, the README's Python tour, a real run on a
small FASTA checked against k-mer sets counted here, and ``pairflow`` without data (one line).
The core alone: the default app runs, and ``app=hep`` stops with the line that names its extra.

The wheel is built from a copy of what it packages (pyproject.toml, README.md, the package
folders), so a build leaves nothing in the checkout and no earlier build's files reach it. uv
installs from its cache (filled by scripts/setup.sh), in seconds; torch is in no extra installed
here (pyproject.toml: [all] leaves it out).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_readme_tour import PYTHON_CHECKS, tour_blocks

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
# what the wheel is built from (tests/unit/test_packaging.py: every package folder is listed)
SOURCES = ("pyproject.toml", "README.md", "pairflow", "engine", "apps", "kernels", "operators",
           "dashboard", "configs", "hydra_plugins")
OLD_TOP_LEVEL = {"engine", "apps", "kernels", "operators", "configs", "dashboard"}
HEP_LINE = "pairflow: error: app=hep needs pairflow's hep extra: pip install 'pairflow[hep]'"

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def _outside_repo(path: Path) -> Path:
    assert not path.resolve().is_relative_to(REPO), f"{path} is inside the repository"
    return path


def _env(data: Path) -> dict:
    """A user's environment: nothing of the checkout or of the suite's virtualenv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PAIRFLOW_DEBUG", "RAY_ADDRESS",
                        "PYTHONSTARTUP", "PYTHONDONTWRITEBYTECODE")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(REPO)))
    env.update(PAIRFLOW_DATA=str(data), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    return env


def _run(argv, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not UV.exists():
        pytest.fail(f"{UV} not found; run scripts/setup.sh (make setup), which installs it",
                    pytrace=False)
    root = _outside_repo(tmp_path_factory.mktemp("build"))
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    out = _run([UV, "build", "--wheel", "--out-dir", root / "dist", src], cwd=root,
               env=_env(root), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    wheels = list((root / "dist").glob("pairflow-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _venv(where: Path, requirement: str) -> Path:
    """A fresh virtualenv at ``where`` with ``requirement`` installed by uv; its bin folder."""
    _outside_repo(where)
    env = _env(where)
    out = _run([UV, "venv", "-q", "--python", sys.executable, where], cwd=where.parent, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    out = _run([UV, "pip", "install", "-q", "--python", where / "bin" / "python", requirement],
               cwd=where.parent, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return where / "bin"


@pytest.fixture(scope="module")
def user(tmp_path_factory):
    """A working directory and an empty data directory, both outside the repository."""
    home = _outside_repo(tmp_path_factory.mktemp("user"))
    (home / "work").mkdir()
    (home / "data").mkdir()
    return home / "work", _env(home / "data")


# -- an independent oracle: canonical k-mer sets counted in plain Python ------------------------

def _canonical_kmers(seq: str, k: int) -> set[str]:
    rc = seq.translate(str.maketrans("ACGT", "TGCA"))[::-1]
    n = len(seq) - k + 1
    return {min(seq[i:i + k], rc[n - 1 - i:n - 1 - i + k]) for i in range(n)}


def _genomes(where: Path) -> dict[str, str]:
    """Three small genomes sharing parts of one sequence (Jaccards neither 0 nor 1, all
    different), written as FASTA; {name: sequence}."""
    rng = random.Random(61)
    shared = "".join(rng.choice("ACGT") for _ in range(400))
    seqs = {}
    for n, name in enumerate(("alpha", "beta", "gamma")):
        seqs[name] = shared[:400 - 90 * n] + "".join(rng.choice("ACGT") for _ in range(150 + 60 * n))
        (where / f"{name}.fa").write_text(f">{name} a test genome\n{seqs[name]}\n")
    return seqs


def _check_jaccard_run(bin_: Path, work: Path, env: dict, tag: str) -> None:
    """``pairflow data.inputs=...`` on three small FASTA files: its dense matrix is every
    pair's Jaccard of canonical 7-mers and their intersection, as counted here."""
    import numpy as np
    import zarr
    genomes = work / f"genomes-{tag}"
    genomes.mkdir()
    seqs = _genomes(genomes)
    run_dir = work / f"run-{tag}"
    out = _run([bin_ / "pairflow", f"data.inputs={genomes}/*.fa", "data.k=7",
                f"run_dir={run_dir}", "progress=false"], cwd=work, env=env)
    assert out.returncode == 0, (out.stdout[-2000:], out.stderr[-3000:])
    summary = json.loads((run_dir / "summary.json").read_text())
    group = zarr.open_group(summary["outputs"]["dense"], mode="r")
    keys = list(group.attrs["row_keys"])
    assert sorted(keys) == sorted(seqs)
    sets = [_canonical_kmers(seqs[key], 7) for key in keys]
    similarity, intersection = group["similarity"][...], group["intersection"][...]
    for i in range(len(keys)):
        for j in range(i + 1, len(keys)):
            inter = len(sets[i] & sets[j])
            assert intersection[i, j] == inter, (keys[i], keys[j])
            assert np.isclose(similarity[i, j], inter / len(sets[i] | sets[j]), rtol=1e-12)


# -- pairflow[all] ------------------------------------------------------------------------------

def test_the_wheel_with_all_extras_works_outside_the_checkout(wheel, user, tmp_path_factory):
    work, env = user
    bin_ = _venv(tmp_path_factory.mktemp("venv-all") / "venv", f"{wheel}[all]")
    python = bin_ / "python"

    # import pairflow: the installed one
    out = _run([python, "-c", "import pairflow, sysconfig; print(pairflow.__file__); "
                "print(sysconfig.get_paths()['purelib'])"], cwd=work, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    where, purelib = out.stdout.split()
    assert Path(where) == Path(purelib) / "pairflow" / "__init__.py"

    # site-packages: pairflow and hydra_plugins, none of the checkout's folder names
    site = Path(purelib)
    assert not OLD_TOP_LEVEL & {p.name for p in site.iterdir()}, sorted(site.iterdir())
    record = next(site.glob("pairflow-*.dist-info")) / "RECORD"
    tops = {line.split("/", 1)[0] for line in record.read_text().splitlines()
            if "/" in line and ".dist-info/" not in line and not line.startswith("../")}
    assert tops == {"pairflow", "hydra_plugins"}, tops

    # Hydra finds pairflow's launcher among its plugins (hydra/launcher=pairflow)
    out = _run([python, "-c", "from hydra.core.plugins import Plugins; "
                "from hydra.plugins.launcher import Launcher; "
                "print(sorted(c.__name__ for c in Plugins.instance().discover(Launcher)))"],
               cwd=work, env=env)
    assert out.returncode == 0 and "PairflowRayLauncher" in out.stdout, out.stderr[-3000:]

    # the AVX-512 kernel's extension was compiled into the wheel and loads where the CPU runs it
    # (tests/unit/test_sw_simd.py reads the CPU's flags the same way)
    from tests.unit.test_sw_simd import CPU_HAS_IT
    out = _run([python, "-c", "from pairflow.kernels import sw_simd; "
                "print(sw_simd._lib() is not None)"], cwd=work, env=env)
    assert out.returncode == 0 and out.stdout.split() == [str(CPU_HAS_IT)], out.stderr[-3000:]

    # pairflow --help
    out = _run([bin_ / "pairflow", "--help"], cwd=work, env=env)
    assert out.returncode == 0 and out.stdout.startswith("pairflow:"), out.stderr[-3000:]
    assert "usage: pairflow" in out.stdout

    # the README's Python tour, each block with the check test_readme_tour.py gives it
    blocks = [body for lang, body in tour_blocks() if lang == "python"]
    assert blocks, "the README's tour has no Python block"
    for body in blocks:
        checks = [c for marker, c in PYTHON_CHECKS.items() if marker in body]
        assert len(checks) == 1, f"a tour Python block without one check:\n{body}"
        out = _run([python, "-c", body + "\n" + checks[0]], cwd=work, env=env, timeout=600)
        assert out.returncode == 0, (body, out.stdout[-2000:], out.stderr[-3000:])
        assert out.stdout.strip().endswith("checked"), out.stdout[-2000:]

    # a real run on a small FASTA
    _check_jaccard_run(bin_, work, env, "all")

    # pairflow without data: one line that says how to get them, and a non-zero exit
    out = _run([bin_ / "pairflow"], cwd=work, env=env)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode != 0, out.stdout[-2000:]
    assert len(lines) == 1 and "pairflow data install" in lines[0], lines


# -- the core alone -----------------------------------------------------------------------------

def test_the_core_alone_runs_the_default_app_and_names_a_missing_extra(wheel, user,
                                                                       tmp_path_factory):
    work, env = user
    bin_ = _venv(tmp_path_factory.mktemp("venv-core") / "venv", str(wheel))
    site = next((bin_.parent / "lib").glob("python3*/site-packages"))
    assert not (site / "uproot").exists() and not (site / "scipy").exists()

    _check_jaccard_run(bin_, work, env, "core")

    here = work / "hep"
    here.mkdir()
    out = _run([bin_ / "pairflow", "app=hep"], cwd=here, env=env)
    assert out.returncode == 2, (out.stdout[-2000:], out.stderr[-3000:])
    assert out.stdout == "" and out.stderr.splitlines() == [HEP_LINE], out.stderr[-3000:]
    assert list(here.iterdir()) == []  # before any work: no run directory, no outputs/
