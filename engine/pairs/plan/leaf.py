"""The tile side (the leaf), pure: how many items a tile's block takes a side.

Every tile pays a fixed cost and the run ends on idle actors, so the leaf comes from a
two-term cost model (``model_leaf``), bounded by the tiers (``choose_leaf``: a stripe must
fit a host tier that cannot hold every item) and cut into even blocks (``even_side``). Where
that bound binds, the larger leaves the device tiers allow may load each item fewer times
and pay fewer tiles' fixed costs (a tile grouping the small leaves, which share items):
``search_leaf`` simulates each candidate (``leaf_candidates``) and takes the least modelled
time (``modelled_seconds``, ``pick_leaf``). The fixed cost per tile is the executor's,
measured (``tile_cost``). ``sizing.plan_run`` calls these; the simulator and the driver thus
cut the same tiles.
"""
from __future__ import annotations

import math

from ..config import AllPairsConfig
from ..space import PairSpace, leaves
from ..cache.tiers import largest_leaf_held
from .tile_cost import overhead_s as tile_overhead_s

EVEN_SLACK = 0.05  # a leaf may grow this much to save a block of the longer side


def choose_leaf(t_pair: float, space: PairSpace, host_items: int, per_node_tiles: int,
                n_actors: int, target_s: float = 0.05, t_item: float = 0.0,
                n_items: int | None = None, overhead_s: float = 0.02,
                device_items: int | None = None, in_flight: int = 1) -> int:
    """Leaf side from a two-term cost model, bounded so stripes fit and work balances.

    Every tile pays a fixed ``overhead_s`` (two Ray calls, the sink write, events), and the run
    ends with actors idle for about half a tile each. With W an actor's share of the work, the
    lost fraction is overhead/t + t/(2W), least at t* = sqrt(2 * overhead * W): big runs get big
    tiles, small runs small ones, and no tile is aimed below ``target_s``. ``overhead_s`` is
    the executor's measured fixed cost (``tile_cost.tile_overhead``).

    ``device_items``: the items one device actor's own tier (its L1) holds, ``in_flight`` its
    tiles under way (None: the host tier must hold those too).
    """
    b = model_leaf(t_pair, space, n_actors, target_s, t_item, n_items, overhead_s)
    side = max(space.n_rows, space.n_cols, 1)
    # a stripe of at least ~4 leaf blocks plus the streamed columns under way fit the host
    # tier; a tier that holds every item needs no stripe (a cap there only multiplies the
    # tiles, and each tile's fixed costs with them). Where
    # every device actor's own tier holds the items of its tiles under way and one more
    # (``tiers.device_cache_items``), the streamed columns only pass through the host tier,
    # and the stripe alone must fit it (the plan keeps their room beside it; measured at a
    # quarter host tier: RESULTS.md, "Rocket's applications")
    if n_items is None or host_items < n_items:
        cap = host_items // (4 + per_node_tiles)
        if device_items:
            cap = max(cap, min(host_items // 4, largest_leaf_held(device_items, in_flight)))
        b = even_side(min(b, max(1, cap)), side)
    return max(1, b)


def model_leaf(t_pair: float, space: PairSpace, n_actors: int, target_s: float = 0.05,
               t_item: float = 0.0, n_items: int | None = None, overhead_s: float = 0.02) -> int:
    """The leaf of ``choose_leaf``'s cost model before any tier bounds it (at least ~4 tiles
    an actor, cut into even blocks). At t* the fixed cost is sqrt(overhead / 2W) of a tile:
    a tenth or less wherever an actor's share is 50 fixed costs or more (a second on Ray);
    a smaller run keeps its ~4 tiles an actor and pays a larger share (``tile_cost``)."""
    work = ((n_items or 0) * t_item + space.total * t_pair) / max(1, n_actors)
    t_tile = max(target_s, math.sqrt(2 * overhead_s * work))
    b = math.ceil(math.sqrt(t_tile / max(t_pair, 1e-9)))
    pairs = max(1, space.total)
    b = min(b, max(1, int(math.sqrt(pairs / (4 * max(1, n_actors))))))  # >= ~4 tiles per actor
    return even_side(b, max(space.n_rows, space.n_cols, 1), slack=EVEN_SLACK)


def leaf_candidates(capped: int, model: int, host_items: int, held: int, side: int) -> list[int]:
    """The leaves a run whose host tier cannot hold every item may take: the one
    ``choose_leaf``'s stripe rule gives (``capped``), doubled while below the cost model's own
    (``model``), and the model's; each with its tile's items in the host tier (2 x leaf) and its
    tiles under way and one more in every L1 (``held``: ``tiers.largest_leaf_held`` of the
    L1's items by bytes)."""
    most = min(model, host_items // 2, held)
    found, b = {capped}, 2 * capped
    while b < most:
        found.add(even_side(b, side))
        b *= 2
    if most > capped:
        found.add(even_side(most, side))
    return sorted(found)  # (even_side never lengthens a leaf it is given no slack for)


def modelled_seconds(R: float, n_items: int, t_item: float, pairs: int, t_pair: float,
                     tiles: int, overhead_s: float, n_actors: int, leaf: int) -> float:
    """A run's modelled time: every load (R x n, each parsed again), pair and tile's fixed
    cost shared by the actors, plus the idle tail of half a tile. Loads are counted beside the
    compares, as on a CPU node whose load tasks share the device actors' cores (on a GPU node
    they overlap: the model then favours fewer loads more than it needs to)."""
    work = R * n_items * t_item + pairs * t_pair + tiles * overhead_s
    return work / max(1, n_actors) + leaf * leaf * t_pair / 2


def pick_leaf(costs: dict) -> int:
    """The candidate leaf of least modelled time (``costs``: leaf -> seconds); on a tie the
    smaller leaf (smaller tiles balance better than the model knows)."""
    return min(costs, key=lambda leaf: (costs[leaf], leaf))


def even_side(b: int, n: int, slack: float = 0.0) -> int:
    """The leaf that cuts ``n`` items into equal blocks, as few as a leaf of ``b`` makes (or
    one fewer, if a leaf up to ``slack`` longer than ``b`` does it): never a sliver. A leaf of
    2,494 cut 9,980 reads into four blocks and one of 4 reads, so 15 tiles where 10 do, each
    with the fixed costs of a whole tile."""
    b = max(1, int(b))
    blocks = math.ceil(n / b)
    if blocks > 1 and math.ceil(n / (blocks - 1)) <= b * (1 + slack):
        blocks -= 1
    return max(1, math.ceil(n / blocks))


def search_leaf(leaf: int, measured: dict, space: PairSpace, cfg: AllPairsConfig,
                host_items: int, n_actors: int, n_items: int, held: int, plan_choice):
    """The leaf of least modelled time (``modelled_seconds``) among ``leaf_candidates``, each
    with the R its simulated plan loads (``plan_choice``: leaf, tiles -> ``PlanChoice``).
    Returns the leaf and, per candidate, (its choice, its modelled seconds); the leaf as given
    and nothing when there is one candidate or a plan is not simulated (as configured, or too
    many tiles). Why: the stripe rule asks the host tier for ~4 leaf blocks, but where the
    device tiers hold a tile's items a larger leaf loads each item fewer times (forensics at a
    quarter host tier, measured: RESULTS.md, "Rocket's applications"), and pays its fixed
    cost (``tile_cost``: the executor's, measured) once for 4, 16 ... of the stripe rule's
    leaves: a candidate is a square group of its blocks, which share their rows' and columns'
    items (a square holds the most pairs for the items it needs at once)."""
    t_pair, t_item = measured.get("t_pair", 0.0), measured.get("t_parse", 0.0)
    over = tile_overhead_s(measured, cfg.tile_overhead_s)
    model = model_leaf(t_pair, space, n_actors, cfg.target_tile_s, t_item, n_items, over)
    side = max(space.n_rows, space.n_cols, 1)
    found = leaf_candidates(leaf, model, host_items, held, side)
    if len(found) < 2:
        return leaf, {}
    choices = {}
    for b in found:
        tiles = leaves(space, b)
        choice = plan_choice(b, tiles)
        if choice.R is None:
            return leaf, {}
        choices[b] = (choice, modelled_seconds(choice.R, n_items, t_item, space.total, t_pair,
                                               len(tiles), over, n_actors, b))
    return pick_leaf({b: c[1] for b, c in choices.items()}), choices


def with_search(choice: dict, choices: dict, leaf: int) -> dict:
    """The plan choice's record, with the leaves searched (leaf -> simulated R, modelled s)."""
    if not choices:
        return choice
    searched = {str(b): {"R": c.R, "modelled_s": round(s, 3)} for b, (c, s) in choices.items()}
    others = ", ".join(f"{b} {v['modelled_s']:.1f} s" for b, v in searched.items()
                       if b != str(leaf))
    took = searched[str(leaf)]["modelled_s"]
    return {**choice, "leaf_search": searched,
            "line": f"{choice['line']}; leaf {leaf}, modelled {took:.1f} s (vs {others})"}
