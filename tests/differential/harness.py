"""Run a drawn shape through the real engine and hold everything it wrote against the oracle.

``run_and_check(shape, where)``: writes the shape's items (files or records), runs ``allpairs``
with the shape's options (interrupted at the drawn compare and resumed, when the shape says so),
then checks:
- every sink's output equals the brute force (oracle.py), exactly;
- the journal names every tile of the run, each (tile, sink, location) exactly once, and the
  summary counts them all;
- nothing is left under a ``.partial`` name in the run directory;
- R >= 1 when every item is in some pair, and, for a run that was not resumed, R within
  ``R_FACTOR`` of the planner's own simulation of the plan it ran (the simulator models the
  run's policy and tiers; threads' interleaving and prefetch move a few loads).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np
import pandas as pd

from tests.differential.drawn_app import DrawnApp
from tests.differential.items import make_items, write_item_files, write_record_files
from tests.differential.oracle import Expected

R_FACTOR = 1.5  # measured R <= R_FACTOR * simulated R + R_SLACK_LOADS * nodes / units
R_SLACK_LOADS = 2  # per node: each node's share starts cold, a steal splits a stripe


def note_shape(shape) -> None:
    """What was drawn, for ``--hypothesis-show-statistics``."""
    from hypothesis import event
    event(f"n {'1-12' if shape.n <= 12 else '13-70' if shape.n <= 70 else '71+'}")
    event(f"storage {shape.storage}, packs {'on' if shape.pack_items else 'off'}")
    event(f"space {shape.space}{' weighted' if shape.weighted else ''}")
    for s in shape.sinks:
        event(f"sink {s[0]}{' reduced' if shape.reduce_in_kernel else ''}")
    event("interrupted" if shape.interrupt_at else "not interrupted")


def _sink_objects(shape):
    from pairflow.engine import DenseMatrix, Threshold, TopK
    out = []
    for s in shape.sinks:
        if s[0] == "dense":
            out.append(DenseMatrix())
        elif s[0] == "topk":
            out.append(TopK(k=s[1], largest=s[2], per=s[3]))
        else:
            out.append(Threshold(t=s[1], above=s[2]))
    return out


def make_inputs(shape, where: str) -> list[str]:
    items = make_items(shape.n, shape.kind, shape.seed)
    if shape.storage == "files":
        return write_item_files(items, os.path.join(where, "items"))
    if shape.storage == "records":
        return write_record_files(items, os.path.join(where, "records"),
                                  min(shape.record_files, shape.n))
    return []


def run_shape(shape, where: str, **extra):
    """The engine's result for ``shape`` (interrupted and resumed when it says so), and
    whether it was resumed."""
    from pairflow.engine import InputError, PairflowError, allpairs
    paths = make_inputs(shape, where)
    if not Expected(shape).pairs:  # refused before any compute, saying why
        try:
            allpairs(app=DrawnApp(shape, paths), sinks=_sink_objects(shape),
                     run_dir=os.path.join(where, "run"), wait=True, **shape.options())
        except InputError as err:
            assert "nothing to compare" in str(err), str(err)
            return None, False
        raise AssertionError("a space of no pairs ran")
    opts = {**shape.options(), **extra}
    run_dir = os.path.join(where, "run")
    if shape.interrupt_at is not None:
        counter = os.path.join(where, "compares")
        app = DrawnApp(shape, paths, fail_after=shape.interrupt_at, counter=counter)
        try:
            res = allpairs(app=app, sinks=_sink_objects(shape), run_dir=run_dir, wait=True,
                           **opts)
        except PairflowError as err:
            assert f"interrupted at compare {shape.interrupt_at}" in str(err), str(err)
            state = json.load(open(os.path.join(run_dir, "status.json")))["state"]
            assert state == "failed", state
            res = allpairs(app=DrawnApp(shape, paths), sinks=_sink_objects(shape),
                           run_dir=run_dir, resume=True, wait=True, **opts)
            return res, True
        return res, False  # fewer compares than the drawn point: it finished
    res = allpairs(app=DrawnApp(shape, paths), sinks=_sink_objects(shape), run_dir=run_dir,
                   wait=True, **opts)
    return res, False


def check(shape, res, resumed: bool, against_simulation: bool = True) -> None:
    """``against_simulation``: hold R to the planner's simulation of the run (on a cluster, of
    the way it shared the run between nodes, with L3 as the nodes drift apart: the planner's
    ``expected_R``; issue 57 measured 0.86-1.24x of it on 2 and 3 nodes)."""
    if res is None:  # refused (run_shape checked how)
        return
    want = Expected(shape)
    for s in shape.sinks:
        if s[0] == "dense":
            got = res.matrix("value")
            np.testing.assert_array_equal(got, want.dense())
        elif s[0] == "topk":
            name = "topk_cols" if s[3] == "col" else "topk"
            df = pd.read_parquet(res.outputs[name])
            got = list(zip(df.qi.tolist(), df.ti.tolist(), df.score.tolist()))
            assert got == want.topk(s[1], s[2], s[3]), (s, got[:10])
        else:
            df = pd.read_parquet(res.outputs["threshold"])
            got = sorted(zip(df.i.tolist(), df.j.tolist(), df.value.tolist()))
            assert got == want.threshold(s[1], s[2]), (s, got[:10])
    check_run_dir(res.run_dir, res.summary)
    check_loads(shape, res.summary, want, resumed, against_simulation)


def check_run_dir(run_dir: str, summary: dict) -> None:
    entries = [json.loads(line) for line in open(os.path.join(run_dir, "journal.jsonl"))
               if line.strip()]
    tiles = [e for e in entries if "tile" in e]
    seen: dict = {}
    for e in tiles:
        where = (e["tile"], e.get("sink"), e.get("location"))
        seen[where] = seen.get(where, 0) + 1
    twice = [w for w, c in seen.items() if c > 1]
    assert not twice, f"journaled more than once: {twice[:5]}"
    total = summary["tiles_total"]
    assert {e["tile"] for e in tiles} == set(range(total)), "a tile was never journaled"
    assert summary["tiles_journaled"] == total
    partial = [os.path.join(d, f) for d, dirs, files in os.walk(run_dir)
               for f in files + dirs if ".partial" in f]
    assert not partial, partial


def check_loads(shape, summary: dict, want: Expected, resumed: bool,
                against_simulation: bool = True) -> None:
    if not want.pairs:
        return
    loads, R = summary["loads"], summary["R"]
    units = loads / R if R else None
    if len(want.touched) == shape.n and not resumed:
        assert R >= 1.0, f"R {R} < 1: fewer loads ({loads}) than items"
    choice = summary.get("plan_choice") or {}
    ran = f"{summary['plan']}/{summary['eviction']}"
    expected = choice.get("expected_R") or (choice.get("simulated_R") or {}).get(ran)
    nodes = max(1, len(summary.get("node_caches") or ()))
    if against_simulation and not resumed and expected and units:
        bound = R_FACTOR * expected + R_SLACK_LOADS * nodes / units
        assert R <= bound, (f"R {R} past {R_FACTOR} x the simulation's {expected} ({ran}, "
                            f"{choice.get('shares')} shares on {nodes} node(s))")


def run_and_check(shape) -> None:
    """``run_shape`` then ``check``, in a directory of its own, removed afterwards."""
    where = tempfile.mkdtemp(prefix="pairflow-diff-")
    try:
        res, resumed = run_shape(shape, where)
        check(shape, res, resumed)
    finally:
        shutil.rmtree(where, ignore_errors=True)
