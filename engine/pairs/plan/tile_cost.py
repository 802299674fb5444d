"""What a tile costs beyond its compares, pure: the fixed seconds the leaf's time model charges
every tile, and the same cost as a finished run measured it.

Every tile pays a fixed cost however few pairs it holds: its hand-out and completion (a round
trip to the scheduler), its journal line, its sink write and its events; shipped results also
travel to the driver. That cost depends on the executor far more than on the app: a Ray actor
pays two actor calls and their objects, ~20-25 ms of CPU a tile (RESULTS.md, "Smith-Waterman
..."), threads of one process ~5 ms (RESULTS.md, "Per-tile fixed costs: measured and
charged": 630 more tiles of the 241 loci took 3.2 s more CPU). One figure for both gave
in-process runs tiles too large to balance, and nothing weighed the fixed costs of a packed
run's leaves under a small host tier (860 tiles of 34 pairs, a 44 % share in process). So:

* ``tile_overhead``: the fixed seconds of a tile on an executor (``DISPATCH_S``) plus what the
  probe measured of its journal line and record on the run's own filesystem (``io_s``); a
  configured ``tile_overhead_s`` wins over both;
* the leaf model (``leaf.model_leaf``) aims a tile at t* = sqrt(2 x overhead x W), W an
  actor's share of the work, where the fixed cost is sqrt(overhead / 2W) of the tile: at most
  10 % wherever W is 50 fixed costs or more (about a second on Ray, a quarter of one in
  process); a smaller run keeps ~4 tiles an actor and pays more. Under a host tier that caps
  the leaf, ``leaf.search_leaf`` weighs the tiles' fixed costs against the loads of leaves
  grouping 4, 16 ... of the capped ones;
* ``run_tile_costs``: the same cost as a finished run measured it (``summary.json:
  tile_costs``): an actor's time with tiles under way but none computing, per tile, beside
  its time per tile. (On Ray part of the per-tile CPU runs in other processes and slows the
  compares instead, so the figure there is a lower bound; in one process it is the cost.)
"""
from __future__ import annotations

#: the fixed seconds of a tile's hand-out, completion and events per executor (measured:
#: RESULTS.md, "Per-tile fixed costs"); an executor not named gets Ray's (the dearer)
DISPATCH_S = {"ray": 0.022, "inprocess": 0.005}
#: the model's figure when nothing was measured (a run planned before the probe measured it)
DEFAULT_OVERHEAD_S = 0.02


def tile_overhead(executor: str | None, io_s: float = 0.0) -> dict:
    """The fixed cost of one tile on ``executor`` ("ray", "inprocess"), with ``io_s`` the
    probe's measured journal line and record write: ``{"tile_overhead_s", "tile_costs"}``, what
    ``measured`` carries into ``sizing.plan_run``."""
    dispatch = DISPATCH_S.get(str(executor), DISPATCH_S["ray"])
    io_s = max(0.0, float(io_s))
    return {"tile_overhead_s": dispatch + io_s,
            "tile_costs": {"executor": executor, "dispatch_s": dispatch, "io_s": io_s}}


def overhead_s(measured: dict, configured: float | None) -> float:
    """The fixed cost per tile the plan uses: the configured one when set, else the probe's
    (``tile_overhead``), else ``DEFAULT_OVERHEAD_S``."""
    if configured is not None:
        return float(configured)
    return float(measured.get("tile_overhead_s", DEFAULT_OVERHEAD_S))


def run_tile_costs(actors: dict, stage_seconds: dict, modelled_s: float | None,
                   journal_s: float = 0.0) -> dict:
    """A finished run's per-tile costs (``summary.json: tile_costs``) from its actors
    (``metrics``' per actor ``tiles`` and ``busy_s``: wall time with a tile under way) and
    stage seconds: ``tile_seconds``, an actor's time per tile; ``per_tile_overhead_s``, the
    part of it spent on no compare (waiting for the tile's items, its write, its completion
    and hand-out); ``overhead_share`` their ratio; beside ``modelled_overhead_s``, what the
    plan charged a tile, and the write's and the scheduler's journaling's seconds per tile."""
    tiles = sum(int(a.get("tiles", 0)) for a in actors.values())
    busy = sum(float(a.get("busy_s", 0.0)) for a in actors.values())
    compute = float(stage_seconds.get("compare", 0.0)) + \
        float(stage_seconds.get("postprocess", 0.0))
    if tiles <= 0:
        return {"tiles": 0, "per_tile_overhead_s": None, "tile_seconds": None,
                "overhead_share": None, "modelled_overhead_s": modelled_s}
    tile_s = busy / tiles
    over = max(0.0, busy - compute) / tiles
    return {"tiles": tiles, "per_tile_overhead_s": over, "tile_seconds": tile_s,
            "overhead_share": over / tile_s if tile_s > 0 else None,
            "modelled_overhead_s": modelled_s,
            "write_s_per_tile": float(stage_seconds.get("write", 0.0)) / tiles,
            "journal_s_per_tile": float(journal_s) / tiles}
