"""A pipeline the pipeline tests share (unit: local executor; integration: on Ray): random
records, four operators of known cost and selectivity, and the survivors computed with numpy
alone (the oracle)."""
from __future__ import annotations

import numpy as np

from pairflow.engine.pipeline import Filter, Map


def data(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    return {"id": np.arange(n), "x": rng.normal(size=n), "y": rng.uniform(size=n),
            "z": rng.uniform(size=n)}


def spin(b, reps):
    """Real CPU work proportional to the records (a costly operator)."""
    v = np.asarray(b["z"], float)
    for _ in range(reps):
        v = np.sqrt(v * v + 1.0) - 0.5
    return v


def ops(reps=40):
    return [
        Filter("costly", lambda b: spin(b, reps) > -1e9),      # expensive, passes everything
        Map("x2", lambda b: np.asarray(b["x"]) ** 2),
        Filter("far", lambda b: b["x2"] > 1.0, after=["x2"]),  # cheap, ~32% pass
        Filter("low", lambda b: b["y"] < 0.25),                # cheap, 25% pass
    ]


def expected(d):
    """The ids that pass, by numpy on the raw columns."""
    return d["id"][(d["x"] ** 2 > 1.0) & (d["y"] < 0.25)]
