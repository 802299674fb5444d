"""One source for every default: the Hydra config's defaults against the dataclasses they feed,
and the docs' statements of defaults against both, so that a default changed in one place
alone fails here.

* The engine groups' default options (config.yaml's defaults list: ``cluster: auto``,
  ``cache: default``, ``scheduler: planned``) and the run-wide keys mirror
  ``AllPairsConfig`` key for key, through the CLI's own mapping (``apps.options``); the
  runtime keys mirror ``PipelineConfig`` too.
* Any other option of those groups, and an app's config, sets only what it changes: a key it
  sets to the default's value is a second copy of it.
* A sink config's settings are its class's parameters (equal to a parameter's default where
  there is one); an app's ``pipeline:`` block holds ``PipelineConfig`` fields, null (the
  engine's default) or a value of the app's own that differs from it.
* A farm preset's keys are ``FarmSpec`` fields, and its engine knobs (retries, timeout,
  volumes) mirror ``FarmSpec``'s defaults; the rest says how the tool is fed and what it writes.
* docs/pipelines.md's table of options, and every "`field` (value)" in the README and docs,
  state the dataclass's default; the share of the object store a host tier takes by default
  is the one sizing.py uses.
"""
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from pairflow.apps.cli import CONFIG_DIR

ROOT = Path(CONFIG_DIR).parent
ENGINE_GROUPS = ("cluster", "cache", "scheduler")


