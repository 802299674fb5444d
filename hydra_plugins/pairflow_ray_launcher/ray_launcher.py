"""``hydra/launcher=pairflow``: a multirun's jobs as Ray tasks on the cluster ``cluster`` names.

Its name is pairflow's, not ``ray``: Hydra finds every launcher installed beside it, and ``ray``
is the name PyPI's ``hydra-ray-launcher`` registers (with both installed, one would silently
win). Why our own and not that one: it pins ``cloudpickle<3`` (dask needs >= 3), asks each job
task for a CPU by default (the run's own load tasks then wait behind the jobs that hold them)
and runs a job wherever Ray puts it (its run directory and its relative paths then belong to
whichever node and working directory that was).

Here a job is a task that asks for no CPU (the run's actors and load tasks take the cores), is
pinned to the node the sweep was launched from and starts in the launcher's working directory:
each job is a pairflow driver on the submitting machine with its own run directory under
``hydra.sweep.dir``, exactly as the basic launcher would leave it, while its actors use the
whole cluster. Jobs run concurrently (``max_concurrent`` limits them) and share the cluster's
resources.

It keeps Hydra's launcher contract, for any task function (tests/integration/
test_hydra_launcher_suites.py runs Hydra's own launcher suites against it): a task's return
value is the job's result, a job failed when its task raised (Hydra's sweeper then raises that
error), ``hydra.job.chdir`` and ``hydra.utils.get_original_cwd``/``to_absolute_path`` behave as
under the basic launcher. pairflow's own task raises when its run failed (apps/sweeps.py), so a
failed run fails the sweep, naming the job; the launcher names every failed job in its log.

Hydra imports this module when it scans for plugins, so it must not import Ray: ``_core``
does, when a sweep is launched. No ``from __future__ import annotations`` here: Hydra runs
this module without registering it in ``sys.modules``, where ``dataclass`` would look up
string annotations.
"""
from dataclasses import dataclass
from typing import Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class PairflowRayLauncherConf:
    _target_: str = "hydra_plugins.pairflow_ray_launcher.ray_launcher.PairflowRayLauncher"
    # the cluster the runs use (cluster=ray cluster.ray_address=HOST:PORT); null: a Ray started
    # here, as cluster=local would
    address: Optional[str] = "${oc.select:cluster.ray_address,null}"
    num_cpus: Optional[int] = "${oc.select:cluster.num_cpus,null}"  # type: ignore[assignment]
    object_store_mb: Optional[int] = "${oc.select:cluster.object_store_mb,null}"  # type: ignore
    max_concurrent: Optional[int] = None  # jobs running at once; null: every job of the sweep
    on_driver_node: bool = True  # run each job's driver on the node the sweep was launched from


# its name (apps/sweeps.py refuses the old one, ``ray``, naming this one)
NAME = "pairflow"
ConfigStore.instance().store(group="hydra/launcher", name=NAME, node=PairflowRayLauncherConf,
                             provider="pairflow")


class PairflowRayLauncher(Launcher):
    def __init__(self, address: Optional[str] = None, num_cpus: Optional[int] = None,
                 object_store_mb: Optional[int] = None, max_concurrent: Optional[int] = None,
                 on_driver_node: bool = True) -> None:
        self.address, self.num_cpus, self.object_store_mb = address, num_cpus, object_store_mb
        self.max_concurrent, self.on_driver_node = max_concurrent, on_driver_node
        self.config: Optional[DictConfig] = None
        self.hydra_context: Optional[HydraContext] = None
        self.task_function: Optional[TaskFunction] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        from . import _core
        return _core.launch(self, job_overrides, initial_job_idx)
