"""The launcher's old name, ``hydra/launcher=ray``: refused by the ``pairflow`` command, naming
the new one (``pairflow``), before anything runs; unless PyPI's hydra-ray-launcher, whose name
it is, is installed. ``apps.cli.main`` is called in-process: nothing here starts Ray."""
import importlib.util
import os

import pytest

from pairflow.apps.cli import main
from pairflow.apps.sweeps import refuse_old_launcher

THEIRS = "hydra_plugins.hydra_ray_launcher"


@pytest.mark.parametrize("argv", [
    ["-m", "data.k=15,21", "hydra/launcher=ray"],
    ["hydra/launcher=ray", "data.k=15"],
    ["-m", "hydra/launcher=basic,ray"],
])
def test_the_old_name_is_refused_naming_the_new_one(capsys, tmp_path, argv):
    # this project's environment does not install hydra-ray-launcher (README says why)
    assert importlib.util.find_spec(THEIRS) is None
    code = main([*argv, f"runs_root={tmp_path / 'runs'}"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("pairflow: error: hydra/launcher=ray: ")
    assert "now hydra/launcher=pairflow" in err and "hydra-ray-launcher" in err
    assert not os.path.exists(tmp_path / "runs")


def test_the_old_name_is_theirs_where_hydra_ray_launcher_is_installed(tmp_path, monkeypatch):
    """A ``hydra_plugins/hydra_ray_launcher`` package on the path (where that plugin installs
    itself): ``ray`` is its name, and pairflow leaves the choice to Hydra."""
    package = tmp_path / "hydra_plugins" / "hydra_ray_launcher"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.util.find_spec(THEIRS) is not None
    refuse_old_launcher(["-m", "hydra/launcher=ray"])  # no error
