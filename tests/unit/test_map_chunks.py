"""pairflow.engine.map_chunks without Ray: the work runs here, in order; chunks cover every item once."""
import sys

from pairflow.engine.run import tasks
from pairflow.engine.run.tasks import _chunks, map_chunks


def test_without_ray_the_work_runs_here_in_order(monkeypatch):
    # `pytest tests` shares one Ray across directories, so this process may hold a running
    # one: the test makes the process look as one without Ray does
    monkeypatch.setattr(tasks, "_ray_is_up", lambda: False)
    calls = []

    def square(chunk, offset):
        calls.append(list(chunk))
        return [x * x + offset for x in chunk]
    assert map_chunks(square, [3, 1, 2], 10) == [19, 11, 14]
    assert calls == [[3, 1, 2]]  # one call on all items


def test_finding_out_whether_ray_is_up_does_not_import_it():
    ray_before = "ray" in sys.modules
    tasks._ray_is_up()
    assert ("ray" in sys.modules) == ray_before


def test_chunks_cover_every_item_once():
    for n, k in [(10, 3), (3, 8), (1, 1), (100, 7)]:
        plain = _chunks(n, k, None)
        assert sorted(i for c in plain for i in c) == list(range(n)) and len(plain) <= k
        assert all(c == list(range(c[0], c[-1] + 1)) for c in plain)  # contiguous runs
    weights = [1.0] * 20 + [50.0, 40.0]
    dealt = _chunks(22, 4, weights)
    assert sorted(i for c in dealt for i in c) == list(range(22))
    heavy = [c for c in dealt if 20 in c or 21 in c]
    assert len(heavy) == 2  # the two heavy items land in different chunks
