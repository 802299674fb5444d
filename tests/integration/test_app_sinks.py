"""Every app honours every sink the ``sink`` group offers, or refuses it before any compute,
naming the app and the sink (``app=synthetic sink=topk`` once wrote a dense matrix without a
word). Walks every app config x every sink config; the synthetic app's runs are checked
against its formula, the other apps' sinks against what the config asked for."""
import os
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from pairflow.apps.cli import CONFIG_DIR

APPS = sorted(p.stem for p in Path(CONFIG_DIR, "app").glob("*.yaml"))
SINKS = sorted(p.stem for p in Path(CONFIG_DIR, "sink").glob("*.yaml"))


def compose(*overrides):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from pairflow.apps.resolvers import register_resolvers
    register_resolvers()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def value(i, j):
    """The synthetic app's compare, by its docstring: (i * 7919 + j) % 1000 for i < j."""
    i, j = min(i, j), max(i, j)
    return float((i * 7919 + j) % 1000)


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("app", APPS)
def test_an_app_honours_the_chosen_sink_or_refuses_it_before_compute(app, sink, tmp_path):
    import importlib

    from pairflow import apps
    from pairflow.apps.cli import run_config
    from pairflow.engine import PairflowError
    cfg = compose(f"app={app}", f"sink={sink}")
    module = importlib.import_module(apps.APPS[cfg.app.name])
    run_dir = tmp_path / "run"
    built = None
    if not hasattr(module, "run"):
        try:
            built = module.build(cfg)
        except (ValueError, PairflowError) as exc:  # the app's own refusal
            assert f"app={cfg.app.name}" in str(exc) and f"sink={sink}" in str(exc), exc
    # the settings the sink's own config names (topk: k, threshold: t), as composed
    settings = {k: cfg.sink[k] for k in OmegaConf.load(Path(CONFIG_DIR, "sink", f"{sink}.yaml"))
                if k != "type"}
    honoured = built is not None and any(
        type(s).name == sink and all(getattr(s, k) == v for k, v in settings.items())
        for s in built[1])
    if honoured:
        return
    # refused: by run_config, before the run directory (or anything else) is made
    with pytest.raises((ValueError, PairflowError)) as refused:
        run_config(cfg, str(run_dir))
    message = str(refused.value)
    assert f"app={cfg.app.name}" in message and f"sink={sink}" in message, message
    assert not run_dir.exists()


def test_an_app_with_its_own_run_composes_without_a_sink():
    for app in ("hep", "hep_poor", "jaccard_filtered", "farm"):
        assert compose(f"app={app}").get("sink") is None, app


def test_a_sink_setting_the_app_does_not_use_is_refused(tmp_path):
    """app=align keeps sink.k hits a query, align.top_k unless set on its own; a sink whose
    setting the app would not use is refused, naming the setting."""
    from pairflow.apps.align import build
    from pairflow.apps.options import check_sinks
    from pairflow.engine import PairflowError, TopK
    for overrides, k in ((["align.top_k=3"], 3), (["sink.k=2"], 2), ([], 5)):
        cfg = compose("app=align", *overrides)
        _, sinks = build(cfg)
        assert [s.k for s in sinks if isinstance(s, TopK)] == [k]
    with pytest.raises(PairflowError, match=r"app=align does not honour sink\.k=4 \(sink=topk\)"
                                            r": its topk sink has k=3"):
        check_sinks("align", {"type": "topk", "k": 4}, [TopK(3, field="score")])


@pytest.mark.parametrize("sink, overrides", [("dense", []), ("topk", ["sink.k=4"]),
                                             ("threshold", ["sink.t=500"])])
def test_synthetic_writes_the_chosen_sink(sink, overrides, tmp_path):
    """``app=synthetic`` through the CLI's run: the sink it was given, and its values the
    app's formula's."""
    from pairflow.apps.cli import run_config
    n = 14
    cfg = compose("app=synthetic", f"sink={sink}", *overrides, f"synthetic.n={n}",
                  "cluster.executor=inprocess", "progress=false",
                  f"runs_root={tmp_path / 'runs'}")
    _, result = run_config(cfg, str(tmp_path / "run"))
    assert list(result.outputs) == [sink]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    if sink == "dense":
        got = result.matrix()
        assert all(got[i, j] == value(i, j) for i, j in pairs)
    elif sink == "threshold":
        got = sorted(zip(result.edges.i, result.edges.j, result.edges.value))
        assert got == [(i, j, value(i, j)) for i, j in pairs if value(i, j) >= 500]
    else:  # every item's 4 best others (the space is symmetric), ties to the lower index
        want = [(i, j, value(i, j)) for i in range(n) for j in
                sorted((j for j in range(n) if j != i), key=lambda j: (-value(i, j), j))[:4]]
        top = result.topk
        assert sorted(zip(top.qi, top.ti, top.score)) == sorted(want)
        assert np.array_equal(top.groupby("qi").size().to_numpy(), np.full(n, 4))
        assert os.path.basename(result.outputs["topk"]) == "topk.parquet"
