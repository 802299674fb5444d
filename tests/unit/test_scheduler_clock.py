"""The scheduler's two timed rules on a controlled clock (no Ray, no waiting): a tile past its
deadline is overdue, and an actor silent past ``silent_after_s`` is silent; neither before.

The liveness and deadline tests on a real run (tests/integration/test_liveness.py,
test_resilience.py) check what the driver does with these lists; when they fire is checked
here, to the second, where no machine's load can move it."""
from __future__ import annotations

import dataclasses

import numpy as np

from pairflow.engine.pairs.plan.scheduler import Scheduler
from pairflow.engine.pairs.space import Triangle, leaves


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _scheduler(clock, **kw) -> Scheduler:
    tiles = [dataclasses.asdict(t) for t in leaves(Triangle(4), 1)]  # 6 tiles of one pair
    return Scheduler("unused", tiles, np.arange(4), np.arange(4), list(range(len(tiles))),
                     window=1, journal=False, clock=clock, **kw)


def test_a_tile_is_overdue_only_past_its_own_deadline():
    """Tiles handed out at 100 s with deadlines of 2 s (tile 0), 30 s (tile 1) and 2 s
    (tile 2, completed at once): at 102 s nothing is overdue (the rule is "more than"); at
    102.5 s tile 0 alone, with its elapsed time and deadline; at 131 s tile 0 and tile 1."""
    clock = Clock()
    s = _scheduler(clock, deadlines=[2.0, 30.0, 2.0, 60.0, 60.0, 60.0])
    for actor in ("a", "b", "c"):
        assert s.request(actor, "n")["tile"] == "abc".index(actor)
    s.complete("c", 2, [])
    clock.now = 102.0
    assert s.overdue() == []
    clock.now = 102.5
    assert s.overdue() == [(0, "a", 2.5, 2.0)]
    clock.now = 131.0
    assert s.overdue() == [(0, "a", 31.0, 2.0), (1, "b", 31.0, 30.0)]


def test_an_actor_is_silent_only_past_the_limit_since_it_was_last_heard():
    """Limit 5 s. Actor a asks for a tile at 100 s, b at 100 s and beats at 103 s: at 105 s
    neither is silent; at 105.5 s a is, for 5.5 s; at 108.5 s both. An actor told the run is
    done, or lost, is never silent; nor is anyone once every tile is done."""
    clock = Clock()
    s = _scheduler(clock, silent_after_s=5.0)
    s.request("a", "n")
    s.request("b", "n")
    clock.now = 103.0
    s.heartbeat("b")
    clock.now = 105.0
    assert s.silent() == []
    clock.now = 105.5
    assert s.silent() == [("a", 5.5)]
    clock.now = 108.5
    assert sorted(s.silent()) == [("a", 8.5), ("b", 5.5)]
    s.actor_lost("a", "killed")
    assert s.silent() == [("b", 5.5)]
    assert s.watch()["silent"] == [("b", 5.5)] and s.watch()["silent_after_s"] == 5.0
    for t in range(6):  # every tile done: nobody is waited for
        s.complete("b", t, [])
    assert s.silent() == []


def test_only_an_actors_running_tile_is_on_the_clock():
    """Actor a holds tiles 0 and 1 (handed out at 100 s, deadlines 2 s) and runs one compare at
    a time: at 103 s tile 0 alone is overdue (tile 1 waits behind it). When a completes tile 0
    at 101.5 s, tile 1's clock starts then: not overdue at 103 s, overdue at 104 s for 2.5 s."""
    clock = Clock()
    s = _scheduler(clock, deadlines=[2.0] * 6)
    assert [s.request("a", "n")["tile"] for _ in range(2)] == [0, 1]
    clock.now = 103.0
    assert s.overdue() == [(0, "a", 3.0, 2.0)]

    clock = Clock()
    s = _scheduler(clock, deadlines=[2.0] * 6)
    assert [s.request("a", "n")["tile"] for _ in range(2)] == [0, 1]
    clock.now = 101.5
    s.complete("a", 0, [])
    clock.now = 103.0
    assert s.overdue() == []
    clock.now = 104.0
    assert s.overdue() == [(1, "a", 2.5, 2.0)]


def test_a_killed_actors_waiting_tiles_keep_their_retries():
    """An actor killed for tile 0 (blame) also held tile 1: both go back to the queue, only
    tile 0 is charged an attempt, so with max_retries=1 a second kill for tile 0 fails the run
    naming tile 0's pairs, however often tile 1 waited behind it. Without blame (a dead
    actor), every tile it held is charged."""
    clock = Clock()
    s = _scheduler(clock, deadlines=[2.0] * 6, max_retries=1)
    for round_ in range(2):
        actor = f"a{round_}"
        assert sorted(s.request(actor, "n")["tile"] for _ in range(2)) == [0, 1]
        assert sorted(s.actor_lost(actor, "tile 0 passed its deadline", blame=[0])) == [0, 1]
    assert s.attempts.get(1, 0) == 0 and s.attempts[0] == 2
    assert s.error is not None and s.error.startswith("tile 0 ")
    s2 = _scheduler(Clock(), max_retries=1)
    s2.request("b", "n"), s2.request("b", "n")
    s2.actor_lost("b", "died")
    assert s2.attempts == {0: 1, 1: 1}
