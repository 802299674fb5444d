"""Resuming a run from the command line: the run's own saved configuration, plus only the
overrides that cannot change what it computes.

A resume continues a journal: every tile it reuses was computed under the run's first
configuration, so the rest must be computed under the same one. ``pairflow resume=true
run_dir=D`` (or ``hydra.run.dir=D``) therefore reads ``D/config.yaml`` instead of composing the
defaults again (a killed run with ``cache.host_cache_items=4`` resumes with 4 without being told
twice) and accepts on top of it only the keys ``resume_key_kind`` calls ``runtime``. Everything
is checked before anything is written: a refused resume leaves the directory as it was and
creates none.
"""
from __future__ import annotations

import difflib
import os

from pairflow.engine import PairflowError

RUNTIME, TILING, RESULT = "runtime", "tiling", "result"

# How the run is carried out, never what it computes: resources, cache sizes, the display,
# the checks and how the hand-out works. Anything not named here counts as changing results.
RUNTIME_GROUPS = ("cache.", "cluster.", "hydra.")
RUNTIME_KEYS = frozenset({
    "progress", "preflight", "validate", "max_retries", "seed", "runs_root", "resume", "run_dir",
    "scheduler.window", "scheduler.in_flight", "scheduler.eviction"})
# These decide how the pairs are cut into the tiles the journal names by number.
TILING_KEYS = frozenset({"scheduler.plan", "scheduler.leaf_items", "scheduler.target_tile_s",
                         "scheduler.tile_overhead_s"})
# The compute backend: another one may round differently, and a matrix must not mix two.
RESULT_KEYS = frozenset({"cluster.devices"})
# The keys a resume reads its directory from; every other key is checked against the run.
DIRECTORY_KEYS = ("run_dir", "hydra.run.dir")


def resume_key_kind(key: str) -> str:
    """``runtime`` (a resume may change it), ``tiling`` (changes the tiles the journal names)
    or ``result`` (changes the results: data, k, app parameters, sink ...), for a dotted key."""
    key = key.lstrip("+~")
    if key in RESULT_KEYS:
        return RESULT
    if key in TILING_KEYS:
        return TILING
    if key in RUNTIME_KEYS or key.startswith(RUNTIME_GROUPS):
        return RUNTIME
    return RESULT


def _truthy(value) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def wants_resume(argv: list[str]) -> bool:
    """Whether the command line asks for a resume (``resume=true``)."""
    return any(a.partition("=")[0].lstrip("+") == "resume" and _truthy(a.partition("=")[2])
               for a in argv if "=" in a and not a.startswith("-"))


