"""The shipped journal's contract as a base class: where the run directory is out of the workers'
reach, the scheduler journals each finished tile's encoded sink payloads into a queue that the
driver drains now and then (``pairflow.engine.pairs.sinks.shipped``), and the driver stores and
journals what it drained. A tile lost on the way is a tile the run reports done but never
wrote, so:

* every appended tile comes out of ``drain`` exactly once, with its actor and payloads as they
  were appended, in append order, whatever the drains in between;
* a drain with nothing pending gives nothing;
* what is pending when the journal closes is still drained after it (the driver's last drain
  follows the scheduler's ``close``);
* it reports its costs as the journal does (``append_seconds``, ``fsync_seconds``).

The oracle is a plain list of what was appended. That the drained payloads store to the same
journal and results as writing in place is ``JournalTests``' (run with a shipped journal).
A subclass gives ``make_journal()``: a new, empty journal.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

__all__ = ["ShippedJournalTests"]


def _payload(rng: random.Random, tile: int) -> list:
    """What a device actor ships for a tile: (sink name, encoded payload) per sink."""
    n = rng.randint(0, 6)
    return [("dense", {"value": np.arange(n, dtype=np.float64) + tile}),
            ("threshold", bytes(rng.getrandbits(8) for _ in range(n))),
            ("topk", [tile, n, f"tile-{tile}"])]


def _same(got, want) -> bool:
    """Equal records, numpy arrays compared by dtype, shape and values."""
    if isinstance(want, np.ndarray):
        return isinstance(got, np.ndarray) and got.dtype == want.dtype and \
            got.shape == want.shape and np.array_equal(got, want)
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and \
            all(_same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and len(got) == len(want) and \
            all(_same(g, w) for g, w in zip(got, want))
    return type(got) is type(want) and got == want


class ShippedJournalTests:
    """Subclass and give ``make_journal``; see the module's docstring."""

    def make_journal(self):
        raise NotImplementedError("a subclass returns a new, empty shipped journal")

    @pytest.mark.parametrize("seed", range(4))
    def test_every_appended_tile_is_drained_once_in_order(self, seed):
        rng = random.Random(seed)
        journal = self.make_journal()
        appended, drained = [], []
        tiles = list(range(40))
        rng.shuffle(tiles)  # tiles finish in any order
        for t in tiles:
            record = (t, f"node-{t % 3}/dev-{t % 2}", _payload(rng, t))
            journal.append(*record)
            appended.append(record)
            if rng.random() < 0.3:  # the driver's watch call, now and then
                drained += list(journal.drain())
        drained += list(journal.drain())
        assert [r[0] for r in drained] == [r[0] for r in appended], "lost, repeated or reordered"
        for got, want in zip(drained, appended):
            assert tuple(got[:2]) == want[:2] and _same(got[2], want[2]), want[0]
        assert list(journal.drain()) == []

    def test_a_drain_with_nothing_pending_gives_nothing(self):
        journal = self.make_journal()
        assert list(journal.drain()) == []
        journal.append(5, "a", [("dense", b"x")])
        assert [r[0] for r in journal.drain()] == [5]
        assert list(journal.drain()) == [] and list(journal.drain()) == []

    def test_what_is_pending_at_close_is_drained_after_it(self):
        journal = self.make_journal()
        journal.append(0, "a", [("dense", b"first")])
        assert [r[0] for r in journal.drain()] == [0]
        for t in (3, 1, 2):
            journal.append(t, "b", [("dense", bytes([t]))])
        journal.close()
        drained = list(journal.drain())
        assert [(r[0], r[1]) for r in drained] == [(3, "b"), (1, "b"), (2, "b")]
        assert [r[2] for r in drained] == [[("dense", bytes([t]))] for t in (3, 1, 2)]

    def test_it_reports_its_costs_as_the_journal_does(self):
        journal = self.make_journal()
        journal.append(0, "a", [])
        journal.close()
        for name in ("append_seconds", "fsync_seconds"):
            value = getattr(journal, name)
            assert isinstance(value, float) and value >= 0.0, name
