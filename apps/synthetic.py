"""A synthetic all-pairs app whose stages burn known amounts of CPU.

The benchmarks need workloads shaped like Rocket's Table 1 (parse-heavy, preprocess-heavy,
compare-heavy) to measure system efficiency against the modelled limit, and the R experiments need
many cheap items. Stages burn CPU in compiled code that releases the GIL (so they behave like real
kernels, not like ``time.sleep``); only the optional I/O delay sleeps. The result of compare is a
deterministic function of the two items, so correctness can be checked too.

With no compare cost burnt (``t_cmp=0``) the compare is cheap and compiled
over the whole tile (``kernels/synthetic.py``), and a tile whose sinks keep a top-k or a
threshold goes straight to those cells (``compare_reduced``): no tile-sized matrix is made.
``packs=True`` loads a tile side's items as one pack (an array of rows), for runs of 10^5-10^6
items whose per-item bookkeeping would cost more than their pairs.

    pairflow app=synthetic synthetic.n=200 synthetic.t_cmp=0.001
    pairflow app=synthetic synthetic.n=100000 synthetic.t_cmp=0 synthetic.packs=true sink=topk
"""
from __future__ import annotations

import os
import time

import numpy as np

from pairflow.engine import (BasePairApp, Rectangle, ThresholdReduction, TileCandidates,
                             TopKReduction, Triangle, make_sink)
from pairflow.kernels.spin import burn, spin_rate


