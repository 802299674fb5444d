"""The run directory's lifecycle files as ``RunRecorder`` writes them (engine/run/rundir.py),
read back as the dashboard reads them: plain JSON and YAML under fixed names, no engine code."""
import json
import os
import time

import pytest
import yaml

from pairflow.engine.errors import PairflowError
from pairflow.engine.run.registry import Registry
from pairflow.engine.run.rundir import RunDir, RunRecorder


def read(path):
    with open(path) as fh:
        return json.load(fh)


def test_a_run_from_start_to_finish(tmp_path):
    rec = RunRecorder.open(str(tmp_path / "run"), "unused", "app")
    rec.write_config({"allpairs": {"leaf_items": None, "plan": "stripe"}})
    assert yaml.safe_load(open(tmp_path / "run" / "config.yaml")) == \
        {"allpairs": {"leaf_items": None, "plan": "stripe"}}
    rec.starting()
    assert read(tmp_path / "run" / "status.json")["state"] == "starting"
    rec.write_meta({"kind": "allpairs", "n_items": 3})
    assert rec.read_meta() == {"kind": "allpairs", "n_items": 3} and rec.has_meta()
    rec.running()
    assert not rec.heartbeat(), "a heartbeat right after a status write writes nothing"
    rec.write_summary({"R": 1.0})
    rec.finished()
    status = read(tmp_path / "run" / "status.json")
    assert status["state"] == "finished" and status["finished"] >= status["updated"] - 1
    assert read(tmp_path / "run" / "summary.json") == {"R": 1.0}
    assert os.path.isdir(tmp_path / "run" / "result")


def test_heartbeat_marks_a_live_run_every_few_seconds(tmp_path, monkeypatch):
    rec = RunRecorder(RunDir(str(tmp_path)).create())
    rec.running()
    before = read(tmp_path / "status.json")["updated"]
    now = time.time() + RunRecorder.HEARTBEAT_S + 1
    monkeypatch.setattr(time, "time", lambda: now)
    assert rec.heartbeat()
    assert read(tmp_path / "status.json") == {"state": "running", "error": None,
                                              "updated": now, "finished": None}
    assert now > before
    assert not rec.heartbeat()


def test_failure_names_the_error_and_extras(tmp_path):
    rec = RunRecorder(RunDir(str(tmp_path)).create())
    rec.failed("tile 3 failed", lost_actors=[{"actor": "node-0/dev-1"}])
    status = read(tmp_path / "status.json")
    assert (status["state"], status["error"]) == ("failed", "tile 3 failed")
    assert status["lost_actors"] == [{"actor": "node-0/dev-1"}] and status["finished"]


def test_a_new_run_directory_per_run_and_resume_needs_a_started_one(tmp_path):
    a = RunRecorder.open(None, str(tmp_path), "jaccard")
    b = RunRecorder.open(None, str(tmp_path), "jaccard")
    assert a.path != b.path and os.path.dirname(a.path) == str(tmp_path / "jaccard")
    with pytest.raises(PairflowError, match="resume needs the run directory"):
        RunRecorder.open(None, str(tmp_path), "jaccard", resume=True)
    with pytest.raises(PairflowError, match="it has no meta.json"):
        RunRecorder.open(a.path, str(tmp_path), "jaccard", resume=True)
    a.write_meta({"kind": "allpairs"})
    assert RunRecorder.open(a.path, str(tmp_path), "jaccard", resume=True).path == a.path


def test_a_registry_names_its_choices():
    plans = Registry("plan", {"stripe": lambda: "S", "zorder": lambda: "Z"})
    assert plans.make("zorder") == "Z"
    with pytest.raises(ValueError, match="unknown plan 'hilbert': choose 'stripe' or 'zorder'"):
        plans.make("hilbert")
    three = Registry("sink", {"dense": dict, "topk": dict, "threshold": dict})
    with pytest.raises(ValueError, match="choose 'dense', 'topk' or 'threshold'"):
        three.make("csv")


def test_threads_writing_one_json_file_leave_a_whole_file_and_no_temporaries(tmp_path):
    # the progress thread and the driver both write status.json; they shared one temporary
    # file name per process, and a stray status.json.tmp* stayed in the run directory
    import threading

    from pairflow.engine.run.rundir import write_json
    path = str(tmp_path / "status.json")
    errors = []

    def writer(n):
        try:
            for i in range(200):
                write_json(path, {"writer": n, "i": i, "pad": "x" * 2000})
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert os.listdir(tmp_path) == ["status.json"]
    with open(path) as fh:
        assert json.load(fh)["i"] == 199
