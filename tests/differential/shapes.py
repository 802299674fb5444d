"""A run shape: one point of the all-pairs engine's configuration space, and how the harness
draws it (hypothesis). Nothing here imports pairflow.

The dimensions, and how each is drawn (``run_shapes``):
- **n**, the items: 1 to ``MAX_N`` (default 160): small (1-12), medium (13-70) and larger
  counts alike; with leaves and packs drawn from small sides, n = 1 mod leaf and mod pack
  (a last tile or pack of one item) comes up often, and ``n_mod`` forces it.
- **item kind** (``kind``): ragged int sets (Jaccard) or fixed-width int vectors (dot product),
  of uneven sizes (items.py).
- **storage**: one file per item (``files``, read through ``url``), records in 1-3 files read by
  the app (``records``: packed into tile-side packs unless ``pack_items`` is off), or made in
  memory (``arrays``).
- **pair space**: a triangle; a rectangle of disjoint rows and columns; a rectangle whose rows
  are a subset of its columns (queries inside their database); a pair list (symmetric or not)
  of a drawn fraction of the pairs; **weighted tiles** (``pair_weights``) when no dense sink is
  asked for (the engine refuses that pair).
- **host tier** (``host_cache_items``): None (the engine's default) or 1 item to all (+2).
- **leaf** (``leaf_items``): None (chosen from measured costs) or 1 to n.
- **plan and eviction**: auto, stripe, hilbert, zorder x auto, next_use, lru.
- **sinks**: a non-empty subset of dense, top-k (k 1-6, largest or smallest, per row or per
  column) and threshold (above or below a drawn t); **reduced in the kernel** or not
  (``compare_reduced``).
- **prefetch** (``in_flight`` 1-3) and **read-ahead** on or off.
- **executor**: in-process (threads) or a local Ray; **nodes**: 2-3 ``Cluster`` nodes with L3
  on and off (test_multinode.py).
- **resume**: none, or the run interrupted at its m-th compare (m 1-12; a compare raises) and
  resumed from its run directory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from hypothesis import strategies as st

MAX_N = int(os.environ.get("PAIRFLOW_DIFF_MAX_N", "160"))
PLANS = ("auto", "stripe", "hilbert", "zorder")
EVICTIONS = ("auto", "next_use", "lru")


@dataclass(frozen=True)
class Shape:
    n: int
    kind: str                      # sets | vectors
    storage: str                   # files | records | arrays
    record_files: int
    space: str                     # triangle | rect_disjoint | rect_inside | pairlist
    split: int                     # rect_disjoint: rows are items [0, split)
    subset: tuple                  # rect_inside: the row items
    pairs: tuple                   # pairlist: (row, col) pairs
    pairlist_symmetric: bool
    weighted: bool
    seed: int
    leaf_items: int | None
    host_cache_items: int | None
    plan: str
    eviction: str
    pack_items: bool
    sinks: tuple                   # ("dense",) | ("topk", k, largest, per) | ("threshold", t, above)
    reduce_in_kernel: bool
    in_flight: int
    read_ahead: bool
    interrupt_at: int | None
    executor: str = "inprocess"
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def rows(self) -> list[int]:
        if self.space == "rect_disjoint":
            return list(range(self.split))
        if self.space == "rect_inside":
            return list(self.subset)
        return list(range(self.n))

    def cols(self) -> list[int]:
        if self.space == "rect_disjoint":
            return list(range(self.split, self.n))
        return list(range(self.n))

    @property
    def symmetric(self) -> bool:
        return self.space == "triangle" or (self.space == "pairlist" and self.pairlist_symmetric)

    def options(self) -> dict:
        """The run's ``AllPairsConfig`` fields."""
        opts = dict(plan=self.plan, eviction=self.eviction, pack_items=self.pack_items,
                    in_flight=self.in_flight, read_ahead=self.read_ahead,
                    executor=self.executor, progress=False)
        if self.leaf_items is not None:
            opts["leaf_items"] = self.leaf_items
        if self.host_cache_items is not None:
            opts["host_cache_items"] = self.host_cache_items
        return opts


@st.composite
def _sink(draw, space: str, values: str):
    which = draw(st.sampled_from(["dense", "topk", "threshold"]))
    if which == "dense":
        return ("dense",)
    if which == "topk":
        per = draw(st.sampled_from(["row", "col"])) if space.startswith("rect") else "row"
        return ("topk", draw(st.integers(1, 6)), draw(st.booleans()), per)
    # thresholds at values the items take (ties at t are kept): Jaccard in [0, 1], dots 0-180
    t = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5, 1.0]) if values == "sets"
             else st.sampled_from([0.0, 20.0, 45.0, 60.0, 100.0]))
    return ("threshold", t, draw(st.booleans()))


@st.composite
def run_shapes(draw, executor: str = "inprocess", max_n: int = MAX_N,
               resume: bool = True) -> Shape:
    n = draw(st.one_of(st.integers(1, 12), st.integers(13, 70), st.integers(71, max_n))
             if max_n > 70 else st.integers(1, max_n))
    leaf = draw(st.one_of(st.none(), st.integers(2, 8), st.integers(1, max(1, n))))
    if leaf and n > leaf and draw(st.integers(0, 2)):  # a last tile (and pack) of one item
        n = leaf * max(1, (n - 1) // leaf) + 1
    kind = draw(st.sampled_from(["sets", "vectors"]))
    # records (packed or not) are the engine's longest path: drawn as often as the others
    storage = draw(st.sampled_from(["records", "files", "records", "arrays"]))
    space = draw(st.sampled_from(["triangle", "rect_disjoint", "rect_inside", "pairlist"]))
    if n < 2 and space == "rect_disjoint":
        space = "triangle"
    split = draw(st.integers(1, n - 1)) if space == "rect_disjoint" else 0
    subset = ()
    if space == "rect_inside":
        subset = tuple(sorted(draw(st.sets(st.integers(0, n - 1), min_size=1,
                                           max_size=max(1, min(n, 40))))))
    pairs, symmetric = (), False
    if space == "pairlist":
        symmetric = draw(st.booleans())
        every = [(i, j) for i in range(n) for j in range(n)
                 if (i < j if symmetric else i != j)]
        if every:
            keep = draw(st.sampled_from([0.05, 0.3, 0.8]))
            rng = __import__("random").Random(draw(st.integers(0, 2**16)))
            pairs = tuple(p for p in every if rng.random() < keep) or (every[0],)
        else:
            space = "triangle"
    sinks = draw(st.lists(_sink(space, kind), min_size=1, max_size=3,
                          unique_by=lambda s: (s[0], s[3] if s[0] == "topk" else None)))
    weighted = not any(s[0] == "dense" for s in sinks) and draw(st.booleans())
    host = draw(st.one_of(st.none(), st.integers(1, n + 2)))
    return Shape(
        n=n, kind=kind, storage=storage, record_files=draw(st.integers(1, 3)), space=space,
        split=split, subset=subset, pairs=pairs, pairlist_symmetric=symmetric,
        weighted=weighted, seed=draw(st.integers(0, 2**20)), leaf_items=leaf,
        host_cache_items=host, plan=draw(st.sampled_from(PLANS)),
        eviction=draw(st.sampled_from(EVICTIONS)), pack_items=draw(st.integers(0, 2)) > 0,
        sinks=tuple(sinks), reduce_in_kernel=draw(st.booleans()),
        in_flight=draw(st.integers(1, 3)), read_ahead=draw(st.booleans()),
        interrupt_at=draw(st.one_of(st.none(), st.integers(1, 12))) if resume else None,
        executor=executor)
