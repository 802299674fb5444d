"""The engine's configuration space, drawn (shapes.py lists each dimension and how it is drawn)
and held against a brute force (oracle.py) with the run directory's invariants (harness.py).

CI runs a fixed-seed budget: ``IN_PROCESS_EXAMPLES`` shapes in-process and ``RAY_EXAMPLES`` on
a local Ray (derandomised: the same shapes every run). ``PAIRFLOW_DIFF_EXAMPLES=N`` runs N of
each instead, ``PAIRFLOW_DIFF_SEED=S`` draws another fixed set; a failure prints its shrunk
shape, which becomes a named case of test_regressions.py.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.differential.harness import note_shape, run_and_check
from tests.differential.shapes import run_shapes

IN_PROCESS_EXAMPLES = int(os.environ.get("PAIRFLOW_DIFF_EXAMPLES", "150"))
RAY_EXAMPLES = int(os.environ.get("PAIRFLOW_DIFF_EXAMPLES", "8"))
SEED = int(os.environ.get("PAIRFLOW_DIFF_SEED", "0"))
_SETTINGS = dict(deadline=None, derandomize=SEED == 0, database=None, print_blob=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@seed(SEED)
@settings(max_examples=IN_PROCESS_EXAMPLES, **_SETTINGS)
@given(run_shapes(executor="inprocess"))
def test_in_process(shape):
    note_shape(shape)
    run_and_check(shape)


@pytest.mark.ray
@seed(SEED)
@settings(max_examples=RAY_EXAMPLES, **_SETTINGS)
@given(shape=run_shapes(executor="ray", max_n=60))
def test_local_ray(ray_local, shape):
    note_shape(shape)
    run_and_check(shape)
