"""A worker's traceback travels with its exception: attributes survive pickling (how Ray
ships an exception) where frames do not, and the innermost place a failure was marked is
the one reported."""
import pickle

from pairflow.engine.errors import InputError, WorkerError, mark_failure, worker_traceback


def _raise_here():
    raise ZeroDivisionError("deep down")


def _marked(stage):
    try:
        _raise_here()
    except ZeroDivisionError as exc:
        return mark_failure(exc, stage)


def test_a_marked_failure_keeps_its_frames_and_stage_across_pickling():
    exc = pickle.loads(pickle.dumps(_marked("parse of 'a.fa'")))
    assert exc.__traceback__ is None and exc.worker_stage == "parse of 'a.fa'"
    text = worker_traceback(exc)
    assert text.splitlines()[-1] == "ZeroDivisionError: deep down"
    assert "in _raise_here" in text.splitlines()[-3]  # the last frame: where it was raised


def test_the_innermost_mark_wins():
    exc = _marked("parse of 'a.fa'")
    assert mark_failure(exc, "load of a batch").worker_stage == "parse of 'a.fa'"
    outer = WorkerError("device actor node-0/dev-0 failed: ...", worker_traceback(exc))
    again = pickle.loads(pickle.dumps(outer))
    assert str(again) == str(outer) and worker_traceback(again) == worker_traceback(exc)


def test_a_cause_raised_here_is_found_through_the_chain():
    try:
        try:
            _raise_here()
        except ZeroDivisionError as inner:
            raise RuntimeError("tile 3: compare failed") from inner
    except RuntimeError as exc:
        text = worker_traceback(exc)
    assert "RuntimeError" not in text and "in _raise_here" in text.splitlines()[-3]


def test_input_error_keeps_its_fields_and_a_mark_across_pickling():
    exc = InputError("a.fa", "truncated", record="r1", index=0)
    exc.worker_traceback = "Traceback ...\n"
    back = pickle.loads(pickle.dumps(exc))
    assert (back.file, back.problem, back.record, back.index) == ("a.fa", "truncated", "r1", 0)
    assert str(back) == str(exc) and back.worker_traceback == "Traceback ...\n"
