"""The ``pairflow`` command's answers before any run starts: its help, refused config keys,
input lists, and one clear line for bad input. Everything here fails before Ray would start,
so ``apps.cli.main`` is called in-process."""
import os
import re

import pytest

from apps import APPS
from apps.cli import CONFIG_DIR, main, quote_input_lists


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

    from apps.options import runtime_options
    cfg = OmegaConf.create({"cluster": {"ray_address": None, "num_cpus": 2,
                                        "object_store_mb": 512, "devices": "cpu"}})
    assert runtime_options(cfg) == {"num_cpus": 2, "object_store_mb": 512}
    assert runtime_options(OmegaConf.create({})) == {}