def compose(*overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pairflow.apps.resolvers import register_resolvers
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def defaults_of(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def allpairs_defaults() -> dict:
    from pairflow.engine.pairs.config import AllPairsConfig
    return defaults_of(AllPairsConfig)


def pipeline_defaults() -> dict:
    from pairflow.engine.pipeline.run import PipelineConfig
    return defaults_of(PipelineConfig)


def default_choices() -> dict:
    """group -> the option config.yaml's defaults list picks."""
    found = {}
    for entry in OmegaConf.load(Path(CONFIG_DIR, "config.yaml")).defaults:
        if not isinstance(entry, str):
            found.update(dict(entry))
    return found


def raw(group: str, option: str) -> dict:
    """What an option's file sets itself (its defaults list left out)."""
    body = OmegaConf.to_container(OmegaConf.load(Path(CONFIG_DIR, group, f"{option}.yaml")))
    body.pop("defaults", None)
    return body


def test_the_engine_defaults_mirror_allpairs_config():
    from pairflow.apps.options import allpairs_options, runtime_options
    cfg = compose("~app")  # the engine's groups as config.yaml picks them, no app on top
    want = allpairs_defaults()
    got = allpairs_options(cfg)
    set_by_groups = {k for g in ENGINE_GROUPS for k in cfg[g]}
    assert set_by_groups <= set(got) and set(got) <= set(want)
    drift = {k: (v, want[k]) for k, v in got.items() if v != want[k]}
    assert not drift, f"config value != AllPairsConfig default: {drift}"
    # what the config leaves out of the options is the engine's None
    assert cfg.result_store is None and want["result_store"] is None
    from pairflow.engine.pairs.driver import allpairs
    assert cfg.run_dir is None and inspect.signature(allpairs).parameters["run_dir"].default \
        is None
    # the runtime keys and run-wide keys feed pipelines too
    pipe = pipeline_defaults()
    for key in ("ray_address", "num_cpus", "object_store_mb"):
        assert cfg.cluster[key] == pipe[key], key
    assert runtime_options(cfg) == {}  # every runtime key is the engines' default (None)
    for key in ("progress", "seed", "runs_root"):
        assert cfg[key] == pipe[key], key


@pytest.mark.parametrize("group", ENGINE_GROUPS)
def test_another_option_sets_only_what_it_changes(group):
    default = default_choices()[group]
    base = OmegaConf.to_container(compose("~app")[group])
    for path in sorted(Path(CONFIG_DIR, group).glob("*.yaml")):
        if path.stem == default:
            continue
        own = raw(group, path.stem)
        copies = {k: v for k, v in own.items() if k in base and base[k] == v}
        assert not copies, f"{group}={path.stem} repeats the default's {copies}"
        composed = OmegaConf.to_container(compose("~app", f"{group}={path.stem}")[group])
        assert set(base) <= set(composed), f"{group}={path.stem} lacks keys of {default}"
        assert {k: v for k, v in composed.items() if base.get(k) != v} == own


@pytest.mark.parametrize("app", sorted(p.stem for p in Path(CONFIG_DIR, "app").glob("*.yaml")))
def test_an_app_sets_only_the_engine_keys_it_changes(app):
    base = compose("~app")
    body = OmegaConf.to_container(OmegaConf.load(Path(CONFIG_DIR, "app", f"{app}.yaml")))
    for group in ENGINE_GROUPS:
        copies = {k: v for k, v in (body.get(group) or {}).items() if base[group].get(k) == v}
        assert not copies, f"app={app} repeats the engine's {group} defaults {copies}"
    pipe = pipeline_defaults()
    for key, value in (body.get("pipeline") or {}).items():
        assert key in pipe, f"app={app}: pipeline.{key} is no PipelineConfig field"
        assert value is None or value != pipe[key], \
            f"app={app}: pipeline.{key}: {value} repeats the engine's default (use null)"


@pytest.mark.parametrize("sink", sorted(p.stem for p in Path(CONFIG_DIR, "sink").glob("*.yaml")))
def test_a_sink_config_is_its_class_parameters(sink):
    from pairflow.engine import make_sink
    settings = raw("sink", sink)
    made = make_sink(dict(settings))
    assert type(made).name == settings.pop("type") == sink
    params = inspect.signature(type(made)).parameters
    for key, value in settings.items():
        assert key in params and getattr(made, key) == value, key
        default = params[key].default
        assert default is inspect.Parameter.empty or default == value, key


# -- the docs -------------------------------------------------------------------------------

def _literal(text: str):
    """A default as the docs write it (`auto`, 0.02, 16), or None for prose (CPUs + 1)."""
    text = re.sub(r"\s*\(.*\)$", "", text.strip()).strip("`")
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text if re.fullmatch(r"[a-z_]+", text) and text not in ("all", "none", "balanced") \
        else None


def test_the_pipeline_docs_table_states_the_defaults():
    text = (ROOT / "docs" / "pipelines.md").read_text()
    table = text[text.index("| option | default | meaning |"):].split("\n\n", 1)[0]
    pipe = pipeline_defaults()
    checked = 0
    for row in table.splitlines()[2:]:
        names_cell, default_cell = row.split("|")[1:3]
        names = re.findall(r"`([a-z_]+)`", names_cell)
        cells = [c for c in re.split(r",\s*(?![^()]*\))", default_cell.strip())]
        if len(cells) == 1:
            cells *= len(names)
        assert len(cells) == len(names), row
        for name, cell in zip(names, cells):
            assert name in pipe, f"docs/pipelines.md: {name} is no PipelineConfig field"
            stated = _literal(cell)
            if pipe[name] is None or stated is None:
                assert pipe[name] is None, f"{name}: the table says {cell!r}, not {pipe[name]!r}"
                continue
            assert stated == pipe[name], f"{name}: the table says {cell!r}, the engine " \
                                         f"{pipe[name]!r}"
            checked += 1
    assert checked >= 10


UNITS = {"": 1, "s": 1, "ms": 1e-3, "%": 1e-2, "KiB": 1024, "MiB": 2**20}


def test_every_default_the_docs_state_in_passing_is_the_engines():
    """"`target_tile_s` (50 ms)": a field's default, in the README and docs."""
    allpairs, pipe = allpairs_defaults(), pipeline_defaults()
    stated = 0
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        fields = {**allpairs, **pipe} if path.name == "pipelines.md" else {**pipe, **allpairs}
        for m in re.finditer(r"`(?:[a-z]+\.)?([a-z_0-9]+)`\s*\((\d[\d,.]*)\s*([A-Za-z%]*)\)",
                             path.read_text()):
            name, number, unit = m.groups()
            if name not in fields or unit not in UNITS:
                continue
            value = float(number.replace(",", "")) * UNITS[unit]
            assert value == pytest.approx(fields[name]), f"{path.name}: {m.group(0)}"
            stated += 1
    assert stated >= 4


def test_the_host_tier_share_is_the_one_sizing_uses():
    """configs/cache/default.yaml and AllPairsConfig once said half the object store while
    sizing.py took 0.4 of it."""
    from pairflow.engine.pairs.plan import sizing
    share = f"{sizing.HOST_TIER_SHARE:.0%}".replace("%", " %")
    line = next(l for l in Path(CONFIG_DIR, "cache", "default.yaml").read_text().splitlines()
                if l.startswith("host_cache_bytes:"))
    assert share in line and "HOST_TIER_SHARE" in line, line
    config = (ROOT / "engine" / "pairs" / "config.py").read_text()
    assert re.search(rf"host_cache_bytes: .*# default: {share} of", config)
    from pairflow.engine.run.runtime import DEFAULT_OBJECT_STORE_MB
    auto = Path(CONFIG_DIR, "cluster", "auto.yaml").read_text()
    assert f"null: {DEFAULT_OBJECT_STORE_MB} MB" in auto and "DEFAULT_OBJECT_STORE_MB" in auto


# the farm presets' keys that are the engine's knobs, not facts of the tool (how its input is
# cut, fed and prepared, what it writes): each preset mirrors FarmSpec's default for them
FARM_KNOBS = ("retries", "timeout_s", "volumes")


@pytest.mark.parametrize("preset", sorted(p.stem for p in Path(CONFIG_DIR, "farm").glob("*.yaml")))
def test_a_farm_preset_feeds_farm_spec_fields_and_mirrors_its_knobs(preset):
    from pairflow.apps.farm import SPEC_KEYS
    from pairflow.engine.toolfarm.spec import FarmSpec
    spec = defaults_of(FarmSpec)
    assert set(SPEC_KEYS) <= set(spec)
    body = raw("farm", preset)
    for key in FARM_KNOBS:
        assert key in SPEC_KEYS and body[key] == spec[key], f"farm={preset}: {key}"