def _flatten(node, prefix: str = "") -> dict:
    out = {}
    for k, v in node.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _compose(config_dir: str, app: str, overrides: list[str]):
    """The config a fresh ``pairflow app=APP OVERRIDES`` would run with, resolved."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pairflow.apps.resolvers import register_resolvers
    register_resolvers()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            cfg = compose(config_name="config", overrides=[f"app={app}", *overrides])
        return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:  # Hydra's own message (a bad group choice, a bad value ...)
        raise PairflowError(f"cannot resume with {' '.join(overrides)}: "
                            + " ".join(str(exc).split())) from None


def resume_config(argv: list[str], config_dir: str):
    """The configuration to resume with, and the run directory: the run's saved config.yaml
    with the command line's runtime overrides applied. Raises ``PairflowError`` naming the
    problem (no directory, nothing to resume, an override that would change results) before
    anything is written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from pairflow.engine import RUN_CONFIG as CONFIG
    from pairflow.engine import RUN_META as META
    overrides = OverridesParser.create().parse_overrides(
        [a for a in argv if "=" in a and not a.startswith("-")])
    directory = None
    for o in overrides:
        if o.key_or_group in DIRECTORY_KEYS and o.value() not in (None, ""):
            directory = str(o.value())
    if directory is None:
        raise PairflowError("resume=true needs the run directory to resume: "
                            "run_dir=DIR (or hydra.run.dir=DIR)")
    if not os.path.isdir(directory):
        raise PairflowError(f"nothing to resume: {directory} does not exist")
    if not os.path.exists(os.path.join(directory, META)):
        raise PairflowError(f"nothing to resume in {directory}: it has no {META} (the run "
                            "stopped before it started; start it again instead)")
    saved_path = os.path.join(directory, CONFIG)
    try:  # (OmegaConf's YAML loader is a safe one: a python/... tag is refused, never run)
        saved = OmegaConf.load(saved_path) if os.path.exists(saved_path) else None
    except Exception as exc:
        raise PairflowError(f"cannot resume {directory}: its {CONFIG} does not read as a "
                            f"configuration: " + " ".join(str(exc).split())) from None
    if saved is None or OmegaConf.select(saved, "app.name") is None:
        raise PairflowError(f"cannot resume {directory} from the command line: its {CONFIG} is "
                            "not a pairflow command's configuration (resume it with "
                            "pairflow.allpairs(..., run_dir=..., resume=True))")
    app = saved.app.name
    groups = {d for d in os.listdir(config_dir) if os.path.isdir(os.path.join(config_dir, d))}
    asked = [o for o in overrides if not (o.key_or_group in DIRECTORY_KEYS or o.key_or_group ==
                                          "resume" or o.key_or_group.startswith("hydra."))]
    for o in asked:
        if o.key_or_group == "app" and o.value() != app:
            raise PairflowError(f"cannot resume {directory} as app={o.value()}: it is a "
                                f"run of app={app}")
    known = set(_flatten(OmegaConf.to_container(saved, resolve=False)))
    known |= {k.rsplit(".", 1)[0] for k in known if "." in k}
    for o in asked:
        key = o.key_or_group
        if key not in known and not (key in groups and o.package is None):
            close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise PairflowError(f"unknown config key {key!r} for the run in {directory} "
                                f"(app={app}){hint}")
    # what the command line asks for, composed as a fresh run would be (group choices, then
    # keys; interpolations resolved), compared with the run's own values key by key
    fresh = _compose(config_dir, app, [o.input_line for o in asked if o.key_or_group != "app"]) \
        if asked else None
    wanted: dict[str, object] = {}   # dotted key -> value the command line asks for
    named: dict[str, str] = {}       # dotted key -> the override that asked for it
    for o in sorted(asked, key=lambda o: not (o.key_or_group in groups and o.package is None)):
        key = o.key_or_group
        if key == "app":
            continue
        if key in groups and o.package is None:  # every key of the group, as chosen
            for k, v in _flatten(OmegaConf.to_container(fresh[key], resolve=True),
                                 f"{key}.").items():
                wanted[k], named[k] = v, o.input_line
            continue
        value = OmegaConf.select(fresh, key, default=None)
        if OmegaConf.is_config(value):
            value = OmegaConf.to_container(value, resolve=True)
        wanted[key], named[key] = value, o.input_line
    for key, value in wanted.items():
        old = OmegaConf.select(saved, key)
        if _same(old, value):
            continue
        kind = resume_key_kind(key)
        if kind == TILING:
            raise PairflowError(
                f"cannot resume {directory} with {named[key]}: {key} decides how the pairs are "
                f"cut into the tiles its journal names (the run has {key}={old!r}); start a new "
                "run instead")
        if kind == RESULT:
            raise PairflowError(
                f"cannot resume {directory} with {named[key]}: {key} would change the results "
                f"(the run has {key}={old!r}); start a new run instead")
        OmegaConf.update(saved, key, value, merge=False)
    saved.resume = True
    saved.run_dir = directory
    return saved, directory


def _same(old, new) -> bool:
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) \
            and not isinstance(old, bool) and not isinstance(new, bool):
        return float(old) == float(new)
    try:
        from omegaconf import OmegaConf
        if OmegaConf.is_config(old):
            old = OmegaConf.to_container(old, resolve=True)
    except ImportError:
        pass
    return old == new


def resume_line(report: dict | None) -> str | None:
    """What a resume did, from the journal replay (``summary["resumed"]``)."""
    if not report:
        return None
    return (f"resumed: reused {report['reused']} tiles, recomputed {report['recomputed']}, "
            f"repaired {report['repaired']}")
