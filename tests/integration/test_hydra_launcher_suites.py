"""Hydra's own launcher conformance suites against pairflow's launcher (hydra/launcher=pairflow).

``hydra.test_utils.launcher_common_tests`` is what every launcher in Hydra's repository runs
(the basic, joblib, Ray and submitit launchers): ``LauncherTestSuite`` sweeps Hydra's test
apps in this process (a task's return value must come back as its result, the sweep and job
directories as Hydra lays them out, custom resolvers in the jobs); ``IntegrationTestSuite``
runs generated Hydra apps as programs (job names, ``hydra.job.chdir`` into each job's sweep
subdirectory, ``get_original_cwd`` and ``to_absolute_path`` against the launch directory).
Their oracle is Hydra's own expectation of any launcher; none imports pairflow.

One local Ray for all of it, on 127.0.0.1 with 2 CPUs (tests/integration/conftest.py's
``ray_local``): the in-process sweeps use it, and each integration app's launcher joins it by
address (``hydra.launcher.address``) instead of starting a Ray of its own.
"""
from __future__ import annotations

import os

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_local")]
NAME = "pairflow"  # the launcher's config name (hydra/launcher=pairflow), written out


@pytest.fixture(autouse=True)
def fresh_hydra(hydra_restore_singletons):
    """Each case as in a fresh process, as Hydra's own suites run: no version base set (an
    earlier test of this process that composed pairflow's config set 1.3, under which a job
    does not change into its sweep directory, and the suites' directory checks fail), and
    Hydra's singletons restored afterwards."""
    from hydra.version import _UNSPECIFIED_, VersionBase
    VersionBase.instance().version_base = _UNSPECIFIED_


@pytest.fixture(scope="module")
def ray_address(ray_local) -> str:
    import ray
    return ray.get_runtime_context().gcs_address


def test_hydra_discovers_the_launcher_under_its_name():
    """Hydra finds the launcher among its plugins, and its config under hydra/launcher."""
    from hydra.core.config_store import ConfigStore
    names = [cls.__name__ for cls in Plugins.instance().discover(Launcher)]
    assert "PairflowRayLauncher" in names, names
    node = ConfigStore.instance().load(f"hydra/launcher/{NAME}.yaml").node
    assert node._target_.endswith(".PairflowRayLauncher")


@pytest.mark.usefixtures("hydra_restore_singletons")
def test_a_job_whose_worker_dies_fails_the_sweep_naming_it(hydra_sweep_runner, tmpdir, capsys):
    """Beyond Hydra's suites: a job that never returns (its Ray worker died) is a failed job
    whose error is Ray's, raised by Hydra's sweeper after it named the job's overrides; the
    sweep's other job still ran."""
    import ray

    def task(cfg):
        if cfg.a == 1:
            os._exit(3)
        return cfg.a

    sweep = hydra_sweep_runner(calling_file=None, calling_module="hydra.test_utils.a_module",
                               task_function=task, config_path="configs",
                               config_name="compose.yaml",
                               overrides=[f"hydra/launcher={NAME}", "+a=0,1"], temp_dir=tmpdir)
    with pytest.raises(ray.exceptions.WorkerCrashedError):
        with sweep:
            pass
    assert "Error executing job with overrides: ['+a=1']" in capsys.readouterr().err
    assert (tmpdir / "0" / ".hydra" / "config.yaml").exists()


@pytest.mark.parametrize("launcher_name, overrides", [(NAME, [])])
class TestPairflowLauncher(LauncherTestSuite):
    """Hydra's launcher suite, in this process, on the local Ray."""


class TestPairflowLauncherIntegration(IntegrationTestSuite):
    """Hydra's integration suite: each case a generated Hydra app, run as a program, whose
    config chooses the launcher and whose sweep's jobs run on the local Ray."""

    @pytest.fixture
    def task_launcher_cfg(self) -> dict:
        return {"defaults": [{"override hydra/launcher": NAME}]}

    @pytest.fixture
    def extra_flags(self, ray_address) -> list[str]:
        return ["-m", f"hydra.launcher.address={ray_address}"]
