"""A failure inside a worker shows where it happened: ``pairflow -v`` prints the worker's own
traceback, whose last frame is the app's function that raised, and the run directory's run.log
keeps it; the one line names the stage and the item (and for a compare, the tile and its
items). On both executors: threads here, and Ray's device actors and load tasks.

The app (``raising_app.py``) raises in one stage for one item; the test knows which file,
function and item, so it checks the printed frames against that, not against the engine."""
import os
import re

import pytest

from pairflow import apps
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
    from pairflow.apps.cli import main
    run_dir = tmp_path / "run"
    code = main(["-v", "app=raising", f"raising.stage={stage}", raising_config,
                 f"cluster.executor={executor}", f"run_dir={run_dir}", "progress=false",
                 "scheduler.leaf_items=2"])  # tiles of 2 x 2: a tile's items by name
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
    from pairflow.apps.cli import main
    code = main(["app=raising", raising_config, "cluster.executor=inprocess",
                 f"run_dir={tmp_path / 'run'}", "progress=false"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and not FRAME.search(err), err
    assert err.startswith("pairflow: error: device actor") and "compare failed" in err


def test_a_compare_that_fails_in_the_probe_names_it(capsys, tmp_path, raising_config):
    """Item 0 is in the driver's probe: its compare fails before any worker starts, and the
    line says it was the probe's tile."""
    from pairflow.apps.cli import main
    run_dir = tmp_path / "run"
    code = main(["-v", "app=raising", "raising.bad=0", raising_config, f"run_dir={run_dir}",
                 "progress=false"])
    err = capsys.readouterr().err
    head, _, line = err.rstrip("\n").rpartition("\n")
    assert code == 2
    assert last_frame(head) == (os.path.realpath(raising_app.__file__), "compare"), err
    assert line == ("pairflow: error: compare of the probe's tile of 'item000', 'item011' "
                    "failed: ArithmeticError: compare of item000 overflowed"), line
    assert head.count("ArithmeticError: compare of item000 overflowed") == 1, err
    assert last_frame((run_dir / "run.log").read_text())[1] == "compare"


@pytest.mark.parametrize("executor", ["inprocess", "ray"])
def test_a_sink_write_that_fails_keeps_the_writes_traceback(executor, tmp_path, request):
    """Through the Python API: the error is a ``WorkerError`` naming the tile and the sink,
    and its traceback ends in the sink's write."""
    if executor == "ray":
        request.getfixturevalue("ray_local")
    from pairflow.engine import WorkerError, allpairs, worker_traceback
    from tests.integration.raising_app import RaisingApp, RaisingSink
    with pytest.raises(WorkerError) as failed:
        allpairs(app=RaisingApp(12, "none"), sinks=[RaisingSink(bad_tile=1)], wait=True,
                 executor=executor, leaf_items=3, progress=False, runs_root=str(tmp_path))
    assert re.search(r"tile 1 \(.*item0\d\d.*\): write to the dense sink failed: "
                     r"OSError: no space left writing tile 1$", str(failed.value))
    assert last_frame(worker_traceback(failed.value)) == (
        os.path.realpath(raising_app.__file__), "write_tile")
