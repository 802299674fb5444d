"""TopK parts are written with int32 indices where they fit, and a run's finalize merges them
(with any int64 part an earlier version wrote, as a resumed run finds) into each row's k best
as a plain sort of the whole matrix does (the oracle: numpy, no sink code)."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.pairs.sinks.base import SinkContext
from pairflow.engine.pairs.sinks.parts import TopK, _npy_head
from pairflow.engine.pairs.space import Rectangle
from pairflow.engine.pairs.tiles import Tile


def _oracle(values, k):
    out = []
    for q, row in enumerate(values):
        order = np.lexsort((np.arange(len(row)), -row))[:k]
        out += [(q, int(t), float(row[t]), r + 1) for r, t in enumerate(order)]
    return out


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.integers(2, 11), st.integers(1, 4),
       st.integers(0, 2 ** 31), st.booleans())
def test_compact_parts_and_an_old_int64_part_finalize_as_a_sort(k, nr, nc, leaf, seed, old):
    import tempfile
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, (nr, nc)) / 4.0  # many ties: the lower column wins
    with tempfile.TemporaryDirectory() as d:
        space = Rectangle(nr, nc)
        sink = TopK(k)
        sink.open(SinkContext(d, space, leaf, [f"q{i}" for i in range(nr)],
                              [f"t{j}" for j in range(nc)], {"value": "float64"}))
        tid = 0
        for r0 in range(0, nr, leaf):
            for c0 in range(0, nc, leaf):
                r1, c1 = min(nr, r0 + leaf), min(nc, c0 + leaf)
                tile = Tile(tid, r0, r1, c0, c1, (r1 - r0) * (c1 - c0))
                block = values[r0:r1, c0:c1]
                if old and tid == 0:  # a part as the int64 writer left it
                    ii, jj = np.nonzero(np.ones_like(block, bool))
                    part = np.zeros(len(ii), [("qi", np.int64), ("ti", np.int64),
                                              ("score", np.float64)])
                    part["qi"], part["ti"], part["score"] = ii + r0, jj + c0, block[ii, jj]
                    sink.store_tile(tile, sink._encode_part(
                        {f: part[f] for f in part.dtype.names}))
                else:
                    sink.write_tile(tile, {"value": block}, np.ones_like(block, bool))
                tid += 1
        kinds = {_npy_head(os.path.join(sink.parts_dir, f))[2]["qi"]
                 for f in os.listdir(sink.parts_dir)}
        assert (np.dtype(np.int32) in kinds) == (tid > 1 or not old)
        sink.before_finalize()
        import pyarrow.parquet as pq
        got = pq.read_table(sink.finalize()).to_pandas()
        rows = list(zip(got["qi"].tolist(), got["ti"].tolist(), got["score"].tolist(),
                        got["rank"].tolist()))
        assert sorted(rows) == sorted(_oracle(values, k))
