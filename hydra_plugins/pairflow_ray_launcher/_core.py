"""The Ray side of ``hydra/launcher=pairflow`` (ray_launcher.py says what it does and why)."""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, \
    setup_globals
from omegaconf import open_dict

log = logging.getLogger(__name__)


def run_one_job(hydra_context, sweep_config, task_function, singleton_state, cwd: str | None):
    """One job of the sweep, in a Ray worker: Hydra's state as the launcher had it (its
    singletons and OmegaConf's resolvers), the launcher's working directory, then Hydra's
    ``run_job``, which makes the job's output directory (relative to that working directory,
    as the basic launcher's), moves into it when ``hydra.job.chdir`` says so and turns a task's
    exception into a failed ``JobReturn``. The working directory is restored afterwards: the
    worker process serves other tasks later."""
    setup_globals()
    Singleton.set_state(singleton_state)
    HydraConfig.instance().set_config(sweep_config)
    before = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return run_job(hydra_context=hydra_context, task_function=task_function,
                       config=sweep_config, job_dir_key="hydra.sweep.dir",
                       job_subdir_key="hydra.sweep.subdir")
    finally:
        os.chdir(before)


def _collect(ref, overrides: Sequence[str]) -> JobReturn:
    """A job's ``JobReturn``. A job that never returned one (its worker died, Ray could not run
    its task) is a failed job whose error is Ray's: Hydra's sweeper raises it, as it raises the
    exception of a task that failed, naming the job's overrides."""
    import ray
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=err)


def launch(launcher, job_overrides: Sequence[Sequence[str]],
           initial_job_idx: int) -> Sequence[JobReturn]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from pairflow.engine.run.runtime import init_ray

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    init_ray(launcher.address, launcher.num_cpus, launcher.object_store_mb)
    options: dict[str, Any] = {"num_cpus": 0, "max_retries": 0}  # the run's actors take the CPUs
    cwd = None
    if launcher.on_driver_node:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(
            ray.get_runtime_context().get_node_id(), soft=False)
        cwd = os.getcwd()
    job = ray.remote(run_one_job).options(**options)
    log.info(f"Ray launcher: {len(job_overrides)} jobs on {ray.get_runtime_context().gcs_address}"
             f", sweep output dir: {sweep_dir}")
    state = ray.put(Singleton.get_state())
    context = ray.put(launcher.hydra_context)
    task = ray.put(launcher.task_function)
    limit = launcher.max_concurrent or len(job_overrides)
    refs: list = [None] * len(job_overrides)
    described: list[str] = []
    running: list = []
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        described.append(" ".join(filter_overrides(overrides)))
        log.info(f"\t#{idx} : {described[-1]}")
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(
            config, list(overrides))
        with open_dict(sweep_config):
            # the job's number as the basic launcher gives it (hydra.sweep.subdir names it);
            # its id says which launcher ran it
            sweep_config.hydra.job.id = f"ray_{idx}"
            sweep_config.hydra.job.num = idx
        while len(running) >= limit:
            _, running = ray.wait(running, num_returns=1)
        refs[i] = job.remote(context, sweep_config, task, state, cwd)
        running.append(refs[i])
    results = [_collect(ref, overrides) for ref, overrides in zip(refs, job_overrides)]
    # Hydra's sweeper raises the first failed job's error; every failed job is named here
    failed = [f"#{initial_job_idx + i} ({described[i]}): {ret._return_value}"
              for i, ret in enumerate(results) if ret.status == JobStatus.FAILED]
    if failed:
        log.error(f"{len(failed)} of {len(results)} jobs of the sweep failed: "
                  + "; ".join(failed) + f" (their logs are under {sweep_dir})")
    return results