class SyntheticApp(BasePairApp):
    """n items; each stage costs the given seconds; compare(i, j) = (i * 7919 + j) % 1000."""

    name = "synthetic"

    def __init__(self, n: int, t_parse: float = 0.0, t_pre: float = 0.0, t_cmp: float = 0.0,
                 io_sleep: float = 0.0, item_floats: int = 1024, targets: int | None = None,
                 slow: dict[str, float] | None = None, wait: bool = False,
                 packs: bool = False):
        """``slow``: device actor id ("node-0/dev-1") -> factor its compares take longer, to
        model devices of unequal speed. ``wait``: a compare waits (sleeps) for its cost instead
        of burning it, as a host waits on a GPU kernel: devices of unequal speed can then be
        modelled on a machine with fewer cores than device actors. ``packs``: a tile side's
        items are loaded as one pack (``parse_pack``)."""
        self.n, self.targets, self.wait, self.pack_items = n, targets, wait, bool(packs)
        self.slow = dict(slow or {})
        self.t_parse, self.t_pre, self.t_cmp, self.io_sleep = t_parse, t_pre, t_cmp, io_sleep
        self.item_floats = item_floats
        # calibrated once, here: every worker then burns the same work, whatever its load at
        # start-up, so the benchmark's T_min and the engine's T measure the same thing
        self.rate = spin_rate()

    def keys(self):
        keys = self.__dict__.get("_keys")
        if keys is None:  # built once: 10^6 keys are a second of Python
            total = self.n + (self.targets or 0)
            keys = self._keys = [f"item{i:06d}" for i in range(total)]
        return keys

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_keys", None)  # rebuilt where needed, not shipped
        return state

    def row_keys(self):
        return self.keys()[: self.n]

    def col_keys(self):
        return self.keys()[self.n:] if self.targets else self.keys()

    def space(self):
        return Rectangle(self.n, self.targets) if self.targets else Triangle(self.n)

    def cheap(self) -> bool:
        """No compare cost burnt: the compiled block compare and ``compare_reduced`` apply."""
        return self.t_cmp == 0

    def warmup(self, device):
        burn(1e-6, self.rate)  # loads the compiled _spin (a fixed cost of CPU per process)
        if self.cheap():  # and the tile kernels' machine code, before the clock starts
            from pairflow.kernels.synthetic import synthetic_block, synthetic_topk
            one = np.zeros((2, 1))
            synthetic_block(one, one)
            mask = np.ones((2, 2), bool)
            synthetic_topk(one, one, mask, 1, True, True, True)
            synthetic_topk(one, one, np.broadcast_to(np.ones((1, 1), bool), (2, 2)), 1,
                           True, True, True, np.zeros(2), np.zeros(2))

    def packs(self):
        return self.pack_items

    def parse_pack(self, keys):
        """Row r is ``parse(keys[r], None)``: the item index, ``item_floats`` times."""
        if self.io_sleep:
            time.sleep(self.io_sleep * len(keys))
        burn(self.t_parse * len(keys), self.rate)
        idx = np.fromiter((int(k[4:]) for k in keys), dtype=np.float64, count=len(keys))
        return np.repeat(idx[:, None], self.item_floats, axis=1)

    def parse(self, key, raw):
        if self.io_sleep:
            time.sleep(self.io_sleep)
        burn(self.t_parse, self.rate)
        idx = int(key[4:])
        return np.full(self.item_floats, idx, dtype=np.float64)

    def preprocess(self, key, item, device):
        rows = len(key.members) if hasattr(key, "members") else 1
        burn(self.t_pre * rows, self.rate)
        return item

    def compare(self, left, right, mask, device):
        if self.cheap():
            from pairflow.kernels.synthetic import synthetic_block
            return synthetic_block(left, right)
        factor = self.slow.get(os.environ.get("PAIRFLOW_ACTOR_ID", ""), 1.0)
        cost = self.t_cmp * int(mask.sum()) * factor
        if self.wait:
            time.sleep(cost)
        else:
            burn(cost, self.rate)
        li = np.array([x[0] for x in left], dtype=np.int64)[:, None]
        ri = np.array([x[0] for x in right], dtype=np.int64)[None, :]
        return ((li * 7919 + ri) % 1000).astype(np.float64)

    def compare_reduced(self, left, right, mask, device, reductions):
        """A tile straight to what its sinks keep (each row's and column's k best, or the
        cells past a threshold), computed by the compiled kernel without the tile's matrix;
        declined (``None``) when a compare cost is burnt, so those runs are as before."""
        if not self.cheap() or any(r.field != "value" for r in reductions):
            return None
        from pairflow.kernels.synthetic import synthetic_threshold, synthetic_topk
        out = []
        for r in reductions:
            if isinstance(r, TopKReduction):
                out.append(TileCandidates(*synthetic_topk(
                    left, right, mask, r.k, r.largest, r.rows, r.cols,
                    row_floor=r.row_floor, col_floor=r.col_floor)))
            elif isinstance(r, ThresholdReduction):
                out.append(TileCandidates(*synthetic_threshold(left, right, r.t, mask,
                                                               r.above)))
            else:
                return None
        return out

    @staticmethod
    def expected(i, j):
        return float((i * 7919 + j) % 1000)

    def describe(self):
        return {"app": self.name, "n": self.n, "t_parse": self.t_parse, "t_pre": self.t_pre,
                "t_cmp": self.t_cmp, "io_sleep": self.io_sleep, "wait": self.wait,
                "packs": self.pack_items}


def build(cfg):
    """The app and the sink the ``sink`` group chose (field ``value``), from the Hydra config
    (``app=synthetic``)."""
    c = cfg.synthetic
    app = SyntheticApp(int(c.n), t_parse=float(c.t_parse), t_pre=float(c.t_pre),
                       t_cmp=float(c.t_cmp), io_sleep=float(c.io_sleep),
                       item_floats=int(c.item_floats),
                       targets=int(c.targets) if c.get("targets") is not None else None,
                       packs=bool(c.get("packs", False)))
    return app, [make_sink(dict(cfg.sink))]


def report(result) -> str:
    s = result.summary
    info = s["app_info"]
    return "\n".join([f"app=synthetic n={info['n']} pairs={s['pairs_total']} "
                      f"tiles={s['tiles_total']} leaf={s['leaf_items']}",
                      f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s), "
                      f"R = {s['R']:.3f} loads/item"]
                     + [f"{name}: {path}" for name, path in s["outputs"].items()])
