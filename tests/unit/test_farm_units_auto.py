"""``unit_records="auto"``: the throughput-curve policy (``sizing.UnitSizer``) fed CPU and wall
timings of hand-made tool curves, against hand-computed ladders and choices; cores per worker; the cut
that continues where the ladder's units end. No Ray, no tool."""
import pytest
from hypothesis import given, settings, strategies as st

from pairflow.engine.toolfarm.sizing import UnitSizer, threads_per_worker
from pairflow.engine.toolfarm.units import cut_units, take_unit

RECORD_BYTES = 100  # every record of the hand cases: the rate in records is bytes / 100


def ladder(sizer: UnitSizer, seconds, records: int, load: float = 3.0) -> list[int]:
    """Drive the ladder as the driver does: a step of one unit per worker, each costing
    ``seconds(n)`` of CPU and ``load`` times that of wall clock (a busy machine); returns
    the sizes run."""
    sizes, left = [], records
    while (n := sizer.next_step(left)) is not None:
        for _ in range(sizer.workers):
            sizer.observe(n, n, n * RECORD_BYTES, load * seconds(n), seconds(n))
        sizes.append(n)
        left -= n * sizer.workers
    return sizes


def sizer(records: int, workers: int, record_bytes: float = RECORD_BYTES) -> UnitSizer:
    """The hand cases' knobs, stated here (the defaults may move): a ladder from 2 records,
    x4 a step, 4 units per worker, units of at most 60 s, the ladder done once the fixed cost
    is at most 10 % of a unit, units cut where it is 1 %, a step 15 % slower than the best
    is a tool slowing down."""
    return UnitSizer(records, workers, record_bytes, units_per_worker=4, max_unit_s=60.0,
                     first=2, factor=4, share=0.01, ladder_share=0.10, fall=0.15)


def line(fixed, per):
    return lambda n: fixed + per * n


def test_the_ladder_measures_the_fixed_cost_and_cuts_where_it_is_one_percent():
    # 50 ms a run + 10 ms a record (1e-4 s a byte): the fixed cost's share of a unit
    #   2: 0.05/0.07 = 71 %   8: 0.05/0.13 = 38 %   32: 0.05/0.37 = 13.5 %
    #   128: 0.05/1.33 = 3.8 % <= 10 %: the line is measured, the ladder stops
    # 1 %: 0.05 / (0.05 + 0.01 n) = 0.01 -> n = 0.05 x 0.99 / 0.0001 = 495 records
    s = sizer(10_000, 2, RECORD_BYTES)
    assert s.bound() == 10_000 // 8 == 1250
    assert ladder(s, line(0.05, 0.01), 10_000) == [2, 8, 32, 128]
    assert s.stopped == "fit"
    assert s.fit() == pytest.approx((0.05, 1e-4))
    assert s.choose() == 495
    assert s.rate_at(495) == pytest.approx(495 / 5.0)


def test_cpu_time_decides_not_the_wall_clock():
    # the same tool measured at load 1 and at load 7 (wall 7 x its CPU): the same choice;
    # a tool that waits (CPU 1 % of its wall time) is measured by the wall clock
    a, b = sizer(10_000, 2), sizer(10_000, 2)
    ladder(a, line(0.05, 0.01), 10_000, load=1.0)
    ladder(b, line(0.05, 0.01), 10_000, load=7.0)
    assert a.choose() == b.choose() == 495
    w = sizer(10_000, 2)
    w.observe(2, 2, 200, 1.0, 0.01)
    w.observe(2, 2, 200, 1.0, 0.01)
    assert w.rate(w.steps[0]) == pytest.approx(2.0)       # 400 bytes in 2 s of wall clock
    w.observe(8, 8, 800, 2.0, None)                        # CPU time unknown: the wall clock
    assert w.rate(w.steps[1]) == pytest.approx(4.0)


