"""The pipeline sink contract (``pairflow.engine.testing.pipeline_sinks.PipelineSinkTests``) run
by each sink of the engine in the configurations below; the references are plain ones written
here: sorted rows for the Parquet dataset (read back with pyarrow), ``numpy.histogram`` for
histograms."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from pairflow.engine.testing.pipeline_sinks import PipelineSinkTests, rows
from pairflow.operators.histogram import Histogram
from pairflow.operators.parquet import ParquetSink

ALL = ["id", "x", "w", "jets"]


class TestParquetSink(PipelineSinkTests):
    @pytest.fixture(params=[None, ["id", "x"]], ids=["all", "id+x"])
    def config(self, request):
        return request.param  # the columns kept

    def make_sink(self, columns):
        return ParquetSink("selected.parquet", columns=columns)

    def final_name(self, columns):
        return "selected.parquet"

    def reference(self, columns, batches):
        keep = columns or ALL
        return sorted(({k: r[k] for k in keep} for r in rows(batches)), key=lambda r: r["id"])

    def observed(self, columns, out_dir, returned):
        import pyarrow.parquet as pq
        assert returned == os.path.join(out_dir, "selected.parquet")
        table = pq.read_table(returned)
        if table.num_rows:
            assert sorted(table.column_names) == sorted(columns or ALL)
        return sorted(table.to_pylist(), key=lambda r: r["id"])

    def count(self, got):
        return len(got)

    def result_place(self, columns):
        return ("outputs", "parquet")


HISTOGRAMS = {  # name: (column, edges, weight, a row's values: many for a jagged column)
    "x": ("x", np.linspace(-3, 3, 13), None, lambda row: [row["x"]]),
    "x_weighted": ("x", np.linspace(-3, 3, 13), "w", lambda row: [row["x"]]),
    "abs_x": (lambda b: np.abs(np.asarray(b["x"])), np.asarray([0, 0.5, 1, 2, 4]), None,
              lambda row: [abs(row["x"])]),
    "jets": ("jets", np.linspace(0, 300, 7), "w", lambda row: row["jets"]),
}


class TestHistogram(PipelineSinkTests):
    @pytest.fixture(params=list(HISTOGRAMS))
    def config(self, request):
        return request.param

    def make_sink(self, name):
        column, edges, weight, _ = HISTOGRAMS[name]
        return Histogram(name, column, bins=edges, weight=weight)

    def final_name(self, name):
        return f"hist-{name}.json"

    def reference(self, name, batches):
        _, edges, weight, values = HISTOGRAMS[name]
        vals, wts = [], []
        for row in rows(batches):
            for v in values(row):
                vals.append(v)
                wts.append(row[weight] if weight else 1.0)
        vals, wts = np.asarray(vals, float), np.asarray(wts, float)
        counts, _ = np.histogram(vals, edges, weights=wts if weight else None)
        sumw2, _ = np.histogram(vals, edges, weights=wts * wts if weight else None)
        return {"counts": counts, "sumw2": sumw2, "entries": len(vals)}

    def observed(self, name, out_dir, returned):
        with open(os.path.join(out_dir, self.final_name(name))) as fh:
            stored = json.load(fh)
        assert stored == returned  # the file is what the run's result holds
        assert stored["name"] == name and stored["edges"] == HISTOGRAMS[name][1].tolist()
        return {"counts": np.asarray(stored["counts"]), "sumw2": np.asarray(stored["sumw2"]),
                "entries": stored["entries"]}

    def compare(self, got, want):
        # weights add up batch by batch here and all at once in the reference
        np.testing.assert_allclose(got["counts"], want["counts"], rtol=1e-12, atol=0)
        np.testing.assert_allclose(got["sumw2"], want["sumw2"], rtol=1e-12, atol=0)
        assert got["entries"] == want["entries"]

    def count(self, got):
        return got["entries"]

    def result_place(self, name):
        return ("histograms", name)
