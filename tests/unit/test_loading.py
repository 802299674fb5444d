"""Loading (engine/pairs/cache/loading.py), without Ray: load batches, and one item from a URL."""
import pytest

from pairflow.engine.pairs.cache.loading import load_batches


def test_load_batches_cover_every_item_once_in_order():
    items = list(range(23))
    for per_task in (1, 3, 10, 100):
        for slots in (1, 2, 4):
            got = load_batches(items, per_task, slots)
            assert [i for b in got for i in b] == items
            assert max(len(b) for b in got) <= per_task
            # never fewer batches than slots, while there are items enough
            assert len(got) >= min(slots, len(items))


def test_load_batches_hand_cases():
    assert load_batches([5, 6, 7, 8, 9], 100, 2) == [[5, 6, 7], [8, 9]]
    assert load_batches([5, 6, 7, 8, 9], 2, 1) == [[5, 6], [7, 8], [9]]
    assert load_batches([], 4, 2) == []


class _Object:
    """Stands in for an ObjectRef: awaitable, hashable, and counts its fetches."""

    def __init__(self, value):
        self.value, self.fetches = value, 0

    def __await__(self):
        self.fetches += 1
        if False:
            yield
        return self.value


def test_resolve_fetches_each_batch_once_and_indexes_its_parts():
    import asyncio
    from pairflow.engine.pairs.cache.loading import BatchPart, resolve
    batch, single = _Object(["a", "b", "c"]), _Object("z")
    handles = {7: BatchPart(batch, 2), 3: BatchPart(batch, 0), 9: single, 4: BatchPart(batch, 1)}
    assert asyncio.run(resolve(handles)) == {7: "c", 3: "a", 9: "z", 4: "b"}
    assert batch.fetches == 1 and single.fetches == 1
    assert asyncio.run(resolve({})) == {}

    async def one():
        return await BatchPart(batch, 1)
    assert asyncio.run(one()) == "b"


def test_one_object_loads_only_where_nothing_is_evicted_alone():
    from types import SimpleNamespace as NS
    from pairflow.engine.pairs.plan.sizing import one_object_loads
    one_node = [NS(actors=2)]
    two_nodes = [NS(actors=2), NS(actors=1)]
    assert one_object_loads(NS(holds_every_item=True, nodes=one_node))
    assert not one_object_loads(NS(holds_every_item=False, nodes=one_node))  # evictions
    assert not one_object_loads(NS(holds_every_item=True, nodes=two_nodes))  # L3 pulls
    # a node without actors (a store-only node) does not count
    assert one_object_loads(NS(holds_every_item=True, nodes=[NS(actors=2), NS(actors=0)]))




class _CountingApp:
    """An app whose compare costs next to nothing and records the tiles it was given."""

    def __init__(self):
        self.sides = []

    def url(self, key):
        return None

    def parse(self, key, raw):
        return len(key)

    def preprocess(self, key, item, device):
        return item

    def compare(self, left, right, mask, device):
        self.sides.append((len(left), len(right), int(mask.sum())))
        return None

    def item_nbytes(self, item):
        return 8


def test_measure_grows_a_fast_compare_into_a_tile():
    """Pairs of microseconds are timed inside a tile (the sample's items repeated), not around
    a 2 x 2 call; an app whose probe must stay the two items (weighted tiles) asks for no
    growth."""
    from pairflow.engine.pairs.cache.loading import MEASURE_MAX_SIDE, measure_stages
    app = _CountingApp()
    got = measure_stages(app, ["a", "bb"], "cpu")
    sides = [s for s, _, _ in app.sides]
    assert sides[0] == 2 and max(sides) > 2 and max(sides) <= MEASURE_MAX_SIDE
    assert all(s == r and m == s * s for s, r, m in app.sides)
    assert got["t_pair"] > 0 and got["item_bytes"] == 8
    app = _CountingApp()
    measure_stages(app, ["a", "bb"], "cpu", grow=False)
    assert {s for s, _, _ in app.sides} == {2}


class _ProbeClock:
    """The probe's clocks (``loading.time``), advanced only by the apps below: its wall clock
    (``perf_counter``) and this thread's CPU clock (``thread_time``). The parse and compare
    times are the hand-set ones exactly, whatever else the machine runs (busy-waiting on the
    real clock, a preemption after the deadline added 3 ms to a 12.5 ms mean under a loaded
    CI)."""

    def __init__(self):
        import time
        self.now, self.cpu, self.time = 0.0, 0.0, time.time

    def perf_counter(self):
        return self.now

    def thread_time(self):
        return self.cpu

    def spend(self, cpu_s: float, wait_s: float = 0.0) -> None:
        """``cpu_s`` of work on this thread, then ``wait_s`` waiting (a tool, a device)."""
        self.cpu += cpu_s
        self.now += cpu_s + wait_s


