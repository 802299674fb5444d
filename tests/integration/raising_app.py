"""A tiny all-pairs app whose one stage raises for one item (``stage``: parse, preprocess or
compare), as a bug in an app would: the tests of where a worker's failure shows
(``test_worker_errors.py``) run it through the CLI as ``app=raising``.

The bad item is by default a middle key, so the driver's probe (which parses the first and the
last) passes and the failure happens inside a worker: a load task, or a device actor's
compare; ``bad=0`` makes the probe fail."""
from __future__ import annotations

import numpy as np

from pairflow.engine import BasePairApp, DenseMatrix, Triangle


class RaisingApp(BasePairApp):
    name = "raising"

    def __init__(self, n: int, stage: str, bad: int | None = None):
        self.n, self.stage = n, stage
        self.bad = n // 2 if bad is None else bad

    def keys(self):
        return [f"item{i:03d}" for i in range(self.n)]

    def space(self):
        return Triangle(self.n)

    def parse(self, key, raw):
        index = int(key[4:])
        if self.stage == "parse" and index == self.bad:
            raise ZeroDivisionError(f"parse of {key} divided by zero")
        return np.array([index], dtype=np.int64)

    def preprocess(self, key, item, device):
        if self.stage == "preprocess" and int(item[0]) == self.bad:
            raise KeyError(f"preprocess of {key} found no entry")
        return item

    def compare(self, left, right, mask, device):
        rows = np.array([int(x[0]) for x in left])[:, None]
        cols = np.array([int(x[0]) for x in right])[None, :]
        if self.stage == "compare" and self.bad in cols:
            raise ArithmeticError(f"compare of item{self.bad:03d} overflowed")
        return (rows * 31 + cols).astype(np.float64)


class RaisingSink(DenseMatrix):
    """A dense matrix whose write of one tile fails, as a full disk would make it."""

    def __init__(self, bad_tile: int = 1):
        super().__init__()
        self.bad_tile = bad_tile

    def write_tile(self, tile, fields, mask):
        if tile.id == self.bad_tile:
            raise OSError(f"no space left writing tile {tile.id}")
        return super().write_tile(tile, fields, mask)


def build(cfg):
    r = cfg.raising
    return RaisingApp(int(r.n), str(r.stage), r.bad), [DenseMatrix()]


def report(result) -> str:
    return f"app=raising pairs={result.summary['pairs_total']}"


CONFIG = """\
# @package _global_
# A test app whose one stage raises for one item (tests/integration/raising_app.py).
app:
  name: raising
raising:
  n: 12
  stage: compare
  bad: null   # the item that fails; null: the middle one (item 0 fails in the driver's probe)
"""
