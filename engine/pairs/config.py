"""The knobs of an all-pairs run, in a module free of Ray so sizing and tests can read them."""
from __future__ import annotations

from dataclasses import dataclass, fields

from pairflow.engine.run.executor_choice import INPROCESS_MAX_S


@dataclass
class AllPairsConfig:
    """Every knob of a run, with the defaults the Hydra config uses too."""

    leaf_items: int | None = None        # tile side; None: chosen from measured stage costs
    target_tile_s: float = 0.05          # the least a tile should cost when the leaf is chosen
    tile_overhead_s: float | None = None  # fixed cost per tile in the leaf's cost model; None:
                                         #   the executor's, measured (plan/tile_cost.py)
    load_batch: int | None = None        # items per load task; None: from the measured parse
    load_batch_s: float = 0.3            #   time, so one task carries about this much work
                                         #   (a task costs its loader CPU of its own besides)
    in_flight: int = 2                   # tiles under way per device actor (prefetch depth)
    devices: str = "auto"                # auto | cpu | torch-cpu | cuda | cuda,cpu (side by
                                         #   side: sizing.plan_nodes)
    actors_per_node: int | None = None   # default: one per CPU slot (or GPU)
    host_cache_items: int | None = None  # S: items one node's host tier holds
    host_cache_bytes: int | None = None  # default: 40 % of the node's object store
                                         #   (sizing.HOST_TIER_SHARE)
    device_cache_items: int | None = None  # default: 2 * leaf * (in_flight + 1)
    device_cache_bytes: int | None = None
    inline_item_bytes: int = 65536       # items up to this size go to device actors by value
    pack_items: bool = True              # an app with parse_pack: cache and load a tile side's
                                         #   items as one (policy.ItemMap.packed)
    read_ahead: bool = True              # one node whose host tier holds every item: its idle
                                         #   load slots load what the plan needs next
    l3: bool = False                     # L3: take items from peer nodes' caches (directory.py)
    l3_hops: int = 1                     #   asking at most h of an item's holders
    store: str | None = None             # L4: parsed items kept across runs at this directory
                                         #   or fsspec URL (store.py); None: off
    plan: str = "auto"                   # auto | stripe | hilbert | zorder
    eviction: str = "auto"               # auto | next_use | lru (auto: the simulator picks)
    window: int = 8                      # pending tiles the scheduler looks at per request
    hierarchical: str | bool = "auto"    # auto | true | false: node frontiers + work stealing
    steal_batch: int = 32                #   (auto: on Ray with >1 node running device actors);
                                         #   tiles a node frontier asks the head for at once
    preflight: bool = True
    progress: bool = True
    runs_root: str = "runs"
    result_store: str | None = None      # an fsspec URL (s3://bucket/prefix ...): the driver
                                         #   copies the finished outputs there (io.publish)
    executor: str = "auto"               # auto | inprocess | ray (executor.py: auto runs small
    inprocess_max_s: float = INPROCESS_MAX_S  #   runs, up to this many probed seconds of work per
                                         #   CPU, on threads here without Ray)
    ray_address: str | None = None
    num_cpus: int | None = None
    shared_fs: bool | None = None        # do workers see the driver's files? None: yes when
                                         #   every node is on the driver's machine
    object_store_mb: int | None = None
    resume: bool = False                 # replay the run directory's journal, redo the rest
    validate: float = 0.0                # fraction of tiles recomputed on another actor
    max_retries: int = 2                 # attempts after the first, per tile, on worker loss
    deadline_floor_s: float = 120.0      # a tile's deadline: max(floor, factor * its
    deadline_factor: float = 20.0        #   expected cost from the measured stage times)
    heartbeat_s: float | None = None     # device actors' heartbeat; None: from tile costs
    silent_after_s: float | None = None  # an actor silent this long is lost; None: derived
                                         #   from the measured tile costs (sizing.liveness)
    replace_lost_actors: bool = True
    preprocess_on_host: bool = True      # CPU devices: preprocess in the node's load task
    journal: bool = True                 # off only to measure its overhead: no resume without
    journal_fsync_s: float = 1.0         # fsync the journal at most this often (and at the end)
    seed: int = 0                        # for the validation sample
    tail_split: bool = True              # weighted tiles: big tiles for the body of the run,
                                         #   the last ones quartered (space.split_tail)

    @classmethod
    def from_options(cls, options: dict) -> "AllPairsConfig":
        """A config from ``allpairs(**options)``: a mistyped option is an error, not ignored."""
        unknown = set(options) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown allpairs option(s): {sorted(unknown)}")
        cfg = cls(**options)
        if cfg.in_flight < 1:
            raise ValueError("in_flight must be >= 1")
        if str(cfg.hierarchical).lower() not in ("auto", "true", "false"):
            raise ValueError(f"hierarchical must be auto, true or false, got "
                             f"{cfg.hierarchical!r}")
        if cfg.steal_batch < 1:
            raise ValueError("steal_batch must be >= 1")
        return cfg
