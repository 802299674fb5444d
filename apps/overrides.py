"""The command line's ``KEY=VALUE`` overrides, checked before a run: input lists quoted (a comma
is a list of patterns, not a sweep), and a key the chosen app's config does not have refused
with the closest known ones (``+data.kk=15`` would otherwise run with the default k)."""
from __future__ import annotations

import os

from pairflow.apps.resolvers import register_resolvers
from pairflow.configs import CONFIG_DIR
from pairflow.engine import PairflowError

INPUT_KEYS = ("data.inputs", "data.queries", "data.targets", "farm.queries", "farm.inputs")
CONFIG_FLAGS = ("-cp", "--config-path", "-cn", "--config-name", "-cd", "--config-dir")


def _multirun(argv: list[str]) -> bool:
    return any(a in ("-m", "--multirun") for a in argv)


def quote_input_lists(argv: list[str]) -> list[str]:
    """``data.inputs=a.fa,b.fa`` as the string Hydra would otherwise call ambiguous (a list or a
    sweep?): on an input key it is a list of patterns, which the apps split at commas."""
    if _multirun(argv):
        return list(argv)
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+~") in INPUT_KEYS and "," in value and value[:1] not in "[\"'":
            quote = "'" if "'" not in value else '"'
            arg = f"{key}={quote}{value}{quote}"
        out.append(arg)
    return out


def _config_keys(cfg) -> list[str]:
    """Every dotted key of a composed config, inner nodes included."""
    from omegaconf import DictConfig, OmegaConf
    keys: list[str] = []

    def walk(node, prefix: str) -> None:
        for k in node.keys():
            path = f"{prefix}{k}"
            keys.append(path)
            child = node._get_node(k)
            if isinstance(child, DictConfig) and not OmegaConf.is_missing(node, k):
                walk(child, path + ".")
    walk(cfg, "")
    return keys


def _value_overrides(argv: list[str]):
    """The command line's overrides, and those that set a value (not a group choice, a
    ``++`` force-add, a ``~`` delete, a package or ``hydra.`` key): the ones to check."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    overrides = OverridesParser.create().parse_overrides(
        [a for a in argv if "=" in a and not a.startswith("-")])
    groups = {d for d in os.listdir(CONFIG_DIR) if os.path.isdir(os.path.join(CONFIG_DIR, d))}
    values = [o for o in overrides if o.key_or_group not in groups and not o.is_force_add()
              and not o.is_delete() and o.package is None
              and not o.key_or_group.startswith(("hydra.", "hydra/"))]
    return overrides, groups, values


def _refuse_unknown(values, known: list[str], overrides) -> None:
    import difflib
    app = next((o.value() for o in overrides if o.key_or_group == "app"), "jaccard")
    for o in values:
        if o.key_or_group in known:
            continue
        close = difflib.get_close_matches(o.key_or_group, known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise PairflowError(f"unknown config key {o.key_or_group!r} for app={app}{hint} "
                            f"(pairflow app={app} --cfg job lists them all; ++KEY=VALUE adds "
                            f"a key on purpose)")


def check_keys(argv: list[str]) -> None:
    """Refuse an override of a key the chosen app's config does not have (``+data.kk=15`` would
    otherwise run silently with the default k), naming the closest known keys. Composes the
    app's config on its own: for Hydra's other commands (``--cfg``, ``-m``) and to name the
    key a composition refused (``check_composed`` checks a run's config without composing)."""
    from hydra import compose, initialize_config_dir
    if any(a.split("=")[0] in CONFIG_FLAGS for a in argv):
        return  # another config tree than the one this knows
    overrides, groups, values = _value_overrides(argv)
    chosen = [o.input_line for o in overrides if o.key_or_group in groups]
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        known = _config_keys(compose(config_name="config", overrides=chosen))
    _refuse_unknown(values, known, overrides)


def check_composed(argv: list[str], cfg) -> None:
    """``check_keys`` on the config a run composed from ``argv``: Hydra refuses ``key=value``
    for a key it does not have, so only ``+key=value`` can reach here with a new key, and the
    known keys are the config's less the ones ``+`` added."""
    overrides, _, values = _value_overrides(argv)
    added = [o for o in values if o.is_add()]
    if not added:
        return
    new = {o.key_or_group for o in added}
    known = [k for k in _config_keys(cfg) if not k.startswith("hydra")
             and not any(k == n or k.startswith(n + ".") for n in new)]
    _refuse_unknown(added, known, overrides)
