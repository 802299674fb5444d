"""Threshold(t) Jaccard that skips exact work for pairs that cannot reach t.

A pre-pass sketches every item (bottom-s MinHash of its k-mer set, ``kernels.sketch``) in Ray
tasks, then runs two pair filters over the pair space through the pipeline engine, in the order
the measurements choose (``engine.prefilter``):

* ``length_ratio``: min(|A|, |B|) / max(|A|, |B|) >= t (an exact bound: J never exceeds it);
* ``sketch``: the sketch estimate is not implausibly far below t (Chernoff bound at ``alpha``;
  a pair with J >= t is dropped with probability < alpha, exact when the sets fit the sketches).

The surviving pairs become a ``PairList`` space and the exact ``JaccardApp`` runs on it with a
``Threshold(t)`` sink, so it reports exactly the pairs >= t that a full run reports, having
compared only the candidates.

    from pairflow.apps.jaccard_filtered import threshold_jaccard
    result = threshold_jaccard(urls, t=0.2, item="record")
    result.edges, result.summary["prefilter"]

    pairflow app=jaccard_filtered data.item=record filter.t=0.2
"""
from __future__ import annotations

import hashlib
import time

import numpy as np

from pairflow.apps.jaccard import JaccardApp
from pairflow.apps.options import RUNTIME_KEYS
from pairflow.engine import Filter, PairList, Triangle, map_chunks, prefilter
from pairflow.kernels.sketch import bottom_k, length_ratio, may_reach, pair_shared


class FilteredJaccardApp(JaccardApp):
    """``JaccardApp`` over a given pair space (the candidates of the pre-pass)."""

    name = "jaccard_filtered"

    def __init__(self, urls, k: int = 21, item: str = "file", pairs: PairList | None = None):
        super().__init__(urls, k=k, item=item, kernel="merge")  # sketches need k-mer arrays
        n = len(self.keys())
        if pairs is not None and (pairs.n_rows, pairs.n_cols) != (n, n):
            raise ValueError(f"the pair list is {pairs.n_rows} x {pairs.n_cols}, but there are "
                             f"{n} items")
        self.pairs = pairs

    def space(self):
        return self.pairs if self.pairs is not None else Triangle(len(self.keys()))

    def describe(self):
        d = super().describe()
        d["app"] = self.name
        if self.pairs is not None:
            d["candidate_pairs"] = int(len(self.pairs.pairs))
        return d

    def fingerprint(self):
        fp = super().fingerprint()
        fp["app"] = self.name
        if self.pairs is not None:
            fp["pairs_sha256"] = hashlib.sha256(self.pairs.pairs.tobytes()).hexdigest()
        return fp


def _profiles(keys, app: JaccardApp, s: int) -> list:
    """(set size, bottom-s sketch) of each key's k-mer set."""
    out = []
    for key in keys:
        item = app.parse(key, None)  # the app's catalog fetches the file
        kmers = item["kmers"] if isinstance(item, dict) else item  # a record's: the array
        out.append((len(kmers), bottom_k(kmers, s)))
    return out


def item_profiles(app: JaccardApp, sketch_size: int = 1024, executor: str = "ray",
                  runtime: dict | None = None):
    """(set sizes, (n, s) sketch matrix) of every item, in ``app.keys()`` order: as Ray tasks
    with ``executor="ray"`` (starting or joining Ray with the ``runtime`` options), in this
    process with ``"local"``."""
    keys = list(app.keys())
    if executor == "local":
        out = _profiles(keys, app, sketch_size)
    else:
        out = map_chunks(_profiles, keys, app, sketch_size, runtime=runtime or {})
    if not out:
        return np.zeros(0, np.int64), np.zeros((0, sketch_size), np.uint64)
    return np.array([o[0] for o in out], np.int64), np.stack([o[1] for o in out])


def pair_filters(sizes: np.ndarray, sketches: np.ndarray, t: float, alpha: float = 1e-6):
    """The two pair filters, as pipeline operators over columns ``i`` and ``j``."""
    s = sketches.shape[1]

    def ratio_ok(b):
        return length_ratio(sizes[b["i"]], sizes[b["j"]]) >= t

    def sketch_ok(b):
        i, j = b["i"], b["j"]
        shared, s_eff, n_union = pair_shared(sketches, i, j)
        exact = (sizes[i] <= s) & (sizes[j] <= s) & (n_union <= s)
        return may_reach(shared, s_eff, t, alpha, exact)

    return [Filter("length_ratio", ratio_ok), Filter("sketch", sketch_ok)]


