"""The contract every filter pipeline's sink keeps (``pairflow.engine.pipeline.PipelineSink``) as a
base class.

A sink is opened on a directory, gets the survivors of each batch in the order batches finish
(not their index order), and ``finalize`` gives its result. For every sink and configuration:

* batches written in any order finalize to what a plain reference computes from the same
  records (the subclass's ``reference``: plain Python or numpy over the records, never the sink);
* nothing exists under the sink's final name before ``finalize``;
* empty input (no batch, or batches of no record) finalizes to the reference of no records;
* a second run into the same directory leaves the second run's result alone;
* ``finalize``'s value is where the sink says it goes in the run's result.

The records are plain Python lists per batch (ids, a float ``x`` partly outside every
histogram's range, a weight ``w`` and a jagged ``jets`` of 0-4 values), handed to the sink as the
engine hands them: numpy columns, awkward for the jagged one. A subclass gives the fixture
``config`` (parametrize it), and ``make_sink``, ``final_name``, ``reference``, ``observed``,
``compare``, ``count`` and ``result_place`` for a configuration.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from pairflow.engine.pipeline import Batch, PipelineSink

__all__ = ["PipelineSinkTests", "records", "rows"]


def records(n_batches: int, size: int, seed: int) -> list[dict]:
    """Per batch: ids, ``x``, ``w`` and ``jets`` as plain Python lists."""
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


def rows(batches: list[dict]) -> list[dict]:
    """Every record as a dict, batch after batch."""
    return [{k: rec[k][i] for k in rec} for rec in batches for i in range(len(rec["id"]))]


def _batch(rec: dict) -> Batch:
    import awkward as ak
    if not rec["id"]:  # as the engine makes one: every record of a batch filtered out
        one = {"id": [0], "x": [0.0], "w": [1.0], "jets": [[1.0]]}
        return _batch(one).take(np.zeros(0, np.int64))
    return Batch({"id": np.asarray(rec["id"], dtype=np.int64),
                  "x": np.asarray(rec["x"], dtype=float), "w": np.asarray(rec["w"], dtype=float),
                  "jets": ak.Array(rec["jets"])})


class PipelineSinkTests:
    """Subclass, give ``config`` and the methods below; see the module's docstring."""

    @pytest.fixture
    def config(self):
        raise NotImplementedError("a subclass parametrizes its configurations")

    def make_sink(self, config) -> PipelineSink:
        raise NotImplementedError

    def final_name(self, config) -> str:
        """The file or directory under the output directory that ``finalize`` makes."""
        raise NotImplementedError

    def reference(self, config, batches: list[dict]):
        raise NotImplementedError

    def observed(self, config, out_dir: str, returned):
        """The result as it stands on disk, checked against ``returned``."""
        raise NotImplementedError

    def compare(self, got, want) -> None:
        assert got == want

    def count(self, got) -> int:
        """How many records the observed result holds."""
        raise NotImplementedError

    def result_place(self, config) -> tuple[str, str]:
        """(group, key) of the run's result that ``finalize``'s value goes to."""
        raise NotImplementedError

    @pytest.fixture
    def out_dir(self, tmp_path):
        d = tmp_path / "result"
        d.mkdir()
        return str(d)

    def run(self, config, out_dir, batches, order, fresh=True):
        """Open, write the batches in ``order``, finalize; in a ``fresh`` directory nothing may
        appear under the final name until then."""
        sink = self.make_sink(config)
        sink.open(out_dir)
        final = os.path.join(out_dir, self.final_name(config))
        for index in order:
            sink.write(int(index), _batch(batches[index]))
            if fresh:
                assert not os.path.exists(final), "visible before finalize"
        return sink, sink.finalize()

    @pytest.mark.parametrize("seed", [0, 1])
    def test_batches_in_any_order_finalize_to_the_reference(self, config, seed, out_dir):
        batches = records(n_batches=7, size=40, seed=seed)
        order = np.random.default_rng(100 + seed).permutation(len(batches))
        assert list(order) != sorted(order)
        _, returned = self.run(config, out_dir, batches, order)
        self.compare(self.observed(config, out_dir, returned), self.reference(config, batches))

    @pytest.mark.parametrize("shape", ["no batch", "empty batches"])
    def test_empty_input_finalizes_to_the_reference_of_no_records(self, config, shape, out_dir):
        batches = [] if shape == "no batch" else records(n_batches=3, size=0, seed=0)
        _, returned = self.run(config, out_dir, batches, range(len(batches)))
        got = self.observed(config, out_dir, returned)
        self.compare(got, self.reference(config, batches))
        assert self.count(got) == 0

    def test_a_second_run_into_the_same_directory_leaves_its_own_result(self, config, out_dir):
        self.run(config, out_dir, records(n_batches=4, size=30, seed=2), range(4))
        second = records(n_batches=2, size=25, seed=3)
        _, returned = self.run(config, out_dir, second, [1, 0], fresh=False)
        self.compare(self.observed(config, out_dir, returned), self.reference(config, second))

    def test_the_result_says_where_finalize_goes(self, config, out_dir):
        sink, _ = self.run(config, out_dir, records(1, 5, seed=4), [0])
        assert isinstance(sink, PipelineSink)
        assert isinstance(sink.result_group, str) and isinstance(sink.result_key, str)
        assert (sink.result_group, sink.result_key) == self.result_place(config)