def test_units_stop_at_the_balance_bound():
    # 500 records, 2 workers x 4 units: bound 62. 0.2 s a run + 0.1 s a record:
    #   2: 0.2/0.4 = 50 %   8: 0.2/1.0 = 20 %   32: 0.2/3.4 = 5.9 %: the ladder stops
    # 1 % would take 0.2 x 0.99 / 0.001 = 198 records: the bound cuts it to 62
    s = sizer(500, 2, RECORD_BYTES)
    assert ladder(s, line(0.2, 0.1), 500) == [2, 8, 32]
    assert s.stopped == "fit" and s.choose() == 62
    # 2 s a run + 10 ms a record: still 76 % fixed cost at the bound: the ladder stops there
    s = sizer(500, 2, RECORD_BYTES)
    assert ladder(s, line(2.0, 0.01), 500) == [2, 8, 32, 62]
    assert s.stopped == "bound" and s.choose() == 62


def test_a_short_rest_is_one_unit_per_worker():
    # 100 records, 50 ms a run + 10 ms a record: after the step of 2 (28.6/s) 96 records are
    # left: 96 / 28.6 / 2 = 1.68 s a worker < 2 s -> stop; 48 records a unit
    s = sizer(100, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.01), 100) == [2]
    assert s.stopped == "short" and s.choose() == 48
    # 10 x slower a record: 96 / 8.0 / 2 = 6 s left a worker: the ladder goes on (8: 0.05 /
    # 0.85 = 5.9 % fixed: done); 1 % would be 50 records, the bound (100 // 8) is 12
    s = sizer(100, 2, RECORD_BYTES)
    assert ladder(s, line(0.05, 0.1), 100) == [2, 8]
    assert s.stopped == "fit" and s.choose() == 12


def test_no_unit_runs_past_the_longest_allowed():
    # 10 s a run + 1 s a record: 2 -> 12 s, 8 -> 18 s (8 / 18 = 0.44/s); 32 records at that
    # rate would take 72 s > 60 s: the ladder stops. On the line, t(n) <= 60 s: n <= 50
    # (1 % fixed cost would need 990 records)
    s = sizer(10**6, 2, RECORD_BYTES)
    assert ladder(s, line(10.0, 1.0), 10**6) == [2, 8]
    assert s.stopped == "max_unit_s" and s.choose() == 50
    assert line(10.0, 1.0)(50) <= 60
    # one step measured (no line yet): at its rate, 2 records in 32 s -> 3 records
    s = sizer(10**6, 2, RECORD_BYTES)
    assert ladder(s, line(30.0, 1.0), 10**6) == [2]
    assert s.stopped == "max_unit_s" and s.choose() == 3 and line(30.0, 1.0)(3) <= 60


def test_a_tool_slower_on_big_units_keeps_the_best_size():
    # records per second 2: 50, 8: 100, 32: 80 (a tool slower per record on big units):
    # 80 < 0.85 x 100 stops the ladder; the best measured size is 8
    rate = {2: 50.0, 8: 100.0, 32: 80.0}
    s = sizer(10_000, 2, RECORD_BYTES)
    assert ladder(s, lambda n: n / rate[n], 10_000) == [2, 8, 32]
    assert s.stopped == "falls" and s.choose() == 8


def test_the_fit_weighs_units_by_their_relative_error():
    # records that cost 10 % more or less than the mean: a big unit's +-10 % would move an
    # unweighted line's fixed cost by its own size; weighted by 1 / cost^2 the small units
    # (mostly fixed cost) pin it: 0.08 s + 0.012 s a record, units of 1 and 64 records
    s = sizer(10_000, 2)
    for n, c in [(1, 0.092 * 1.1), (1, 0.092 * 0.9), (64, 0.848 * 1.1), (64, 0.848 * 0.9)]:
        s.observe(n, n, n * RECORD_BYTES, c, c)
    fixed, per_byte = s.fit()
    assert fixed == pytest.approx(0.08, rel=0.05)
    assert per_byte * RECORD_BYTES == pytest.approx(0.012, rel=0.15)


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
    # record a unit of the chosen size takes at least 2 s -> the default tail
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
    s.observe(2, 2, 600, 1.0, 1.0)
    s.observe(2, 2, 200, 1.0, 1.0)
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
