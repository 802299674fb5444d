"""``unit_records="auto"``: the fit of a tool's fixed and per-record cost from two timings,
and the unit size chosen from it, against hand-computed cases."""
import pytest

from engine.toolfarm.units import choose_unit_records, fit_unit_cost


def test_fit_is_the_line_through_the_two_timings():
    # 1 record: 0.043 s; 16 records: 0.043 + 15 x 0.007 = 0.148 s
    fixed, per_record = fit_unit_cost(0.043, 0.148, 16)
    assert per_record == pytest.approx(0.007) and fixed == pytest.approx(0.036)


def test_fit_never_goes_negative():
    fixed, per_record = fit_unit_cost(0.050, 0.040, 16)  # noise: the larger unit ran faster
    assert fixed == pytest.approx(0.050 - 1e-6) and per_record == 1e-6
    fixed, per_record = fit_unit_cost(0.001, 0.161, 16)  # no fixed cost at all
    assert fixed == 0.0 and per_record == pytest.approx(0.16 / 15)


def test_units_amortise_the_fixed_cost():
    # fixed 36 ms, 7 ms a record: a unit of N has a fixed share 36 / (36 + 7 N) <= 5 %
    # <=> N >= 36 x 0.95 / (0.05 x 7) = 97.7 -> 98
    n = choose_unit_records(0.036, 0.007, records=100_000, workers=2)
    assert n == 98
    assert 0.036 / (0.036 + 0.007 * n) <= 0.05 < 0.036 / (0.036 + 0.007 * (n - 1))


def test_every_worker_keeps_several_units():
    # the same tool on 1,200 records and 2 workers: 1200 // (2 x 4) = 150 >= 98, unchanged;
    # on 400 records: 400 // 8 = 50 caps it
    assert choose_unit_records(0.036, 0.007, records=1200, workers=2) == 98
    assert choose_unit_records(0.036, 0.007, records=400, workers=2) == 50
    assert choose_unit_records(0.036, 0.007, records=5, workers=2) == 1


def test_no_unit_runs_past_the_longest_allowed():
    # a slow tool (2 s a record, 100 s fixed): 60 s / 2 s = 30 records at most
    assert choose_unit_records(100.0, 2.0, records=10**6, workers=2) == 30
    # no fixed cost: one record a unit is enough
    assert choose_unit_records(0.0, 0.01, records=1000, workers=2) == 1
