"""The matrix view's region inputs (rows from / to, columns from / to), in-process.

A browser mounts a widget from whichever rerun's element it renders first; a loaded browser
applies several reruns at once, so the element it mounts may be a later one than the rerun that
set the widget's value (Streamlit tells it that value once, in that rerun). It then shows the
element's default and sends it back as the widget's value. The region inputs had defaults of
their bounds' floor (0, 1, 0, 1) and the region written to their keys: a live run's page showed
ONE heatmap cell (rows 0-1 x columns 0-1) until "whole matrix" was pressed (CI, and reproduced
with the browser's CPU throttled 10x: the session held 60, the browser sent 1). So here, at
every rerun, each region input's element default is the value the session holds: a browser
mounting any of these elements shows what the server draws.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tests.conftest import need_module

AppTest = need_module("streamlit.testing.v1").AppTest
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_synth import write_run  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
LABELS = ("rows from", "rows to", "columns from", "columns to")


def _inputs(at) -> list:
    by_label = {n.label: n for n in at.number_input}
    return [by_label[label] for label in LABELS]


def _defaults_hold_values(at) -> tuple:
    assert not at.exception, [e.value for e in at.exception]
    ins = _inputs(at)
    for n in ins:  # what a browser mounting this element shows, against what the session holds
        assert n.proto.default == n.value, (n.label, n.proto.default, n.value)
    return tuple(int(n.value) for n in ins)


def _fact(at, key: str) -> str:
    text = "\n".join(m.value for m in at.markdown)
    m = re.search(rf"`{re.escape(key)}: ([^`]+)`", text)
    assert m, f"no {key!r} in {text}"
    return m.group(1)


@pytest.mark.timeout(300)
def test_region_inputs_default_to_what_the_session_holds(monkeypatch, tmp_path):
    n = 24
    write_run(tmp_path / "run", n_items=n, leaf_items=4)
    monkeypatch.setattr(sys, "argv", [APP, str(tmp_path / "run")])
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["view"] = "results"
    at.run()
    assert _defaults_hold_values(at) == (0, n, 0, n)
    assert _fact(at, "shown") == f"{n} × {n} cells"
    at.run()  # a refresh: nothing set, the same elements
    assert _defaults_hold_values(at) == (0, n, 0, n)
    # typed: the typed value is the element's default from the next rerun on
    _inputs(at)[1].set_value(9).run()
    assert _fact(at, "shown") == f"9 × {n} cells"
    at.run()
    assert _defaults_hold_values(at) == (0, 9, 0, n)
    assert _fact(at, "shown") == f"9 × {n} cells"
    # the button: new inputs whose defaults are the whole matrix
    at.button(key="mx_whole").click().run()
    assert _defaults_hold_values(at) == (0, n, 0, n)
    assert _fact(at, "shown") == f"{n} × {n} cells"
    at.run()
    assert _defaults_hold_values(at) == (0, n, 0, n)


# --------------------------------------------------------------------------- the pure part


def _nearest(v: int, lo: int, hi: int) -> int:
    """The integer of [lo, hi] nearest to v, by search (the oracle of the clamp)."""
    return min(range(lo, hi + 1), key=lambda x: abs(x - v))


sides = st.integers(1, 400)
bound = st.integers(-50, 500)


@settings(max_examples=300, deadline=None)
@given(sides, sides, st.one_of(st.none(), st.tuples(bound, bound, bound, bound)))
def test_region_inputs_are_within_bounds_and_follow_the_matrix(n_rows, n_cols, picked):
    from pairflow.dashboard.results_view import region_inputs
    values, lows, highs = region_inputs((n_rows, n_cols), picked)
    # the inputs' bounds: a start is a row / column index, an end one past one
    assert lows == (0, 1, 0, 1) and highs == (n_rows - 1, n_rows, n_cols - 1, n_cols)
    if picked is None:  # the whole matrix, whatever its shape (a live page follows it)
        assert values == (0, n_rows, 0, n_cols)
    else:  # what was picked, each value brought to the nearest its input allows
        assert values == tuple(_nearest(v, lo, hi) for v, lo, hi in zip(picked, lows, highs))
    # within bounds: Streamlit never resets such a value to its default (it raises, with value=)
    assert all(lo <= v <= hi for v, lo, hi in zip(values, lows, highs))
