"""The contract every pipeline sink keeps (engine.pipeline.PipelineSink), run by each of them.

A sink is opened on a directory, gets the survivors of each batch in the order batches finish
(not their index order), and ``finalize`` gives its result. For every sink and every case:

* batches written in any order finalize to what a plain reference computes from the same
  records (pyarrow for the Parquet dataset, numpy for histograms; written here, not imported);
* nothing exists under the sink's final name before ``finalize``;
* empty input (no batch, or batches of no record) finalizes to the reference of no records;
* a second run into the same directory leaves the second run's result alone;
* ``finalize``'s value is where the sink says it goes in the run's result.

A new pipeline sink joins by adding a case to ``CASES``.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pairflow.engine.pipeline import Batch, PipelineSink
from pairflow.operators.histogram import Histogram
from pairflow.operators.parquet import ParquetSink

# -- the records: plain Python lists per batch, the reference's only input ---------------------


def _records(n_batches: int, size: int, seed: int) -> list[dict]:
    """Per batch: ids, a float ``x`` (some out of every histogram's range), a weight ``w`` and a
    jagged ``jets`` (0-4 values per record)."""
    rng = np.random.default_rng(seed)
    out, next_id = [], 0
    for _ in range(n_batches):
        n = int(size)
        ids = list(range(next_id, next_id + n))
        next_id += n
        out.append({"id": ids, "x": [float(v) for v in rng.normal(0, 1.5, n)],
                    "w": [float(v) for v in rng.uniform(0.5, 2.0, n)],
                    "jets": [[float(v) for v in rng.uniform(0, 300, int(k))]
                             for k in rng.integers(0, 5, n)]})
    return out


def _batch(rec: dict) -> Batch:
    """What the engine hands a sink: numpy columns, awkward for the jagged one."""
    import awkward as ak
    if not rec["id"]:  # as the engine makes one: every record of a batch filtered out
        one = {"id": [0], "x": [0.0], "w": [1.0], "jets": [[1.0]]}
        return _batch(one).take(np.zeros(0, np.int64))
    return Batch({"id": np.asarray(rec["id"], dtype=np.int64),
                  "x": np.asarray(rec["x"], dtype=float), "w": np.asarray(rec["w"], dtype=float),
                  "jets": ak.Array(rec["jets"])})


def _rows(records: list[dict]) -> list[dict]:
    return [{k: rec[k][i] for k in rec} for rec in records for i in range(len(rec["id"]))]


# -- one case per sink configuration -----------------------------------------------------------


class ParquetCase:
    def __init__(self, columns=None):
        self.columns = columns
        self.id = "parquet" + ("-" + "+".join(columns) if columns else "")
        self.final = "selected.parquet"

    def make(self) -> PipelineSink:
        return ParquetSink(self.final, columns=self.columns)

    def reference(self, records: list[dict]) -> list[dict]:
        keep = self.columns or ["id", "x", "w", "jets"]
        return sorted(({k: r[k] for k in keep} for r in _rows(records)), key=lambda r: r["id"])

    def observed(self, out_dir: str, returned) -> list[dict]:
        import pyarrow.parquet as pq
        assert returned == os.path.join(out_dir, self.final)
        table = pq.read_table(returned)
        if table.num_rows:
            assert sorted(table.column_names) == sorted(self.columns or ["id", "x", "w", "jets"])
        return sorted(table.to_pylist(), key=lambda r: r["id"])

    def compare(self, got, want) -> None:
        assert got == want


class HistogramCase:
    def __init__(self, id, column, edges, weight=None, values=None):
        self.id, self.column, self.edges, self.weight = id, column, np.asarray(edges), weight
        self.values = values or (lambda row: [row[column]])  # a row's values (jagged: many)
        self.final = f"hist-{id}.json"

    def make(self) -> PipelineSink:
        return Histogram(self.id, self.column, bins=self.edges, weight=self.weight)

    def reference(self, records: list[dict]) -> dict:
        vals, wts = [], []
        for row in _rows(records):
            for v in self.values(row):
                vals.append(v)
                wts.append(row[self.weight] if self.weight else 1.0)
        vals, wts = np.asarray(vals, float), np.asarray(wts, float)
        counts, _ = np.histogram(vals, self.edges, weights=wts if self.weight else None)
        sumw2, _ = np.histogram(vals, self.edges, weights=wts * wts if self.weight else None)
        return {"counts": counts, "sumw2": sumw2, "entries": len(vals)}

    def observed(self, out_dir: str, returned) -> dict:
        with open(os.path.join(out_dir, self.final)) as fh:
            stored = json.load(fh)
        assert stored == returned  # the file is what the run's result holds
        assert stored["name"] == self.id and stored["edges"] == self.edges.tolist()
        return {"counts": np.asarray(stored["counts"]), "sumw2": np.asarray(stored["sumw2"]),
                "entries": stored["entries"]}

    def compare(self, got, want) -> None:
        # weights add up batch by batch here and all at once in the reference
        np.testing.assert_allclose(got["counts"], want["counts"], rtol=1e-12, atol=0)
        np.testing.assert_allclose(got["sumw2"], want["sumw2"], rtol=1e-12, atol=0)
        assert got["entries"] == want["entries"]


CASES = [
    ParquetCase(),
    ParquetCase(columns=["id", "x"]),
    HistogramCase("x", "x", np.linspace(-3, 3, 13)),
    HistogramCase("x_weighted", "x", np.linspace(-3, 3, 13), weight="w"),
    HistogramCase("abs_x", lambda b: np.abs(np.asarray(b["x"])), [0, 0.5, 1, 2, 4],
                  values=lambda row: [abs(row["x"])]),
    HistogramCase("jets", "jets", np.linspace(0, 300, 7), weight="w",
                  values=lambda row: row["jets"]),
]


def _run(case, out_dir: str, records: list[dict], order, fresh: bool = True) -> tuple:
    """Open, write the batches in ``order``, finalize; in a ``fresh`` directory, nothing may
    appear under the final name until then."""
    sink = case.make()
    sink.open(out_dir)
    for index in order:
        sink.write(int(index), _batch(records[index]))
        if fresh:
            assert not os.path.exists(os.path.join(out_dir, case.final)), \
                "visible before finalize"
    return sink, sink.finalize()


@pytest.fixture
def out_dir(tmp_path):
    d = tmp_path / "result"
    d.mkdir()
    return str(d)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("seed", [0, 1])
def test_batches_in_any_order_finalize_to_the_reference(case, seed, out_dir):
    records = _records(n_batches=7, size=40, seed=seed)
    order = np.random.default_rng(100 + seed).permutation(len(records))
    assert list(order) != sorted(order)
    _, returned = _run(case, out_dir, records, order)
    case.compare(case.observed(out_dir, returned), case.reference(records))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("shape", ["no batch", "empty batches"])
def test_empty_input_finalizes_to_the_reference_of_no_records(case, shape, out_dir):
    records = [] if shape == "no batch" else _records(n_batches=3, size=0, seed=0)
    _, returned = _run(case, out_dir, records, range(len(records)))
    got = case.observed(out_dir, returned)
    case.compare(got, case.reference(records))
    assert (len(got) if isinstance(got, list) else got["entries"]) == 0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_second_run_into_the_same_directory_leaves_its_own_result(case, out_dir):
    first = _records(n_batches=4, size=30, seed=2)
    _run(case, out_dir, first, range(4))
    second = _records(n_batches=2, size=25, seed=3)
    _, returned = _run(case, out_dir, second, [1, 0], fresh=False)
    case.compare(case.observed(out_dir, returned), case.reference(second))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_result_says_where_finalize_goes(case, out_dir):
    sink, _ = _run(case, out_dir, _records(1, 5, seed=4), [0])
    assert isinstance(sink, PipelineSink)
    assert sink.result_group in ("outputs", "histograms") and isinstance(sink.result_key, str)
    expected = ("histograms", case.id) if isinstance(case, HistogramCase) else \
        ("outputs", "parquet")
    assert (sink.result_group, sink.result_key) == expected
