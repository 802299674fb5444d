"""Run sizing, pure: from measured stage costs, the pair space and the cluster to a ``RunPlan``.

Everything that decides how a run is cut and budgeted lives here, free of Ray, so the driver and
the simulator use the same rules (they had drifted: the simulator's L1 cap differed from the
driver's) and every rule can be tested with hand-computed cases:

* ``plan_nodes``: how many device actors each node gets, and on which device;
* host (L2) and device (L1) budgets from the object store and the measured item size;
* the tile side (``leaf``: its cost model, with the executor's measured fixed cost per tile,
  ``tile_cost``, and under a host tier short of items the candidate leaf of least modelled
  time, packed runs included); for apps with pair weights
  (``app_weights``, ``weighted_probe``, ``weighted_budget``) the most one tile may weigh;
* the tile order (a plan from ``policy.PLANS``, with ``plan=auto`` the one ``simulate.choose_plan``
  predicts to load least), the split of the last tiles, the load batch and every tile's deadline.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import PairflowError
from ..config import AllPairsConfig
from ..items import ItemMap
from .leaf import choose_leaf, search_leaf, with_search
from .tile_cost import overhead_s as tile_overhead_s
from .policy import bound_R, interleave, largest_first, make_plan
from .tile_index import first_needs
from ..space import (PairSpace, PairWeights, Rectangle, Tile, TileArray, leaves, row_strips,
                     split_tail)
from .stealing import contiguous_shares, deal, stripe_starts
from ..cache.tiers import device_cache_items, largest_leaf_held


@dataclass(frozen=True)
class NodePlan:
    """One node of the run: its description (``runtime.alive_nodes``), actors and device."""

    node: dict
    actors: int
    device: str
    # on a CPU the device *is* host memory: preprocess once per node in the load task, not
    # once per device actor (which would repeat the work for every actor needing an item)
    preprocess_on_host: bool = False
    mixed: tuple[str, ...] = ()  # devices="cuda,cpu": each actor's device, GPUs first

    def device_of(self, d: int) -> str:
        """The device of the node's ``d``-th actor."""
        return self.mixed[d] if self.mixed else self.device


@dataclass(frozen=True)
class RunPlan:
    """How a run is cut and budgeted, decided before any actor starts."""

    nodes: tuple[NodePlan, ...]
    leaf: int
    tiles: list[Tile]
    order: list[int]           # tile indices in planned order
    plan: str                  # the plan used (weighted tiles fall back to zorder)
    host_bytes: int            # L2 byte budget per node
    host_items: int            # S as configured or derived from the byte budget
    host_items_eff: int        # S, at most the number of items
    bound_R: float             # the modelled loads per item, 1 + n / (2 S)
    l1_items: int              # L1 item budget per device actor
    l1_bytes: int              # L1 byte budget per device actor
    load_batch: int            # items per load task
    deadlines: list[float]     # per tile, seconds
    measured: dict             # the measurements, plus the weighted budget when it applies
    warnings: tuple[str, ...]
    eviction: str = "next_use"  # the eviction every tier uses
    choice: dict | None = None  # how plan and eviction were chosen (``PlanChoice.to_dict``)
    heartbeat_s: float = 1.0   # how often a device actor says it is alive
    silent_after_s: float = 10.0  # silent this long: the actor is lost (liveness)
    shares: list | None = None  # per node with actors, its tiles in order (L3: StripePlan.deal)
    items: ItemMap | None = None  # the map the run's caches and policy use (packed or not)
    pack_members: list | None = None  # packed: each pack's items (ids of the unpacked map)
    item_bytes: float = 0.0    # one cached item's bytes (a pack's when packed)
    l2_items: int = 0          # the host tier's item budget in cached items (packs when packed)
    holds_every_item: bool = False  # the host tier holds every item: any order loads each once
    # dealt: the one plan's order, which what is left falls back to in contiguous shares when
    # the run loads more than its simulation (``course``: ``stealing.Course``'s arguments)
    fallback_order: list | None = None
    course: dict | None = None
    tile_overhead_s: float = 0.0  # the fixed seconds the leaf's model charged a tile

    @property
    def pack_rows(self) -> int:
        """Rows per pack (1: items are not packed)."""
        return self.leaf if self.pack_members is not None else 1

    @property
    def n_actors(self) -> int:
        return sum(n.actors for n in self.nodes)

    @property
    def max_actors_per_node(self) -> int:
        return max(n.actors for n in self.nodes)