class _ColdStartApp(_CountingApp):
    """A parse of ``warm_s``, the first one in the instance ``cold_s`` more (on ``clock``):
    one-off costs an app's warm-up does not cover (a decoder's plugin, an FFT's plans)."""

    def __init__(self, cold_s, warm_s, clock):
        super().__init__()
        self.cold_s, self.warm_s, self.parses, self.clock = cold_s, warm_s, 0, clock

    def parse(self, key, raw):
        self.clock.now += self.warm_s + (self.cold_s if not self.parses else 0.0)
        self.parses += 1
        return len(key)


def test_a_cold_first_parse_does_not_set_the_parse_time(monkeypatch):
    """The probe's first parse paying 0.1 s of one-off costs over 10 ms ones: the mean would
    be 60 ms a parse (hand-computed: (0.11 + 0.01) / 2), and the load batch and leaf sized
    from it; the warm second parse stands for both: 10 ms, and no third parse. With one-off
    costs of 40 ms (first parse 50 ms against 10: 5x) the same; with 5 ms (15 against 10:
    1.5x) the mean stands: 12.5 ms."""
    from pairflow.engine.pairs.cache import loading
    clock = _ProbeClock()
    monkeypatch.setattr(loading, "time", clock)
    for cold, want in ((0.1, 0.01), (0.04, 0.01), (0.005, 0.0125)):
        app = _ColdStartApp(cold, 0.01, clock)
        got = loading.measure_stages(app, ["a", "bb"], "cpu", grow=False)
        assert app.parses == 2
        assert abs(got["t_parse"] - want) < 1e-12, (cold, got["t_parse"])


class _SharingApp(_CountingApp):
    """A compare that does each item's part once a tile (``per_item`` s of CPU) and then
    ``per_pair`` s a pair, as forensics' does: a pair costs less in a larger tile."""

    def __init__(self, per_item, per_pair, clock):
        super().__init__()
        self.per_item, self.per_pair, self.clock = per_item, per_pair, clock

    def compare(self, left, right, mask, device):
        self.sides.append((len(left), len(right), int(mask.sum())))
        self.clock.spend(self.per_item * (len(left) + len(right)) + self.per_pair * mask.size)


def test_the_probe_times_a_sharing_kernel_in_a_larger_tile_for_a_large_run(monkeypatch):
    """2 ms of each item's part and 0.1 ms a pair: 2.1 ms a pair in a 2 x 2 tile, 0.35 in one
    of 16 (hand-computed: 2 * 2 / 16 + 0.1 = 0.35). A run of 100,000 pairs lets the probe
    grow its compare to 16 x 16 (90 ms; the next, 32 x 32, would take 358 ms, over
    MEASURE_GROW_S); a run of 200 pairs keeps the 2 x 2 tile (4 x 4 would take 34 ms, over 1 %
    of the run's 0.42 s of compares)."""
    from pairflow.engine.pairs.cache import loading
    clock = _ProbeClock()
    monkeypatch.setattr(loading, "time", clock)
    app = _SharingApp(0.002, 0.0001, clock)
    got = loading.measure_stages(app, ["a", "bb"], "cpu", pairs=100_000)
    assert max(s for s, _, _ in app.sides) == 16
    assert got["t_pair"] == pytest.approx(0.00035, rel=1e-9)
    app = _SharingApp(0.002, 0.0001, clock)
    got = loading.measure_stages(app, ["a", "bb"], "cpu", pairs=200)
    assert {s for s, _, _ in app.sides} == {2}
    assert got["t_pair"] == pytest.approx(0.0021, rel=1e-9)


