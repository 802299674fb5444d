"""``unit_records="auto"``: the throughput-curve policy (``sizing.UnitSizer``) fed timings of
hand-made tool curves, against hand-computed ladders and choices; cores per worker; the cut
that continues where the ladder's units end. No Ray, no tool."""
import pytest
from hypothesis import given, settings, strategies as st

from pairflow.engine.toolfarm.sizing import UnitSizer, threads_per_worker
from pairflow.engine.toolfarm.units import cut_units, take_unit

RECORD_BYTES = 100  # every record of the hand cases: the rate in records is bytes / 100


def ladder(sizer: UnitSizer, seconds, records: int) -> list[int]:
    """Drive the ladder as the driver does: a step of one unit per worker, each timed by
    ``seconds(n)``; returns the sizes run."""
    sizes, left = [], records
    while (n := sizer.next_step(left)) is not None:
        for _ in range(sizer.workers):
            sizer.observe(n, n, n * RECORD_BYTES, seconds(n))
        sizes.append(n)
        left -= n * sizer.workers
    return sizes


def sizer(records: int, workers: int, record_bytes: float = RECORD_BYTES) -> UnitSizer:
    """The hand cases' knobs, stated here (the defaults may move): a ladder from 2 records,
    x4 a step, 4 units per worker, units of at most 60 s, the knee at +10 %, 5 % tolerance."""
    return UnitSizer(records, workers, record_bytes, units_per_worker=4, max_unit_s=60.0,
                     first=2, factor=4, gain=0.10, tolerance=0.05)


def line(fixed, per):
    return lambda n: fixed + per * n


def test_the_ladder_stops_at_the_knee_and_takes_the_smallest_size_near_the_best():
    # 50 ms a run + 10 ms a record; records per second n / t(n):
    #   2: 2/0.07 = 28.6   8: 8/0.13 = 61.5   32: 32/0.37 = 86.5   128: 128/1.33 = 96.2
    #   512: 512/5.17 = 99.0 (+2.9 % over 128 < 10 %: the knee)
    # best 99.0; within 5 %: >= 94.1 -> 128 is the smallest such size
    s = sizer(10_000, 2, RECORD_BYTES)
    assert s.bound() == 10_000 // 8 == 1250
    assert ladder(s, line(0.05, 0.01), 10_000) == [2, 8, 32, 128, 512]
    assert s.stopped == "knee"
    assert s.choose() == 128
    assert s.rate_at(128) == pytest.approx(128 / 1.33)


def test_a_curve_still_rising_at_the_bound_takes_the_bound():
    # 500 records, 2 workers x 4 units: bound 62. 0.2 s a run + 0.1 s a record:
    #   2: 5.0/s   8: 8.0/s   32: 9.41/s   62: 62/6.4 = 9.69/s (+3 %: the knee)
    # best 9.69; within 5 %: >= 9.20 -> 32
    s = sizer(500, 2, RECORD_BYTES)
    assert ladder(s, line(0.2, 0.1), 500) == [2, 8, 32, 62]
    assert s.stopped == "knee" and s.choose() == 32
    # a tool still 31 % faster per record at 62 (62 / 5.0 s = 12.4/s): the bound ends the
    # ladder while the curve rises -> units of the bound
    s = sizer(500, 2, RECORD_BYTES)
    assert ladder(s, {2: 0.4, 8: 1.0, 32: 3.4, 62: 5.0}.get, 500) == [2, 8, 32, 62]
    assert s.stopped == "bound" and s.choose() == 62


def test_a_short_rest_is_one_unit_per_worker():
    # 100 records, 50 ms a run + 10 ms a record: after the step of 2 (28.6/s) 96 records are
    # left: 96 / 28.6 / 2 = 1.68 s a worker < 2 s -> stop; 48 records a unit
    s = sizer(100, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.01), 100) == [2]
    assert s.stopped == "short" and s.choose() == 48
    # 10 x slower a record: 96 / 8.0 / 2 = 6 s left a worker: the ladder goes on (8: 9.41/s,
    # 80 / 9.41 / 2 = 4.3 s; 12: 9.6/s, +2 %: the knee)
    s = sizer(100, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.1), 100) == [2, 8, 12]


def test_no_unit_runs_past_the_longest_allowed():
    # 1 s a run + 2 s a record: 2 -> 5 s (0.400/s), 8 -> 17 s (0.471/s, +17.6 %);
    # 32 records at 8's rate would take 68 s > 60 s: the ladder stops; 60 s x 0.471/s = 28
    # records (at the last measured rate, which larger units only beat: t(28) = 57 s)
    s = sizer(10**6, 2, RECORD_BYTES)
    assert ladder(s, line(1.0, 2.0), 10**6) == [2, 8]
    assert s.stopped == "max_unit_s" and s.choose() == 28
    assert line(1.0, 2.0)(28) <= 60


