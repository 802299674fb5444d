"""``pairflow app=hep`` as the CLI runs it by default (the cluster group's ``executor=auto``):
its 2,421 events are a fraction of a second of work, so it runs in this process and never
imports Ray; ``cluster=local`` (Ray started here) selects the same events, row for row. Each
run in a fresh interpreter, so whether Ray was imported is the run's own doing."""
import json
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

pytestmark = pytest.mark.ray

SCRIPT = textwrap.dedent("""
    import json, sys
    from hydra import compose, initialize_config_dir
    from pairflow.apps.cli import CONFIG_DIR, run_config
    from pairflow.apps.resolvers import register_resolvers
    register_resolvers()
    run_dir, overrides = sys.argv[1], sys.argv[2:]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["app=hep", "progress=false",
                                                       *overrides])
    _, res = run_config(cfg, run_dir)
    print(json.dumps({"executor": res.summary["executor"], "ray": "ray" in sys.modules,
                      "parquet": res.outputs["parquet"],
                      "meta": json.load(open(run_dir + "/meta.json"))["executor"]}))
""")


def _run(tmp_path, name: str, *overrides: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / name),
                           f"runs_root={tmp_path}", *overrides],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_default_hep_runs_in_process_without_ray_and_selects_what_ray_selects(tmp_path):
    default = _run(tmp_path, "default")
    assert (default["executor"], default["meta"], default["ray"]) == ("local", "local", False)
    forced = _run(tmp_path, "ray", "cluster=local", "cluster.num_cpus=2",
                  "cluster.object_store_mb=256")
    assert (forced["executor"], forced["meta"], forced["ray"]) == ("ray", "ray", True)
    a = pd.read_parquet(default["parquet"]).sort_values("event").reset_index(drop=True)
    b = pd.read_parquet(forced["parquet"]).sort_values("event").reset_index(drop=True)
    assert len(a) > 10  # something is selected
    pd.testing.assert_frame_equal(a, b)
