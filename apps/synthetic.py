"""A synthetic all-pairs app whose stages burn known amounts of CPU.

The benchmarks need workloads shaped like Rocket's Table 1 (parse-heavy, preprocess-heavy,
compare-heavy) to measure system efficiency against the modelled limit, and the R experiments need
many cheap items. Stages burn CPU in compiled code that releases the GIL (so they behave like real
kernels, not like ``time.sleep``); only the optional I/O delay sleeps. The result of compare is a
deterministic function of the two items, so correctness can be checked too.

    pairflow app=synthetic synthetic.n=200 synthetic.t_cmp=0.001
"""
from __future__ import annotations

import os
import time

import numpy as np

from pairflow.engine import BasePairApp, Rectangle, Triangle, make_sink
from pairflow.kernels.spin import burn, spin_rate


class SyntheticApp(BasePairApp):
    """n items; each stage costs the given seconds; compare(i, j) = (i * 7919 + j) % 1000."""

    name = "synthetic"

    def __init__(self, n: int, t_parse: float = 0.0, t_pre: float = 0.0, t_cmp: float = 0.0,
                 io_sleep: float = 0.0, item_floats: int = 1024, targets: int | None = None,
                 slow: dict[str, float] | None = None, wait: bool = False):
        """``slow``: device actor id ("node-0/dev-1") -> factor its compares take longer, to
        model devices of unequal speed. ``wait``: a compare waits (sleeps) for its cost instead
        of burning it, as a host waits on a GPU kernel: devices of unequal speed can then be
        modelled on a machine with fewer cores than device actors."""
        self.n, self.targets, self.wait = n, targets, wait
        self.slow = dict(slow or {})
        self.t_parse, self.t_pre, self.t_cmp, self.io_sleep = t_parse, t_pre, t_cmp, io_sleep
        self.item_floats = item_floats
        # calibrated once, here: every worker then burns the same work, whatever its load at
        # start-up, so the benchmark's T_min and the engine's T measure the same thing
        self.rate = spin_rate()

    def keys(self):
        total = self.n + (self.targets or 0)
        return [f"item{i:06d}" for i in range(total)]

    def row_keys(self):
        return self.keys()[: self.n]

    def col_keys(self):
        return self.keys()[self.n:] if self.targets else self.keys()

    def space(self):
        return Rectangle(self.n, self.targets) if self.targets else Triangle(self.n)

    def warmup(self, device):
        burn(1e-6, self.rate)  # loads the compiled _spin (a fixed cost of CPU per process)

    def parse(self, key, raw):
        if self.io_sleep:
            time.sleep(self.io_sleep)
        burn(self.t_parse, self.rate)
        idx = int(key[4:])
        return np.full(self.item_floats, idx, dtype=np.float64)

    def preprocess(self, key, item, device):
        burn(self.t_pre, self.rate)
        return item

    def compare(self, left, right, mask, device):
        factor = self.slow.get(os.environ.get("PAIRFLOW_ACTOR_ID", ""), 1.0)
        cost = self.t_cmp * int(mask.sum()) * factor
        if self.wait:
            time.sleep(cost)
        else:
            burn(cost, self.rate)
        li = np.array([x[0] for x in left], dtype=np.int64)[:, None]
        ri = np.array([x[0] for x in right], dtype=np.int64)[None, :]
        return ((li * 7919 + ri) % 1000).astype(np.float64)

    @staticmethod
    def expected(i, j):
        return float((i * 7919 + j) % 1000)

    def describe(self):
        return {"app": self.name, "n": self.n, "t_parse": self.t_parse, "t_pre": self.t_pre,
                "t_cmp": self.t_cmp, "io_sleep": self.io_sleep, "wait": self.wait}


def build(cfg):
    """The app and the sink the ``sink`` group chose (field ``value``), from the Hydra config
    (``app=synthetic``)."""
    c = cfg.synthetic
    app = SyntheticApp(int(c.n), t_parse=float(c.t_parse), t_pre=float(c.t_pre),
                       t_cmp=float(c.t_cmp), io_sleep=float(c.io_sleep),
                       item_floats=int(c.item_floats),
                       targets=int(c.targets) if c.get("targets") is not None else None)
    return app, [make_sink(dict(cfg.sink))]


def report(result) -> str:
    s = result.summary
    info = s["app_info"]
    return "\n".join([f"app=synthetic n={info['n']} pairs={s['pairs_total']} "
                      f"tiles={s['tiles_total']} leaf={s['leaf_items']}",
                      f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s), "
                      f"R = {s['R']:.3f} loads/item"]
                     + [f"{name}: {path}" for name, path in s["outputs"].items()])