def threshold_jaccard(urls, t: float, k: int = 21, item: str = "file", sketch_size: int = 1024,
                      alpha: float = 1e-6, pair_batch: int = 2048,
                      prefilter_options: dict | None = None, **allpairs_options):
    """Pairs with exact Jaccard >= t (a ``Threshold(t)`` edge list), comparing only the pairs
    the sketch pre-pass cannot rule out. Returns the all-pairs result; its summary holds
    ``prefilter`` (candidates, pairs skipped, filter order and stats, timings)."""
    from pairflow.engine import Threshold, allpairs
    if not 0.0 < t <= 1.0:
        raise ValueError(f"t must be in (0, 1], got {t}")
    base = JaccardApp(urls, k=k, item=item, kernel="merge")
    t0 = time.time()
    executor = (prefilter_options or {}).get("executor", "ray")
    runtime = {k: allpairs_options[k] for k in RUNTIME_KEYS if k in allpairs_options}
    sizes, sketches = item_profiles(base, sketch_size, executor=executor, runtime=runtime)
    t1 = time.time()
    space = Triangle(len(base.keys()))
    options = {"executor": "local", **(prefilter_options or {})}
    if "runs_root" in allpairs_options:
        options.setdefault("runs_root", allpairs_options["runs_root"])
    pairs, pre = prefilter(space, pair_filters(sizes, sketches, t, alpha), pair_batch,
                           **options)
    t2 = time.time()
    app = FilteredJaccardApp(urls, k=k, item=item, pairs=pairs)
    info = {"t": t, "sketch_size": sketch_size, "alpha": alpha, "pairs_total": space.total,
            "candidates": int(len(pairs.pairs)), "skipped": int(space.total - len(pairs.pairs)),
            "order": pre.summary["final_order"], "orders": pre.orders,
            "ops": {r.op: {"records_in": int(r.records_in), "passed": int(r.passed),
                           "cost_s": r.cost_s} for r in pre.cutflow.itertuples()},
            "sketch_s": t1 - t0, "filter_s": t2 - t1, "prefilter_run_dir": pre.run_dir}
    if len(pairs.pairs) == 0:
        info["note"] = "no candidate pair: nothing reaches t"
        return _EmptyResult(info, base)
    allpairs_options.setdefault("progress", False)
    result = allpairs(app=app, sink=Threshold(t, field="similarity"), wait=True,
                      **allpairs_options)
    result.summary["prefilter"] = info
    return result


class _EmptyResult:
    """What threshold_jaccard returns when no pair can reach t (no all-pairs run is needed)."""

    def __init__(self, info, app):
        self.summary = {"prefilter": info, "outputs": {}, "app": app.name}
        self.run_dir = None

    @property
    def edges(self):
        import pandas as pd
        return pd.DataFrame({"a": [], "b": [], "i": np.zeros(0, np.int64),
                             "j": np.zeros(0, np.int64), "value": np.zeros(0)})


def run(cfg, run_dir: str | None = None):
    """The Hydra entry point (``pairflow app=jaccard_filtered``)."""
    from omegaconf import OmegaConf
    from pairflow.apps.data import expand_inputs
    from pairflow.apps.options import runtime_options
    urls = expand_inputs(cfg.data.inputs)
    f = cfg.filter
    return threshold_jaccard(urls, t=float(f.t), k=int(cfg.data.k), item=str(cfg.data.item),
                             sketch_size=int(f.sketch_size), alpha=float(f.alpha),
                             run_dir=run_dir, runs_root=str(cfg.runs_root),
                             progress=bool(cfg.progress),
                             config_dump=OmegaConf.to_container(cfg, resolve=True),
                             **runtime_options(cfg))


def report(result) -> str:
    p = result.summary["prefilter"]
    lines = [f"app=jaccard_filtered t={p['t']} pairs={p['pairs_total']} candidates="
             f"{p['candidates']} skipped={p['skipped']} "
             f"({100.0 * p['skipped'] / max(1, p['pairs_total']):.1f}%)",
             f"pair filters in order: {' > '.join(p['order'])} (sketch {p['sketch_s']:.2f} s, "
             f"filters {p['filter_s']:.2f} s)"]
    if "wall_s" in result.summary:
        lines.append(f"exact compare of the candidates: wall {result.summary['wall_s']:.2f} s")
    for name, path in result.summary.get("outputs", {}).items():
        lines.append(f"{name}: {path}")
    return "\n".join(lines)
