"""The data directory: where it is (``PAIRFLOW_DATA``, else the platform's user data directory,
never the package or the checkout), ``pairflow`` without data (one line, non-zero, no run
directory), and ``pairflow data install`` filling a directory idempotently.

What the install test covers, honestly: the Debian step from ``.deb`` files already on disk
(hard links of the ones the machine's data directory holds, so nothing is downloaded: the
``apt-get download`` call itself is not exercised here), the simulated sets made in full, and
the proteomes' stamp check plus one genome predicted (not all 16: minutes of CPU). The oracle
is the machine's own data directory, made by the setup of an earlier commit (the former
scripts): the same bytes.
"""
from __future__ import annotations

import filecmp
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pairflow.apps.data import (NoDataError, check_inputs, data_dir, data_path, data_root,
                                dataset_path, expand_inputs)
from pairflow.engine import InputError
from tests.conftest import need, need_program

REAL = data_dir()  # the machine's data directory, as the suite's environment resolves it


def _pairflow(*args, data: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PAIRFLOW_DATA": str(data), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("PAIRFLOW_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "pairflow", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


# ------------------------------------------------------------------ where the directory is

def test_pairflow_data_names_the_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("PAIRFLOW_DATA", str(tmp_path / "d"))
    assert data_dir() == str(tmp_path / "d")
    assert data_root() == str(tmp_path / "d" / "root")
    assert data_path("/usr/share/x.fa") == str(tmp_path / "d" / "root" / "usr/share/x.fa")
    assert dataset_path("cameras") == str(tmp_path / "d" / "cameras")
    monkeypatch.setenv("PAIRFLOW_DATA", "~/somewhere")  # a user's ~ is expanded
    assert data_dir() == os.path.join(os.path.expanduser("~"), "somewhere")


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG rule is Linux's")
def test_default_is_the_xdg_user_data_directory(monkeypatch, tmp_path):
    """The XDG Base Directory rule: $XDG_DATA_HOME/pairflow, else ~/.local/share/pairflow;
    nowhere near the installed package or the checkout."""
    monkeypatch.delenv("PAIRFLOW_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == str(tmp_path / "xdg" / "pairflow")
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_dir() == str(tmp_path / "home" / ".local" / "share" / "pairflow")
    import pairflow
    package = os.path.dirname(os.path.dirname(os.path.abspath(pairflow.__file__)))
    assert not data_dir().startswith(package + os.sep)


def test_every_default_input_lies_in_the_data_directory(monkeypatch, tmp_path):
    """The apps' and farms' default inputs resolve inside PAIRFLOW_DATA, wherever it is."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pairflow.apps.cli import CONFIG_DIR
    from pairflow.apps.data import INPUT_KEYS
    from pairflow.apps.resolvers import register_resolvers
    monkeypatch.setenv("PAIRFLOW_DATA", str(tmp_path))
    register_resolvers()
    choices = [["app=jaccard"], ["app=jaccard_filtered"], ["app=align"], ["app=phylogeny"],
               ["app=forensics"], ["app=microscopy"], ["app=farm", "farm=blastp"],
               ["app=farm", "farm=clustalo"], ["app=farm", "farm=hmmsearch"]]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        for overrides in choices:
            cfg = compose(config_name="config", overrides=overrides)
            values = [OmegaConf.select(cfg, k) for k in INPUT_KEYS]
            paths = [v for v in values if isinstance(v, str)]
            assert paths, overrides
            for path in paths:
                assert path.startswith(str(tmp_path) + os.sep), (overrides, path)
                assert "/../" not in path, path


# ------------------------------------------------------------------ without data

ONE_LINE = "run 'pairflow data install' to fetch the example data, or name inputs: pairflow "


@pytest.mark.parametrize("args, key", [
    ((), "data.inputs"), (("app=align",), "data.queries"), (("app=phylogeny",), "data.inputs"),
    (("app=forensics",), "data.inputs"), (("app=microscopy",), "data.inputs"),
    (("app=farm",), "farm.queries"),
])
def test_pairflow_without_data_says_so_in_one_line(tmp_path, args, key):
    empty, cwd = tmp_path / "empty", tmp_path / "cwd"
    empty.mkdir()
    cwd.mkdir()
    out = _pairflow(*args, data=empty, cwd=cwd)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert f"no input data in {empty}: " in lines[0] and ONE_LINE + key + "=" in lines[0], \
        lines[0]
    assert out.stdout == ""
    assert os.listdir(cwd) == []  # stopped before any work: not even a run directory


def test_a_missing_set_is_named_when_the_rest_is_installed(monkeypatch, tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "particles").mkdir()
    monkeypatch.setenv("PAIRFLOW_DATA", str(tmp_path))
    with pytest.raises(NoDataError) as err:
        expand_inputs(str(tmp_path / "cameras" / "*.jpg"))
    assert f"no input data in {tmp_path / 'cameras'}: " in str(err.value)
    assert "data.inputs='my/*.jpg'" in str(err.value)
    # Ray pickles errors between processes: the message survives
    again = pickle.loads(pickle.dumps(err.value))
    assert type(again) is NoDataError and str(again) == str(err.value)
    assert isinstance(again, InputError)


def test_inputs_a_user_names_are_left_alone(monkeypatch, tmp_path):
    monkeypatch.setenv("PAIRFLOW_DATA", str(tmp_path / "empty"))
    mine = tmp_path / "g.fa"
    mine.write_text(">a\nACGT\n")
    assert expand_inputs(str(mine)) == [str(mine)]
    with pytest.raises(InputError) as err:
        expand_inputs(str(tmp_path / "nothing" / "*.fa"))
    assert not isinstance(err.value, NoDataError)
    assert "no input file matches this pattern" in str(err.value)
    from omegaconf import OmegaConf
    check_inputs(OmegaConf.create({"data": {"inputs": str(tmp_path / "nothing/*.fa")}}))


# ------------------------------------------------------------------ data install

def _files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file()}


def test_data_install_fills_a_directory_once(tmp_path):
    from pairflow.apps.data_install import DEB_GROUPS
    need_program("dpkg-deb")
    real = Path(REAL)
    debs = tmp_path / "data" / "debs"
    debs.mkdir(parents=True)
    for packages in DEB_GROUPS.values():
        for package in packages:
            found = sorted((real / "debs").glob(f"{package}_*.deb"))
            assert found, f"{package}: no .deb in {need(real / 'debs')}"
            os.link(found[-1], debs / found[-1].name)
    linked = sorted(os.listdir(debs))
    data, cwd = tmp_path / "data", tmp_path / "cwd"
    cwd.mkdir()
    # the proteomes as the former setup made them, stamp included: current for these genomes
    shutil.copytree(need(real / "proteomes"), data / "proteomes")
    first = _pairflow("data", "install", data=data, cwd=cwd)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(data)
    said = first.stderr
    assert "debs: unpacked 4 packages" in said and "debs-farm: unpacked 2 packages" in said, said
    assert "proteomes: up to date" in said and "cameras: made" in said, said
    assert "particles: made" in said, said
    assert (data / ".stamp-debs").exists() and (data / ".stamp-debs-farm").exists()
    # the unpacked tree and the simulated sets: the bytes of the machine's data directory
    mine, theirs = _files(data / "root"), _files(real / "root")
    assert set(mine) == set(theirs)
    assert all(filecmp.cmp(mine[k], theirs[k], shallow=False) for k in mine)
    for name in ("cameras", "particles"):
        made, ref = _files(data / name), _files(real / name)
        made.pop(".stamp"), ref.pop(".stamp", None)
        assert set(made) == set(ref) and len(made) > 20, name
        assert all(filecmp.cmp(made[k], ref[k], shallow=False) for k in made), name
    assert sorted(os.listdir(debs)) == linked  # nothing fetched

    before = {k: p.stat().st_mtime_ns for k, p in _files(data).items()}
    second = _pairflow("data", "install", data=data, cwd=cwd)
    assert second.returncode == 0, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 5 and all(line.endswith(": up to date") for line in lines), lines
    assert {k: p.stat().st_mtime_ns for k, p in _files(data).items()} == before
    assert os.listdir(cwd) == []

    where = _pairflow("data", "where", data=data, cwd=cwd)
    assert where.returncode == 0 and where.stdout == f"{data}\n"


def test_one_proteome_predicted_again_is_the_same(tmp_path):
    """The proteome step's worker on the smallest genome, against the setup's own output."""
    from pairflow.apps.datasets import GENOMES, _predict_one
    genomes = sorted(Path(REAL).glob(os.path.join("root", GENOMES)), key=os.path.getsize)
    genome = need(genomes[0]) if genomes else need(Path(REAL) / "root" / GENOMES)
    species = genome.parent.parent.name
    strain = genome.name.removesuffix(".fasta.gz")
    out = tmp_path / f"{strain}.faa"
    _, n_genes = _predict_one(str(genome), str(out))
    ref = need(Path(REAL) / "proteomes" / species / f"{strain}.faa")
    assert filecmp.cmp(out, ref, shallow=False)
    assert n_genes == ref.read_text().count(">") > 1000


def test_what_cannot_be_made_here_is_skipped_in_one_line(tmp_path):
    """A derived set whose extra is missing (absent as Python records it: ``sys.modules[name] =
    None``), and Debian packages on a machine without apt (an empty PATH): one line each, the
    rest made, exit 0."""
    code = ("import sys; sys.modules['skimage'] = None; sys.modules['pyrodigal'] = None\n"
            "from pairflow.apps.cli import main\n"
            "sys.exit(main(['data', 'install']))")
    (tmp_path / "bin").mkdir()
    env = {**os.environ, "PAIRFLOW_DATA": str(tmp_path / "data"), "PATH": str(tmp_path / "bin")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.strip().splitlines()
    assert lines[0].startswith("pairflow data: debs: skipped: no apt-get here to fetch "
                               "ragout-examples kaptive-data"), lines
    assert lines[1].startswith("pairflow data: debs-farm: skipped: no apt-get here"), lines
    assert lines[2] == ("pairflow data: proteomes: skipped: it needs pairflow's phylogeny extra "
                        "(pip install 'pairflow[phylogeny]')"), lines
    assert lines[3] == ("pairflow data: cameras: skipped: it needs pairflow's imaging extra "
                        "(pip install 'pairflow[imaging]')"), lines
    assert lines[4].startswith("pairflow data: particles: made in "), lines
    assert sorted(os.listdir(tmp_path / "data")) == ["particles"]


def test_a_failed_download_is_said_and_the_rest_still_made(tmp_path):
    """apt on a machine whose package lists are empty (a fresh container before apt-get
    update; here APT_CONFIG points apt at an empty lists folder): each group's line names apt's
    own error and the cure, the derived set is still made, the exit is non-zero."""
    need_program("apt-get")
    (tmp_path / "lists" / "partial").mkdir(parents=True)
    (tmp_path / "apt.conf").write_text(f'Dir::State::Lists "{tmp_path / "lists"}";\n')
    env = {**os.environ, "PAIRFLOW_DATA": str(tmp_path / "data"),
           "APT_CONFIG": str(tmp_path / "apt.conf")}
    out = subprocess.run([sys.executable, "-m", "pairflow", "data", "install", "--only", "debs",
                          "particles"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    for line in lines[:2]:
        assert ": failed: apt-get download " in line and "Unable to locate package" in line
        assert line.endswith("(are the package lists there? sudo apt-get update)"), line
    assert lines[2].startswith("pairflow data: particles: made in "), lines
    assert not (tmp_path / "data" / ".stamp-debs").exists()
