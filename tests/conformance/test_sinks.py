"""The all-pairs sink contract (``pairflow.engine.testing.sinks.SinkTests``) run by every sink of
the engine, each in the configurations below: its oracle is the brute-force one of the suite;
the dense sink's bytes are found in its files by ``tests/dense_layout.py``, which reads the
format on its own."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from pairflow.engine import DenseMatrix, Threshold, TopK
from pairflow.engine.testing.sinks import (SinkTests, expected_dense, expected_edges,
                                           expected_topk)
from tests.dense_layout import region_spans, tile_records


class TestDenseMatrix(SinkTests):
    @pytest.fixture
    def make_sink(self):
        return lambda: DenseMatrix(diagonal=-1.0)

    def check_result(self, w, result, pairs):
        import dask.array as da
        import zarr
        want = expected_dense(pairs, w.values, w.space.symmetric, diagonal=-1.0)
        np.testing.assert_array_equal(zarr.open_group(result, mode="r")["value"][...], want)
        np.testing.assert_array_equal(da.from_zarr(f"{result}/value").compute(), want)
        assert not os.path.exists(w.sink.partial)

    def spans_of(self, w, tile, finished=False):
        """Its records in the writers' logs while the run is under way, its cells (and their
        mirror) in the array's chunks once it is finished."""
        region = (tile.r0, tile.r1, tile.c0, tile.c1)
        if finished:
            mirror = w.space.symmetric and tile.r0 != tile.c0
            return region_spans(os.path.join(w.sink.path, "value"), region, mirror)
        return [(r["path"], r["start"], r["end"])
                for r in tile_records(w.sink.staging, region, "value")]

    def reread(self, w):
        w.sink._arrays = None  # it keeps its arrays open, and zarr may cache what it read
        return w.sink


TOPK = {"largest": dict(k=3), "smallest": dict(k=2, largest=False),
        "cols": dict(k=2, per="col")}  # cols: the k best rows of every column


class TestTopK(SinkTests):
    @pytest.fixture(params=sorted(TOPK))
    def make_sink(self, request):
        return lambda: TopK(**TOPK[request.param])

    def check_result(self, w, result, pairs):
        sink, symmetric = w.sink, w.space.symmetric
        got = pd.read_parquet(result)
        qkeys, tkeys = w.ctx.row_keys, w.ctx.col_keys
        if sink.per == "col" and not symmetric:  # the transposed matrix's rows
            pairs = [(j, i) for i, j in pairs]
            want = expected_topk(pairs, w.values.T, symmetric, sink.k, sink.largest)
            qkeys, tkeys = tkeys, qkeys
        else:
            want = expected_topk(pairs, w.values, symmetric, sink.k, sink.largest)
        assert list(zip(got.qi, got.ti, got.score, got["rank"])) == want
        assert list(got["query"]) == [qkeys[q] for q, *_ in want]
        assert list(got["target"]) == [tkeys[t] for _, t, *_ in want]


THRESHOLD = {"above": dict(t=6.0), "below": dict(t=2.0, above=False)}


class TestThreshold(SinkTests):
    @pytest.fixture(params=sorted(THRESHOLD))
    def make_sink(self, request):
        return lambda: Threshold(**THRESHOLD[request.param])

    def check_result(self, w, result, pairs):
        got = pd.read_parquet(result)
        want = expected_edges(pairs, w.values, w.sink.t, w.sink.above)
        assert list(zip(got.i, got.j, got.value)) == want
        assert list(got.a) == [w.ctx.row_keys[i] for i, *_ in want]
        assert list(got.b) == [w.ctx.col_keys[j] for _, j, *_ in want]