def plan_nodes(nodes: list[dict], cfg: AllPairsConfig) -> tuple[NodePlan, ...]:
    """One device actor per GPU (``devices`` auto or cuda) or per CPU slot of every node.

    A node with neither CPU nor GPU (a cluster's head started with ``--num-cpus=0``, the usual
    production setup) runs no device actor and no node cache: its load tasks, which need a CPU,
    could never be scheduled there."""
    out = []
    for node in nodes:
        if node["cpus"] <= 0 and node["gpus"] <= 0:
            continue
        if "," in cfg.devices:
            out.extend(_mixed(node, cfg))
            continue
        if cfg.devices in ("auto", "cuda") and node["gpus"] > 0:
            count, dev = node["gpus"], "cuda"
        else:
            count = max(1, node["cpus"])
            dev = "cpu" if cfg.devices in ("auto", "cuda") else cfg.devices
        out.append(NodePlan(node, cfg.actors_per_node or count, dev,
                            preprocess_on_host=dev == "cpu" and cfg.preprocess_on_host))
    if not out:
        raise PairflowError("no node of the Ray cluster has a CPU or a GPU to run device actors "
                            f"on (nodes: {[(n['address'], n['cpus'], n['gpus']) for n in nodes]})")
    return tuple(out)


def _mixed(node: dict, cfg: AllPairsConfig) -> list[NodePlan]:
    """``devices="cuda,cpu"`` (or ``cuda,torch-cpu``): GPU actors and CPU actors side by side,
    one actor per GPU and one per CPU slot not feeding a GPU (a GPU actor's host thread takes a
    core); ``actors_per_node`` caps the CPU actors. Preprocessing stays with each actor: the
    node's load task cannot preprocess for two kinds of device."""
    kinds = [d.strip() for d in cfg.devices.split(",")]
    gpu = [d for d in kinds if d.startswith("cuda")]
    cpu = [d for d in kinds if not d.startswith("cuda")]
    if len(gpu) != 1 or len(cpu) != 1 or cpu[0] not in ("cpu", "torch-cpu"):
        raise PairflowError(f"devices={cfg.devices!r}: a mixed list names one GPU device and one "
                            "CPU device (cuda,cpu or cuda,torch-cpu)")
    gpus = node["gpus"]
    cpu_actors = max(0, node["cpus"] - gpus) if gpus else max(1, node["cpus"])
    if cfg.actors_per_node:
        cpu_actors = min(cpu_actors, cfg.actors_per_node)
    devices = (gpu[0],) * gpus + (cpu[0],) * cpu_actors
    if not devices:
        return []
    return [NodePlan(node, len(devices), devices[0], False, devices)]


LOAD_BATCH_MAX = 2048  # items of one load task at most (its infos travel as one list)


def load_batch(cfg: AllPairsConfig, t_parse: float) -> int:
    """Items per load task: enough that one task carries ``load_batch_s`` of parsing
    (a Ray task costs its loader milliseconds of CPU, and its owner and the raylet some more),
    or ``cfg.load_batch`` when set. Items that parse in
    microseconds (a read's bitset from its file's, built once per process) come a few
    thousand a task, so a run's first tiles do not wait for tens of tasks."""
    if cfg.load_batch:
        return int(cfg.load_batch)
    return max(1, min(LOAD_BATCH_MAX, math.ceil(cfg.load_batch_s / max(t_parse, 1e-6))))


