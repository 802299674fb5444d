"""pairflow's side of a Hydra multirun (``pairflow -m ...``): what a failed job tells its
launcher, and the launcher's old name refused.

Hydra's launcher contract: a job's task function returns the job's result, and a job failed
when its task raised; the sweeper then raises that job's error. A pairflow run reports its own
failure (one line, or the traceback with ``-v``) and ends with an exit code, so in a multirun a
non-zero code is raised as ``SweepJobFailed``: every launcher (the basic one, pairflow's Ray
launcher, anyone's) then fails the sweep naming the job, instead of reading every task's
return value as an exit code. Imported where the CLI hands over to Hydra (it imports Hydra).
"""
from __future__ import annotations

from hydra.errors import CompactHydraException

from pairflow.engine import PairflowError

OLD_LAUNCHER = "ray"  # hydra/launcher=ray was pairflow's launcher; hydra-ray-launcher's name


class SweepJobFailed(PairflowError, CompactHydraException):
    """A job of a sweep whose run failed. Hydra prints it without a traceback (a
    ``CompactHydraException``): the run's own error, traceback included with ``-v``, was
    reported by the job."""


def job_failed(code: int) -> SweepJobFailed:
    """The error of the running sweep job whose run ended with exit code ``code``: its number
    and its output directory (Hydra names its overrides as it raises it)."""
    from hydra.core.hydra_config import HydraConfig
    hydra = HydraConfig.get()
    return SweepJobFailed(f"job #{hydra.job.num} of the sweep failed with exit code {code} (its "
                          f"error is in the job's output; its directory: "
                          f"{hydra.runtime.output_dir})")


def in_multirun() -> bool:
    """Is the running task a job of a multirun (not ``pairflow ...`` run once)?"""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    return HydraConfig.get().mode == RunMode.MULTIRUN


def refuse_old_launcher(argv: list[str]) -> None:
    """``hydra/launcher=ray``, pairflow's launcher's old name, is refused naming the new one;
    unless PyPI's hydra-ray-launcher, whose name ``ray`` is, is installed: then it is theirs,
    and Hydra composes it."""
    import importlib.util
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not (eq and key.lstrip("+") == "hydra/launcher" and OLD_LAUNCHER in value.split(",")):
            continue
        if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is None:
            from hydra_plugins.pairflow_ray_launcher.ray_launcher import NAME
            raise PairflowError(
                f"hydra/launcher={OLD_LAUNCHER}: pairflow's Ray launcher is now "
                f"hydra/launcher={NAME} ({OLD_LAUNCHER!r} is the name of PyPI's "
                "hydra-ray-launcher, which is not installed)")