def test_a_curve_that_falls_again_keeps_the_best_size():
    # records per second 2: 50, 8: 100, 32: 80 (a tool slower per record on big units):
    # 80 < 1.1 x 100 stops the ladder; the best measured size is 8
    rate = {2: 50.0, 8: 100.0, 32: 80.0}
    s = sizer(10_000, 2, RECORD_BYTES)
    assert ladder(s, lambda n: n / rate[n], 10_000) == [2, 8, 32]
    assert s.stopped == "knee" and s.choose() == 8


def test_too_few_records_for_a_step_cut_for_balance_alone():
    # 20 records, 2 workers: bound 20 // 8 = 2; one step of 2, then the bound ends it
    s = sizer(20, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.01), 20) == [2]
    assert s.stopped == "bound" and s.choose() == 2
    # 3 records on 2 workers: bound 1, a step of 1 record each, then the bound
    s = sizer(3, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.01), 3) == [1] and s.choose() == 1
    # 1 record on 2 workers: no step fits (2 x 1 > 1): nothing measured, no estimate
    s = sizer(1, 2, RECORD_BYTES)
    assert s.next_step(1) is None and s.stopped == "records" and s.choose() == 1
    assert s.work_s(1, 2, 1) is None


def test_short_units_are_not_cut_smaller_at_the_end():
    # 50 ms + 10 ms a record: a unit of 128 takes 1.33 s < 2 s -> no tail; at 0.25 s a
    # record a unit of 128 takes 32 s -> the default tail
    s = sizer(10_000, 2)
    ladder(s, line(0.05, 0.01), 10_000)
    assert s.tail_units(128, 4) == 0
    s = sizer(10_000, 2)
    ladder(s, line(0.05, 0.25), 10_000)
    assert s.tail_units(s.choose(), 4) == 4 and s.choose() / s.rate_at(s.choose()) >= 2.0


def test_rates_count_bytes_so_long_records_weigh_more():
    # mean record 200 bytes; one unit of 2 records, 600 bytes, in 1 s, another of 2 records,
    # 200 bytes, in 1 s: 800 bytes / 2 s = 400 B/s = 2 records/s at the mean record
    s = sizer(1000, 2, 200)
    s.observe(2, 2, 600, 1.0)
    s.observe(2, 2, 200, 1.0)
    assert s.rate(s.steps[0]) == pytest.approx(2.0)
    # the rest's work per CPU: 996 records / 2 per s / 2 CPUs
    assert s.work_s(996, 2, 2) == pytest.approx(249.0)


@pytest.mark.parametrize("cores,units,workers,want", [
    (2, 10, None, [1, 1]),       # a core each
    (2, 1, None, [2]),           # one unit (one file): one worker with both cores
    (4, 3, None, [2, 1, 1]),     # never more workers than units; the spare core to the first
    (2, 10, 1, [2]),             # the user's one worker owns the node
    (16, 100, 3, [6, 5, 5]),
])
def test_threads_per_worker(cores, units, workers, want):
    assert threads_per_worker(cores, units, workers) == want
    assert sum(want) == max(cores, len(want))


@settings(derandomize=True, max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=4),
       st.lists(st.integers(1, 6), min_size=0, max_size=4), st.integers(1, 7))
def test_the_ladder_and_the_rest_cover_every_record_once_in_order(per_file, steps, n):
    """Units taken one by one at the ladder's sizes, then ``cut_units`` from where they end:
    every record of every file exactly once, in input order, no unit across files
    (oracle: the record list built from the file sizes alone)."""
    offsets = [[10 * k for k in range(r + 1)] for r in per_file]
    want = [(f, r) for f, c in enumerate(per_file) for r in range(c)]
    units, pos = [], (0, 0)
    for size in steps:
        got = take_unit(offsets, pos, len(units), size)
        if got is None:
            break
        units.append(got[0])
        pos = got[1]
    units += cut_units(offsets, n, 2, start=pos, uid0=len(units))
    assert [u.uid for u in units] == list(range(len(units)))
    seen = [(u.file, u.start // 10 + k) for u in units for k in range(u.records)]
    assert seen == want
    assert [u.first for u in units] == [want.index((u.file, u.start // 10)) for u in units]
    assert all(u.end == offsets[u.file][u.start // 10 + u.records] for u in units)
