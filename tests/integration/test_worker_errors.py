"""A failure inside a worker shows where it happened: ``pairflow -v`` prints the worker's own
traceback, whose last frame is the app's function that raised, and the run directory's run.log
keeps it; the one line names the stage and the item (and for a compare, the tile and its
items). On both executors: threads here, and Ray's device actors and load tasks.

The app (``raising_app.py``) raises in one stage for one item; the test knows which file,
function and item, so it checks the printed frames against that, not against the engine."""
import os
import re

import pytest

import apps
from tests.integration import raising_app

pytestmark = pytest.mark.ray
FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line \d+, in (?P<function>\S+)$', re.M)
BAD = "item006"  # raising.n = 12: the bad item is n // 2


@pytest.fixture
def raising_config(tmp_path, monkeypatch):
    """``app=raising`` for the command line: its config in a search path of its own."""
    conf = tmp_path / "conf" / "app"
    conf.mkdir(parents=True)
    (conf / "raising.yaml").write_text(raising_app.CONFIG)
    monkeypatch.setitem(apps.APPS, "raising", raising_app.__name__)
    return f"hydra.searchpath=[file://{tmp_path / 'conf'}]"


def last_frame(text: str) -> tuple[str, str]:
    frames = list(FRAME.finditer(text))
    assert frames, text
    return os.path.realpath(frames[-1]["file"]), frames[-1]["function"]


@pytest.mark.parametrize("executor", ["inprocess", "ray"])
@pytest.mark.parametrize("stage", ["compare", "parse", "preprocess"])
def test_a_worker_failure_prints_and_logs_the_workers_traceback(executor, stage, capsys,
                                                                tmp_path, raising_config,
                                                                request):
    if executor == "ray":
        request.getfixturevalue("ray_local")
    from apps.cli import main
    run_dir = tmp_path / "run"
    code = main(["-v", "app=raising", f"raising.stage={stage}", raising_config,
                 f"cluster.executor={executor}", f"run_dir={run_dir}", "progress=false"])
    err = capsys.readouterr().err
    assert code == 2
    here = (os.path.realpath(raising_app.__file__), stage)

    # -v: the traceback printed last ends in the app's own function
    head, _, line = err.rstrip("\n").rpartition("\n")
    assert last_frame(head) == here, err
    # the one line: the stage and the item (a compare: its tile and the tile's items)
    assert line.startswith("pairflow: error: device actor node-0/dev-"), line
    if stage == "compare":
        assert re.search(r"tile \d+ \(pairs of \[.*\] x \[.*'item006'.*\]\): compare failed: "
                         r"ArithmeticError: compare of item006 overflowed$", line), line
    else:
        assert f"{stage} of '{BAD}' failed: " in line, line

    # run.log keeps the line and the same traceback
    log = (run_dir / "run.log").read_text()
    failed = log[log.index("ERROR pairflow: the run failed: "):]
    assert line.removeprefix("pairflow: error: ") in failed.splitlines()[0]
    assert last_frame(failed) == here, failed


def test_without_v_the_failure_is_one_line(capsys, tmp_path, raising_config):
    from apps.cli import main
    code = main(["app=raising", raising_config, "cluster.executor=inprocess",
                 f"run_dir={tmp_path / 'run'}", "progress=false"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and not FRAME.search(err), err
    assert err.startswith("pairflow: error: device actor") and "compare failed" in err
