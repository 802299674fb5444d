"""A finished all-pairs run's ``summary.json`` (docs/run-directory.md), assembled from what the
run kept and what its last reports said.

Apart from the driver so that the summary's shape has one home, and so that it is a pure
function of its inputs: the driver gathers the reports (drain, metrics, caches, sinks) and
writes the result; nothing here talks to an actor or a file.
"""
from __future__ import annotations

from .cache.directory import l3_summary
from .cache.store import store_summary
from .plan.tile_cost import run_tile_costs


def run_summary(run, *, snap: dict, closed: dict, cache_stats: list[dict], scheduling: dict,
                outputs: dict, published, tiles_journaled: int, ended: float) -> dict:
    """``run``: the driver's ``_Run``, read only; ``snap``: the metrics' last snapshot;
    ``closed``: the scheduler's (or the result writer's) journal timings; ``ended``: the time
    the run ended (its wall time and compute time end there)."""
    loads = snap["tiers"]["source"]["loads"]  # every node's last report, lost ones too
    pre, items = run.pre, run.items
    return {
        "app": run.app.name, "n_items": len(run.keys),
        "packs": items.n_items if items.is_packed else None,
        "space": run.space.describe(), "pairs_total": run.space.total,
        "tiles_total": len(run.tiles), "tiles_journaled": tiles_journaled,
        "leaf_items": run.leaf, "wall_s": ended - run.t_start,
        "compute_s": ended - run.t_compute,
        # (packed: loads per pack, the unit the caches hold)
        "loads": loads, "R": loads / max(1, items.n_items), "bound_R": run.bound,
        "host_cache_items": run.meta["host_cache_items"],
        "plan": run.plan.plan, "eviction": run.plan.eviction, "plan_choice": run.plan.choice,
        "tiers": snap["tiers"], "stage_seconds": snap["stage_seconds"],
        "actors": snap["actors"], "n_actors": len(run.meta["actors"]),
        "node_caches": cache_stats, "outputs": outputs,
        "measured": run.measured, "app_info": run.app.describe(),
        "phases": {**run.phases, "startup_s": run.t_compute - run.t_start},
        "resumed": run.resume_report, "lost_actors": run.members.lost_actors,
        "validated_tiles": run.validated, "warnings": run.warnings,
        "scheduling": scheduling,
        "journal_s": closed["journal_s"], "journal_fsync_s": closed["journal_fsync_s"],
        # what a tile cost beyond its compares, measured, beside what the plan charged it
        "tile_costs": run_tile_costs(snap["actors"], snap["stage_seconds"],
                                     run.plan.tile_overhead_s, closed["journal_s"]),
        "shared_fs": not pre.ship,
        "shipped": None if not pre.ship else {
            "input_files": pre.shipment.files, "input_bytes": pre.shipment.nbytes,
            "result_bytes": run.results.payload_bytes},
        "executor": run.ex.name, "published": published,
        "l3": l3_summary(run.cfg.l3, run.cfg.l3_hops, cache_stats),
        "store": store_summary(pre.store, cache_stats, pre.probe_store),
    }
