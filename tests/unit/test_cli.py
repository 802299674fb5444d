"""The ``pairflow`` command's answers before any run starts: its help, refused config keys,
input lists, and one clear line for bad input. Everything here fails before Ray would start,
so ``apps.cli.main`` is called in-process."""
import os
import re

import pytest

from pairflow.apps import APPS
from pairflow.apps.cli import CONFIG_DIR, main, quote_input_lists


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_run_dir(root) -> bool:
    return not os.path.exists(root) or not any(f for _, _, fs in os.walk(root) for f in fs
                                               if f != "cli.log")


def test_help_lists_the_apps_subcommands_and_a_tour(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    configs = [f[:-5] for f in os.listdir(os.path.join(CONFIG_DIR, "app"))]
    listed = set(re.findall(r"^  (\S+)\s{2,}\S", out, re.M))
    assert set(configs) | set(APPS) <= listed
    assert re.search(r"^  dashboard RUN_DIR", out, re.M)
    assert "tour" in out and "pairflow app=align data.queries=" in out
    assert "-v, --verbose" in out
    assert run(capsys, "-h")[1] == out


@pytest.mark.parametrize("argv, key, close", [
    (["+data.kk=15"], "data.kk", "data.k"),
    (["data.kk=15"], "data.kk", "data.k"),
    (["app=align", "align.topk=3"], "align.topk", "align.top_k"),
    (["cache.host_cache_item=4"], "cache.host_cache_item", "cache.host_cache_items"),
])
def test_unknown_keys_are_refused_with_the_closest_known_ones(capsys, tmp_path, argv, key,
                                                              close):
    root = tmp_path / "runs"
    code, _, err = run(capsys, *argv, f"runs_root={root}")
    assert code == 2 and err.count("\n") == 1
    assert f"unknown config key {key!r}" in err and close in err.split("did you mean", 1)[1]
    assert no_run_dir(root)


def test_input_lists_are_lists_not_sweeps(capsys, tmp_path):
    """``data.inputs=a.fa,b.fa`` reaches the app as two files (here the second one's bad record
    is reported, before Ray starts); Hydra alone calls it an ambiguous value."""
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text(">x\nACGTACGT\n")
    b.write_text(">y\nACGT\n>z\nAC1GT\n")
    code, _, err = run(capsys, f"data.inputs={a},{b}", "data.item=record",
                       f"runs_root={tmp_path / 'runs'}")
    assert code == 2 and "Ambiguous" not in err
    assert err.startswith(f"pairflow: error: {b}: record 'z' (#2): unexpected character '1'")
    assert quote_input_lists(["-m", "data.k=15,21", "data.inputs=a,b"]) == \
        ["-m", "data.k=15,21", "data.inputs=a,b"]  # a sweep stays a sweep under --multirun
    assert quote_input_lists(["data.inputs=a,b", "data.k=3"]) == ["data.inputs='a,b'", "data.k=3"]


def test_bad_input_is_one_line_and_the_traceback_only_when_asked(capsys, tmp_path, monkeypatch):
    root = f"runs_root={tmp_path / 'runs'}"
    code, _, err = run(capsys, "data.inputs=null", root)
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("pairflow: error: inputs: no input given")
    code, _, err = run(capsys, "-v", "data.inputs=null", root)
    assert code == 2 and "Traceback (most recent call last)" in err
    monkeypatch.setenv("PAIRFLOW_DEBUG", "1")
    code, _, err = run(capsys, "data.inputs=null", root)
    assert code == 2 and "Traceback (most recent call last)" in err



def test_cluster_group_to_runtime_options():
    """One helper reads the cluster group for every app; nulls keep the engine's defaults."""
    from omegaconf import OmegaConf

    from pairflow.apps.options import runtime_options
    cfg = OmegaConf.create({"cluster": {"ray_address": None, "num_cpus": 2,
                                        "object_store_mb": 512, "devices": "cpu"}})
    assert runtime_options(cfg) == {"num_cpus": 2, "object_store_mb": 512}
    assert runtime_options(OmegaConf.create({})) == {}


# -- resume: the run's saved configuration, overrides that cannot change its results ---------

@pytest.mark.parametrize("key, kind", [
    ("cache.host_cache_items", "runtime"), ("cache.host_cache_bytes", "runtime"),
    ("cluster.num_cpus", "runtime"), ("cluster.actors_per_node", "runtime"),
    ("cluster.ray_address", "runtime"), ("progress", "runtime"), ("validate", "runtime"),
    ("max_retries", "runtime"), ("scheduler.in_flight", "runtime"),
    ("scheduler.window", "runtime"), ("hydra.run.dir", "runtime"), ("run_dir", "runtime"),
    ("data.inputs", "result"), ("data.k", "result"), ("data.item", "result"),
    ("app.name", "result"), ("sink.type", "result"), ("sink.k", "result"),
    ("align.top_k", "result"), ("synthetic.n", "result"), ("filter.t", "result"),
    ("cluster.devices", "result"), ("+data.kk", "result"), ("something.new", "result"),
    ("scheduler.plan", "tiling"), ("scheduler.leaf_items", "tiling"),
    ("scheduler.target_tile_s", "tiling"),
])
def test_resume_key_kinds(key, kind):
    from pairflow.apps.resume import resume_key_kind
    assert resume_key_kind(key) == kind


def _saved_run(path, *overrides, app="synthetic"):
    """A run directory as a killed ``pairflow app=synthetic ...`` leaves it: the resolved
    config.yaml and a meta.json (what a resume looks for)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from pairflow.apps.resolvers import register_resolvers
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"app={app}", *overrides])
    os.makedirs(path)
    with open(os.path.join(path, "config.yaml"), "w") as fh:
        fh.write(OmegaConf.to_yaml(OmegaConf.to_container(cfg, resolve=True)))
    with open(os.path.join(path, "meta.json"), "w") as fh:
        fh.write("{}")
    return str(path)


def _listing(root):
    return sorted((os.path.relpath(os.path.join(d, f), root),
                   os.stat(os.path.join(d, f)).st_mtime_ns)
                  for d, _, fs in os.walk(root) for f in fs)


def test_resume_takes_the_saved_config_and_runtime_overrides(tmp_path):
    from pairflow.apps.resume import resume_config
    run_dir = _saved_run(tmp_path / "run", "cache.host_cache_items=4", "synthetic.n=30")
    cfg, where = resume_config(["resume=true", f"run_dir={run_dir}"], CONFIG_DIR)
    assert where == run_dir and cfg.resume is True and cfg.run_dir == run_dir
    assert cfg.cache.host_cache_items == 4 and cfg.synthetic.n == 30 and cfg.app.name == "synthetic"
    cfg, _ = resume_config(["resume=true", f"hydra.run.dir={run_dir}", "cache.host_cache_items=6",
                            "progress=false", "cluster.num_cpus=2", "synthetic.n=30",
                            "app=synthetic", "cache=default"], CONFIG_DIR)
    # as in Hydra, a group choice (cache=default) applies before the keys set one by one
    assert cfg.progress is False and cfg.cluster.num_cpus == 2 and cfg.synthetic.n == 30
    assert cfg.cache.host_cache_items == 6
    cfg, _ = resume_config(["resume=true", f"run_dir={run_dir}", "cache=default"], CONFIG_DIR)
    assert cfg.cache.host_cache_items is None


@pytest.mark.parametrize("argv, named", [
    (["synthetic.n=50"], "synthetic.n=50"),
    (["sink=topk"], "sink=topk"),
    (["sink.type=threshold"], "sink.type=threshold"),
    (["app=align"], "app=align"),
    (["scheduler=zorder"], "scheduler=zorder"),
    (["scheduler.leaf_items=3"], "scheduler.leaf_items=3"),
    (["cluster.devices=torch-cpu"], "cluster.devices=torch-cpu"),
    (["cache.host_cache_itemz=5"], "cache.host_cache_itemz"),
])
def test_resume_refuses_what_would_change_results_and_writes_nothing(capsys, tmp_path,
                                                                    monkeypatch, argv, named):
    run_dir = _saved_run(tmp_path / "run", "cache.host_cache_items=4", "synthetic.n=30")
    monkeypatch.chdir(tmp_path)
    before = _listing(tmp_path)
    for where in ("run_dir", "hydra.run.dir"):
        code, out, err = run(capsys, "resume=true", f"{where}={run_dir}", *argv)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err.startswith("pairflow: error: ") and named in err
        assert _listing(tmp_path) == before


def test_refused_resume_of_a_missing_directory_leaves_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv in (["resume=true", "run_dir=runs/nope"], ["resume=true", "hydra.run.dir=runs/nope"],
                 ["resume=true"]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "pairflow: error: " in err, err
        assert os.listdir(tmp_path) == []
    half = tmp_path / "started"
    half.mkdir()
    (half / "status.json").write_text('{"state": "starting"}')
    code, _, err = run(capsys, "resume=true", f"run_dir={half}")
    assert code == 2 and "meta.json" in err and os.listdir(half) == ["status.json"]


def test_resume_of_an_app_with_config_groups_of_its_own(capsys, tmp_path, monkeypatch):
    """A farm run (its own run(), resumable; the farm= group interpolates its keys): the same
    command line again resumes; another tool or another query file is refused, naming it."""
    from pairflow.apps.resume import resume_config
    run_dir = _saved_run(tmp_path / "farm", "farm=blastp", "farm.queries=/x/q.fa", app="farm")
    same = ["app=farm", "farm=blastp", "farm.queries=/x/q.fa", "resume=true", f"run_dir={run_dir}"]
    cfg, _ = resume_config(same, CONFIG_DIR)
    assert cfg.farm.queries == cfg.farm.db == "/x/q.fa" and cfg.farm.name == "blastp"
    monkeypatch.chdir(tmp_path)
    before = _listing(tmp_path)
    for change, named in ((["farm=blastn"], "farm=blastn"), (["farm=hmmsearch"], "farm=hmmsearch"),
                          (["farm.queries=/x/other.fa"], "farm.queries=/x/other.fa")):
        code, _, err = run(capsys, *same, *change)
        assert code == 2 and named in err and err.count("\n") == 1, err
    assert _listing(tmp_path) == before
    code, _, err = run(capsys, "resume=true", f"run_dir={_saved_run(tmp_path / 'hep', app='hep')}")
    assert code == 2 and "app=hep" in err and "start it again" in err


def test_a_run_composes_its_config_once_and_keeps_hydras_run_directory(capsys, tmp_path,
                                                                       monkeypatch):
    """``@hydra.main`` composed a run's config three times (the key check, the run mode, the
    run); the command composes it once and still gives the run what Hydra gave it: the
    directory from ``hydra.run.dir`` with ``.hydra/`` (the overrides) and ``cli.log``."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    calls = []
    load = ConfigLoaderImpl.load_configuration

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("overrides", args[1] if len(args) > 1 else None))
        return load(self, *args, **kwargs)
    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    run_dir = tmp_path / "the-run"
    code, _, err = run(capsys, "data.inputs=null", "data.k=15", f"hydra.run.dir={run_dir}")
    assert code == 2 and err.startswith("pairflow: error: inputs: no input given")
    assert len(calls) == 1
    with open(run_dir / ".hydra" / "overrides.yaml") as fh:
        assert "data.k=15" in fh.read()
    assert (run_dir / "cli.log").exists()
    # a key the config lacks is still refused, by name, before any directory is made
    calls.clear()
    code, _, err = run(capsys, "+data.kk=15", f"hydra.run.dir={tmp_path / 'refused'}")
    assert code == 2 and "unknown config key 'data.kk'" in err and "data.k" in err
    assert len(calls) == 1 and not (tmp_path / "refused").exists()