def app_weights(app, space: PairSpace) -> PairWeights | None:
    """The app's per-row/per-column cost weights (``app.pair_weights()``), if it has any.

    Optional hook for capacity-aware tiles: a pair (i, j) is taken to cost about
    ``row_w[i] * col_w[j]`` units (Smith-Waterman: sequence lengths, so |q|*|t| cells).
    """
    get = getattr(app, "pair_weights", None)
    found = get() if callable(get) else None
    if found is None:
        return None
    w = found if isinstance(found, PairWeights) else PairWeights(*found)
    if (len(w.row), len(w.col)) != (space.n_rows, space.n_cols):
        raise PairflowError(f"pair_weights() gave {len(w.row)} x {len(w.col)} weights for a "
                            f"{space.n_rows} x {space.n_cols} space")
    return w


def weighted_probe(w: PairWeights, row_keys: Sequence[str], col_keys: Sequence[str]):
    """The probe sample for a weighted app: the median-weight row and column item (a typical
    pair, and never the one huge item), and the mean weight of the probe's pairs."""
    ri = int(np.argsort(w.row, kind="stable")[len(w.row) // 2])
    ci = int(np.argsort(w.col, kind="stable")[len(w.col) // 2])
    # the measurement compares the sample with itself: pairs (a,a), (a,b), (b,a), (b,b)
    return [row_keys[ri], col_keys[ci]], ((w.row[ri] + w.col[ci]) / 2) ** 2


def weighted_budget(w: PairWeights, space: PairSpace, t_pair: float, probe_weight: float,
                    target_s: float, n_actors: int, overhead_s: float = 0.0,
                    tail_split: bool = False) -> dict:
    """Cost per weight unit from the probe, and the most one tile may weigh: the cost model of
    ``choose_leaf`` (t* = sqrt(2 * overhead * W), never below ``target_s``) in probed seconds,
    no more than 1/4 of an actor's share (so heavy regions split), and no less than 1/64 of it:
    a probe of two items overstates per-pair costs, and a slow probe (a busy machine) must not
    cut the work into thousands of round trips.

    ``tail_split``: the run's last tiles will be quartered (``space.split_tail``), so the idle
    tail is about a quarter of a body tile, not half of one: the balance t* = sqrt(2 * overhead *
    W / tail) then lies at twice the size. ``tail_weight`` is what to split: about one body tile
    per actor."""
    rate = float(max(probe_weight, 1e-12) / max(t_pair, 1e-12))  # weight units per second
    total = w.total(space)
    share = total / max(1, n_actors)
    t_tile = max(target_s, math.sqrt(2 * overhead_s * share / rate))
    if tail_split:
        t_tile *= 2
    max_weight = max(min(max(t_tile * rate, share / 64), share / 4), 1e-9)
    return {"weight_per_s": rate, "probe_weight": float(probe_weight),
            "max_weight": max_weight, "total_weight": total,
            "tail_weight": n_actors * max_weight if tail_split else 0.0}


# The host tier's default share of a node's object store (``host_cache_bytes=None``), and the
# most it may take: the tier stays well below the store, since spilling is a fallback, not a
# tier; the apps' runs fit their items in 40 % (measured: RESULTS.md, "Rocket's applications").
HOST_TIER_SHARE = 0.4
HOST_TIER_MAX_SHARE = 0.7


def _host_budget(nodes: list[dict], cfg: AllPairsConfig, item_bytes: float,
                 warnings: list[str]) -> tuple[int, int, int]:
    """(object store bytes, L2 bytes, L2 items) per node: the L2 stays well below the object
    store (spilling is a fallback, not a tier)."""
    store = min(n["object_store"] for n in nodes) or 2**30
    host_bytes = cfg.host_cache_bytes or int(HOST_TIER_SHARE * store)
    if host_bytes > HOST_TIER_MAX_SHARE * store:
        cap = int(HOST_TIER_MAX_SHARE * store)
        warnings.append(f"host_cache_bytes {host_bytes} is more than "
                        f"{HOST_TIER_MAX_SHARE:.0%} of the object store ({store}); using {cap}")
        host_bytes = cap
    if cfg.host_cache_items:
        host_items = cfg.host_cache_items
    else:
        host_items = max(1, int(host_bytes // max(1.0, item_bytes)))
    return store, host_bytes, host_items


def _leaf(measured: dict, space: PairSpace, weights: PairWeights | None, cfg: AllPairsConfig,
          host_items: int, per_node_tiles: int, n_actors: int, n_items: int,
          device_items: int) -> int:
    # weighted tiles: the leaf is sized for a pair of mean weight, so a region of typical pairs
    # makes whole leaves and only heavy ones split (a quadtree split quarters a tile: sized
    # otherwise, typical tiles came out 1/4 of the budget)
    t_leaf = measured["t_pair"] if weights is None else \
        measured["total_weight"] / max(1, space.total) / measured["weight_per_s"]
    leaf = cfg.leaf_items or choose_leaf(
        t_leaf, space, host_items, per_node_tiles, n_actors, cfg.target_tile_s,
        t_item=measured.get("t_parse", 0.0), n_items=n_items,
        overhead_s=tile_overhead_s(measured, cfg.tile_overhead_s),
        device_items=device_items, in_flight=cfg.in_flight)
    if weights is not None and not cfg.leaf_items:
        # a block of mean pairs within 80 % of the budget: blocks vary around the mean
        mean_w = measured["total_weight"] / max(1, space.total)
        block = 0.8 * measured["max_weight"] / max(mean_w, 1e-12)  # mean pairs in a block
        leaf = max(1, min(leaf, int(math.sqrt(block))))
        # a thin rectangle (100 queries x 20,000 targets) whose items the host tier holds: a
        # block is narrow x leaf pairs, not leaf x leaf, so the leaf grows until the block
        # holds the budget's pairs
        narrow = min(getattr(space, "n_rows", 0), getattr(space, "n_cols", 0))
        if 0 < narrow < leaf and host_items >= n_items:
            wide = max(space.n_rows, space.n_cols)
            leaf = max(leaf, min(wide, int(block / narrow)))
    return leaf


def plan_run(measurements: dict, space: PairSpace, weights: PairWeights | None,
             nodes: list[dict], config: AllPairsConfig, *, items: ItemMap,
             probe_weight: float | None = None, resume_leaf: int | None = None,
             resume_tiles: Sequence[dict] | None = None, packable: bool = False,
             row_calls: bool = False) -> RunPlan:
    """The whole sizing of a run from measured stage costs (``t_pair``, ``t_parse``,
    ``item_bytes``; a resumed run passes its first run's, which already hold the weighted
    budget, ``resume_leaf`` and ``resume_tiles``, the first run's tiles in planned order).

    ``packable``: the app can load a tile side's items as one (``parse_pack``); then, for
    tiles cut on the leaf grid (no pair weights), the caches and the policy work on packs of
    ``leaf`` rows (``ItemMap.packed``): budgets in packs, the plan chosen over packs.

    ``row_calls``: the app's compare makes one kernel call per row of a tile, each with a fixed
    cost (``BasePairApp.row_calls``). A weighted rectangle whose items the host tier holds
    (the cut changes no load) is then cut into strips as wide as the space, by the weight
    budget (``space.row_strips``; its tail split into row blocks): one call per row, not one
    per row and tile (400 x 2,000 proteins: 400 Opal calls, not 5,200 on 200 x 200 tiles and
    their quarters).

    A resumed run works on the first run's tiles, whatever it would cut now: its journal names
    tiles by id, and the planner's choice (hence the order in which the tail is split) depends
    on the cache and the actors, which a resume may change."""
    cfg, warnings = config, []
    node_plan = plan_nodes(nodes, cfg)
    n_actors = sum(n.actors for n in node_plan)
    per_node = max(n.actors for n in node_plan)
    per_node_tiles = per_node * cfg.in_flight
    store, host_bytes, host_items = _host_budget([n.node for n in node_plan], cfg,
                                                 measurements.get("item_bytes", 1), warnings)
    host_items_eff = min(host_items, items.n_items)
    measured = dict(measurements)
    overhead = tile_overhead_s(measured, cfg.tile_overhead_s)  # a tile's fixed seconds
    if weights is not None and "max_weight" not in measured:
        measured.update(weighted_budget(weights, space, measured["t_pair"], probe_weight,
                                        cfg.target_tile_s, n_actors, overhead,
                                        cfg.tail_split))
    # L2 plus every L1 of a node stay under ~70 % of its object store
    l1_bytes = cfg.device_cache_bytes or max(1, int(0.3 * store) // per_node)
    # the items an L1 holds by its bytes (large items: fewer than its item count)
    l1_by_bytes = int(l1_bytes // max(1.0, float(measured.get("item_bytes", 1.0))))
    device_items = min(l1_by_bytes, cfg.device_cache_items or l1_by_bytes)
    leaf = int(resume_leaf) if resume_leaf is not None else _leaf(
        measured, space, weights, cfg, host_items_eff, per_node_tiles, n_actors, items.n_items,
        device_items)
    from .simulate import Timing, choose_plan  # here: an import most runs skip
    dealt = sum(1 for n in node_plan if n.actors)
    # node frontiers hand each node its share; with L3 the nodes' host tiers act as one, and
    # the planner weighs dealing them stripes as wide as all of them against contiguous shares
    frontiers = dealt > 1 and str(cfg.hierarchical).lower() != "false"
    shared_tiers = cfg.l3 and frontiers
    # what a tile costs a node, so the planner sees the nodes drift apart (simulate.Timing)
    timing = Timing(t_tile=overhead, t_pair=float(measurements.get("t_pair", 0.0)),
                    t_load=float(measurements.get("t_parse", 0.0))) if shared_tiers else None
    plan = cfg.plan
    if weights is not None and plan == "stripe":  # the stripe plan wants one tile per block
        plan = "zorder"
        warnings.append("tiles cut by pair weights are visited in Z-order (the stripe "
                        "plan assumes one tile per leaf block)")

    def plan_choice(leaf: int, tiles: list[Tile]):
        # the L1 the actors get holds l1_items or l1_bytes, whichever is less (large items)
        l1_sim = max(1, min(device_cache_items(leaf, cfg.in_flight, cfg.device_cache_items),
                            l1_by_bytes))
        return choose_plan(space, leaf, host_items_eff, items=items, tiles=tiles,
                           actors_per_node=per_node, nodes=max(1, dealt),
                           in_flight=cfg.in_flight, l1_items=l1_sim, window=cfg.window,
                           plan=plan, eviction=cfg.eviction, weighted=weights is not None,
                           l3=shared_tiers, frontiers=frontiers, timing=timing)
    choices = {}
    # (packed runs too: their packs are cut once the leaf is chosen, from rows as simulated)
    if (resume_leaf is None and not cfg.leaf_items and weights is None
            and host_items_eff < items.n_items):
        held = largest_leaf_held(device_items, cfg.in_flight)
        leaf, choices = search_leaf(leaf, measured, space, cfg, host_items_eff, n_actors,
                                    items.n_items, held, plan_choice)
    strips = (row_calls and weights is not None and type(space) is Rectangle
              and resume_tiles is None and not cfg.leaf_items
              and host_items_eff >= items.n_items
              and space.n_cols <= largest_leaf_held(device_items, cfg.in_flight))
    if strips:  # a strip's items, rows and every column, fit the L1 sized by the leaf
        leaf = max(leaf, space.n_cols)
        tiles = row_strips(space, weights, measured["max_weight"])
    else:
        tiles = leaves(space, leaf) if weights is None else \
            leaves(space, leaf, weights, measured["max_weight"])
    item_bytes = float(measured.get("item_bytes", 1.0))
    # the plan (an order of tiles) is chosen over rows; packed, the caches hold packs
    run_items, members, bound = items, None, bound_R(items.n_items, host_items_eff)
    l2_items = host_items
    l1_items = device_cache_items(leaf, cfg.in_flight, cfg.device_cache_items)
    if packable and weights is None and leaf > 1:
        run_items, members = items.packed(leaf)
        item_bytes *= leaf
        # a tile side is one pack: the L1 holds the sides of the tiles under way and one more
        l1_items = device_cache_items(1, cfg.in_flight, cfg.device_cache_items)
        # the host tier's rows, in whole packs (every pack when it holds every item)
        l2_items = max(1, host_items // leaf) if host_items < items.n_items else \
            run_items.n_items
        bound = bound_R(run_items.n_items, min(run_items.n_items, l2_items))
    choice = choices[leaf][0] if leaf in choices else plan_choice(leaf, tiles)
    plan = choice.plan
    planner = make_plan(plan, host_items_eff, per_node_tiles)
    shares = deal(planner, tiles, items, dealt, shared_tiers and choice.shares == "dealt",
                  choice.room)
    # dealt: stripes as wide as every node's host tier, the nodes' shares interleaved
    order = interleave(shares) if shares is not None else planner.order(tiles, items)
    cuts = (choice.modes.get("contiguous") or {}).get("cuts")
    if shares is None and frontiers and cuts == "stripes":
        # contiguous shares of the one plan cut where its stripes begin, as simulated
        # (else the frontiers' policy cuts equal runs)
        shares = contiguous_shares(order, dealt, stripe_starts(planner, tiles, items))
    fallback, course = None, None
    curve = (choice.modes.get("dealt") or {}).get("curve")
    if choice.shares == "dealt" and shares is not None and curve and resume_tiles is None:
        fallback = planner.order(tiles, items)
        course = {"curve": curve, "units": run_items.n_items,  # R in what the caches hold
                  "alternative": (choice.modes.get("contiguous") or {}).get("curve")}
    holds_every_item = host_items_eff >= items.n_items
    if shares is None and weights is None and holds_every_item:
        order = largest_first(tiles, order)  # every order loads each item once: end small
    if resume_tiles is not None:
        saved, order = saved_tiles(resume_tiles)
        if shares is not None:  # the same blocks, numbered as the first run numbered them
            at = {(t.r0, t.c0): t.id for t in saved}
            shares = [[at[(tiles[i].r0, tiles[i].c0)] for i in share] for share in shares]
        tiles = saved
    elif weights is not None and measured.get("tail_weight"):
        tiles, order = split_tail(space, tiles, order, measured["tail_weight"], weights,
                                  rows_only=strips)
    t_pair, t_parse = measured.get("t_pair", 0.0), measured.get("t_parse", 0.0)
    # as arrays (10^6 tiles: a Tile and two floats per tile took seconds of every start)
    cols = tiles if isinstance(tiles, TileArray) else TileArray.of(tiles)
    expected = t_pair * cols.pairs + t_parse * ((cols.r1 - cols.r0) + (cols.c1 - cols.c0))
    deadlines = np.maximum(cfg.deadline_floor_s, cfg.deadline_factor * expected).tolist()
    beat, silent = liveness(expected.tolist(), cfg)
    return RunPlan(
        nodes=node_plan, leaf=leaf, tiles=tiles, order=order, plan=plan,
        host_bytes=host_bytes, host_items=host_items, host_items_eff=host_items_eff,
        bound_R=bound,
        l1_items=l1_items, l1_bytes=l1_bytes,
        load_batch=load_batch(cfg, measured.get("t_parse", 0.0) * (leaf if members else 1)),
        deadlines=deadlines,
        measured=measured, warnings=tuple(warnings), eviction=choice.eviction,
        choice=with_search(choice.to_dict(), choices, leaf), heartbeat_s=beat,
        silent_after_s=silent, shares=shares,
        items=run_items, pack_members=members, item_bytes=item_bytes, l2_items=l2_items,
        holds_every_item=holds_every_item, fallback_order=fallback, course=course,
        tile_overhead_s=overhead)


def read_ahead_items(plan: RunPlan, cfg: AllPairsConfig,
                     done_tiles: Sequence[int] = ()) -> list[int] | None:
    """The items the node cache loads before they are asked for (``policy.read_ahead``): all
    the pending tiles need, when one node runs the actors and its host tier holds every item
    (else loading ahead would evict what is in use, or load on every node what one needs)."""
    if not cfg.read_ahead or not one_node_holds_every_item(plan):
        return None
    return first_needs(TileArray.of(plan.tiles), plan.items, plan.order, done_tiles)


def one_node_holds_every_item(plan: RunPlan) -> bool:
    """One node runs the actors and its host tier holds every item: no item is evicted, and
    no other node asks for one (what read-ahead and one-object loads rely on)."""
    return plan.holds_every_item and sum(1 for n in plan.nodes if n.actors) == 1


def one_object_loads(plan: RunPlan) -> bool:
    """Do load tasks return their items as one object (``loading.BatchPart``)? Where one node
    holds every item: then no item is evicted alone, and no peer (L3) pulls a whole batch to
    take one item."""
    return one_node_holds_every_item(plan)


def saved_tiles(planned: Sequence[dict]) -> tuple[list[Tile], list[int]]:
    """Tiles (indexed by id) and their order from a run's saved plan (``tiles.json``; or that
    plan as a ``TileArray``, in its order: sorted by id as arrays)."""
    if isinstance(planned, TileArray):
        ids = planned.column("id")
        tiles = TileArray(planned.a[np.argsort(ids, kind="stable")])
        if not np.array_equal(tiles.column("id"), np.arange(len(tiles))):
            raise ValueError("the saved tile plan does not number its tiles 0..n-1")
        return tiles, ids.tolist()
    tiles = sorted((Tile(**d) for d in planned), key=lambda t: t.id)
    if [t.id for t in tiles] != list(range(len(tiles))):
        raise ValueError("the saved tile plan does not number its tiles 0..n-1")
    return tiles, [int(d["id"]) for d in planned]


def liveness(expected_tile_s: Sequence[float], cfg: AllPairsConfig) -> tuple[float, float]:
    """(heartbeat, silent-after) seconds from the tiles' expected costs.

    A device actor's event loop beats while its compare runs in a thread, so silence means a
    stopped or wedged process, whatever the tile's length: the limit need not wait for a tile
    to end (that is what deadlines are for). It must outlast what can delay a live actor's
    beat: event-loop work between awaits, which grows with the tile (items handed over,
    a tile's bookkeeping), and a loaded machine's RPC latency. So: beats every typical tile
    (0.25..2 s), silence tolerated for 10 beats, never under the slowest expected tile's
    quarter nor 5 s (Ray calls on a busy node can take seconds)."""
    costs = sorted(expected_tile_s) or [0.0]
    typical = costs[len(costs) // 2]
    beat = cfg.heartbeat_s or min(2.0, max(0.25, typical))
    silent = cfg.silent_after_s or max(5.0, 10 * beat, 0.25 * costs[-1])
    return beat, silent


def validation_sample(pending: list[int], fraction: float, seed: int) -> list[int]:
    """The tiles recomputed on another actor to validate results: ``fraction`` of the pending
    ones, at least one, drawn reproducibly from ``seed``."""
    if not fraction or not pending:
        return []
    rng = np.random.default_rng(seed)
    count = min(len(pending), max(1, math.ceil(fraction * len(pending))))
    return sorted(int(t) for t in rng.choice(pending, count, replace=False))
