"""Which extra of pairflow an app or command needs, and the one line that says so.

The core (``pip install pairflow``) runs the engine, the CLI, ``app=jaccard`` (the default),
``jaccard_filtered``, ``synthetic``, ``microscopy`` and ``farm``; a domain's dependencies come
with its extra (``pip install 'pairflow[hep]'``; pyproject.toml lists them). An app or command
whose extra is missing stops before any work (no Ray, no run directory) with one line naming the
extra, rather than failing later on an ImportError from deep inside a worker.

This module is the rule's one home: ``EXTRAS`` (an extra and the modules that prove it is
installed) and ``APP_EXTRAS`` (an app and the extras it needs). The proof is
``importlib.util.find_spec``, which finds a module without importing it (nothing here imports an
extra's module). tests/unit/test_extras.py checks both tables against the modules' real imports
and against pyproject.toml.
"""
from __future__ import annotations

import importlib.util

from pairflow.apps import APPS
from pairflow.engine import PairflowError

# extra -> the top-level modules pairflow imports from it (every one must be found)
EXTRAS: dict[str, tuple[str, ...]] = {
    "align": ("parasail", "pyopal", "scoring_matrices", "scipy"),
    "phylogeny": ("skbio", "pyrodigal"),
    "imaging": ("scipy", "PIL", "skimage"),
    "hep": ("uproot", "skhep_testdata"),
    "dashboard": ("streamlit", "altair", "vl_convert", "scipy"),
    "s3": ("s3fs",),
    "torch": ("torch",),
    "bench": ("matplotlib",),
}

# app (its config's app.name) -> the extras it needs; an app not listed needs the core alone
APP_EXTRAS: dict[str, tuple[str, ...]] = {
    "align": ("align",),
    "phylogeny": ("phylogeny",),
    "forensics": ("imaging",),
    "hep": ("hep",),
}

# subcommand -> the extras it needs
COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {
    "dashboard": ("dashboard",),
    "bench": ("bench",),
}

# example data set (pairflow data install; pairflow.apps.datasets) -> the extra that makes it
DATASET_EXTRAS: dict[str, str] = {
    "proteomes": "phylogeny",  # predicted with pyrodigal
    "cameras": "imaging",      # simulated from scikit-image's photographs (written by pillow)
}

# devices (cluster.devices) that run on torch
TORCH_DEVICES = ("torch-cpu", "cuda")


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be found (none: it is installed)."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, who: str) -> None:
    """Raise ``PairflowError`` with one line when ``extra`` is not installed; ``who`` is what
    needs it, as the user typed it (``app=hep``, ``pairflow dashboard``)."""
    if missing(extra):
        raise PairflowError(f"{who} needs pairflow's {extra} extra: "
                            f"pip install 'pairflow[{extra}]'")


def require_app(name: str) -> None:
    """The extras of app ``name`` (its config's ``app.name``), each installed or one line."""
    for extra in APP_EXTRAS.get(name, ()):
        require(extra, f"app={name}")


def _app_name(choice: str, config_dir: str | None, depth: int = 0) -> str:
    """The ``app.name`` of config ``app=choice`` read from its YAML without composing, or from
    the app config it extends (``hep_poor``'s defaults name ``hep``); the choice itself when
    there is no such file."""
    import os
    path = os.path.join(config_dir, "app", f"{choice}.yaml") if config_dir else ""
    if not path or not os.path.isfile(path) or depth > 8:
        return choice
    from omegaconf import OmegaConf
    node = OmegaConf.load(path)
    name = OmegaConf.select(node, "app.name", default=None)
    if name is not None:
        return str(name)
    for parent in OmegaConf.select(node, "defaults", default=None) or []:
        if isinstance(parent, str) and parent != "_self_" and "/" not in parent:
            found = _app_name(parent, config_dir, depth + 1)
            if found != parent or found in APPS:
                return found
    return choice


def check_command(argv: list[str], config_dir: str | None = None) -> None:
    """What a ``pairflow`` command line needs, checked before anything runs: a subcommand's
    extra, each ``app=`` choice's (a sweep ``app=a,b`` names several), torch for
    ``cluster.devices`` on torch, s3 for an ``s3://`` input. Help and ``--cfg`` run nothing,
    so they need nothing."""
    if any(a in ("-h", "--help", "--hydra-help", "--info") or a.startswith("--cfg") or
           a == "-c" for a in argv):
        return
    if argv and argv[0] in COMMAND_EXTRAS:
        for extra in COMMAND_EXTRAS[argv[0]]:
            require(extra, f"pairflow {argv[0]}")
        return
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            continue
        key = key.lstrip("+~")
        if key == "app":
            for choice in value.strip("[]'\"").split(","):
                if choice.strip():
                    require_app(_app_name(choice.strip(), config_dir))
        elif key == "cluster.devices" and any(d in value for d in TORCH_DEVICES):
            require("torch", f"cluster.devices={value}")
        if "s3://" in value:
            require("s3", f"{key}={value}")