class _WaitingApp(_CountingApp):
    """A compare that waits 2 ms a pair and spends no CPU (a tool, a device, a sleep)."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def compare(self, left, right, mask, device):
        self.sides.append((len(left), len(right), int(mask.sum())))
        self.clock.spend(0.0, 0.002 * mask.size)


def test_a_waiting_compare_stops_the_probe_growing_by_its_wall_time(monkeypatch):
    """The probe times CPU, and a waiting compare spends almost none: by CPU alone its tile
    would double to MEASURE_MAX_SIDE (a 512 x 512 tile of this one sleeps 524 s). Its wall
    time stops it: 8 x 8 waits 128 ms (a 16 x 16, 4x that, fits MEASURE_GROW_WALL_S), 16 x 16
    waits 512 ms (a 32 x 32 would wait 2.05 s): hand-computed, 16 is the last side."""
    from pairflow.engine.pairs.cache import loading
    assert loading.MEASURE_GROW_WALL_S == 2.0
    clock = _ProbeClock()
    monkeypatch.setattr(loading, "time", clock)
    app = _WaitingApp(clock)
    got = loading.measure_stages(app, ["a", "bb"], "cpu", pairs=100_000)
    assert max(s for s, _, _ in app.sides) == 16
    assert got["t_pair"] == 0.0  # it spent no CPU


def test_probe_grows_while_a_larger_tile_still_cuts_a_pairs_cost():
    """Hand cases of the probe's rule: a short compare always grows; a long one grows while
    the doubled compare fits MEASURE_GROW_S and the last doubling cut a pair's cost by more
    than a tenth (forensics' kernel shares each item's part among a tile's pairs)."""
    from pairflow.engine.pairs.cache.loading import (MEASURE_AMORTISED, MEASURE_GROW_S,
                                                     MEASURE_MAX_SIDE, MEASURE_MIN_S,
                                                     probe_grows)
    assert probe_grows(2, MEASURE_MIN_S / 4 / 2)               # a 2 x 2 under the least
    assert not probe_grows(MEASURE_MAX_SIDE, 1e-9)             # the largest tile: no more
    # a first long tile: one doubling when the 4 x 4 fits the budget, none when it does not
    fits = MEASURE_GROW_S / 16
    assert probe_grows(2, fits) and not probe_grows(2, fits * 1.01)
    # 2 x 2 at 2.5 ms a pair, then 4 x 4 at 1.2: the cut is more than a tenth -> 8 x 8
    assert probe_grows(4, 0.0012, 0.0025) == (0.0012 * 64 <= MEASURE_GROW_S)
    # a pair costs what it did in half the tile: the kernel shares nothing, stop
    assert not probe_grows(4, 0.0010, 0.0010)
    assert MEASURE_AMORTISED == 0.9 and 64 * 0.00089 <= MEASURE_GROW_S
    assert not probe_grows(4, 0.00091, 0.0010) and probe_grows(4, 0.00089, 0.0010)
    # even while it falls, never a compare over the budget: MEASURE_GROW_S, or the run's
    assert not probe_grows(16, MEASURE_GROW_S / 1024 * 1.01, 1.0)
    assert probe_grows(4, 0.001, 0.002, budget_s=0.064)
    assert not probe_grows(4, 0.001, 0.002, budget_s=0.063)
    assert probe_grows(4, 0.00001, 0.002, budget_s=0.0)        # (a short one still grows)
    # a compare that waits spends almost no CPU: its wall time stops the growth once the
    # doubled tile (4x the pairs) would take more than MEASURE_GROW_WALL_S; a longer compare's
    # wall time does not (a busy machine's), its CPU budget bounds it
    from pairflow.engine.pairs.cache.loading import MEASURE_GROW_WALL_S
    assert probe_grows(8, 1e-9, wall_s=MEASURE_GROW_WALL_S / 4)
    assert not probe_grows(8, 1e-9, wall_s=MEASURE_GROW_WALL_S / 4 * 1.01)
    assert probe_grows(4, 0.0012, 0.0025, wall_s=10 * MEASURE_GROW_WALL_S)


class _WaitingParseApp(_CountingApp):
    """A parse of ``cpu_s`` of this thread's CPU and ``wait_s`` of waiting (for a core other
    processes hold, or for I/O), on ``clock``."""

    def __init__(self, cpu_s, wait_s, clock):
        super().__init__()
        self.cpu_s, self.wait_s, self.clock = cpu_s, wait_s, clock

    def parse(self, key, raw):
        self.clock.spend(self.cpu_s, self.wait_s)
        return len(key)


def test_the_probe_records_the_parse_cpu_apart_from_its_wall_time(monkeypatch):
    """20 ms of CPU and 180 ms of waiting a parse: ``t_parse`` is the wall (0.2 s), and
    ``t_parse_cpu`` the thread's CPU (0.02 s), what the executor's choice weighs."""
    from pairflow.engine.pairs.cache import loading
    clock = _ProbeClock()
    monkeypatch.setattr(loading, "time", clock)
    got = loading.measure_stages(_WaitingParseApp(0.02, 0.18, clock), ["a", "bb"], "cpu",
                                 grow=False)
    assert abs(got["t_parse"] - 0.2) < 1e-12 and abs(got["t_parse_cpu"] - 0.02) < 1e-12
