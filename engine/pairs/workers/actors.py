"""The Ray side of the all-pairs engine's workers: load tasks, node caches and device actors.

``NodeCacheActor`` (one per node but the head, whose cache lives in the coordinator): a
``node_cache.NodeCache`` whose loader submits ``load_items`` tasks pinned to its node. It
submits them itself so that it owns the parsed objects (an object dies with its owner; a device
actor's death must not empty the host tier).

``FrontierActor`` (one per node with device actors, in a hierarchical run): a
``frontier.FrontierWorker``, the node's queue of tiles.

``DeviceActor`` (one per device: a GPU, or a CPU slot): ``device_worker.DeviceWorker``, which
pulls tiles, keeps its L1 and writes results.

Both take one spec object, built by the driver (and, for the head node's cache, by the
coordinator), with the clients of the actors they call.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...run.metrics import EventBuffer
from ...run.runtime import give_back_freed_memory
from .clients import MetricsClient, SchedulerClient
from .device_worker import DeviceWorker
from .frontier import FrontierWorker
from ..cache.loading import BatchPart, check_items, load_items, measure_stages
from ..cache.node_cache import NodeCache
from ..cache.eviction import make_eviction
from ..cache.tiers import BudgetCache

# The classes below are plain: Ray wraps them on first use (``__getattr__`` at the end), so the
# in-process executor (executor.py) runs the same workers on threads without importing Ray.
# enable_task_events=False on the engine's actors and tasks: Ray otherwise records every call's
# state changes and ships them to the GCS for its dashboard and state API, which pairflow does
# not read (its own metrics and trace are in the run directory)
_REMOTE = {
    "load_items_task": lambda ray: ray.remote(num_cpus=1, enable_task_events=False)(load_items),
    "check_items_task": lambda ray: ray.remote(enable_task_events=False)(check_items),
    "measure_task": lambda ray: ray.remote(num_cpus=1, enable_task_events=False)(measure_stages),
    "NodeCacheActor": lambda ray: ray.remote(num_cpus=0, enable_task_events=False)(
        NodeCacheWorker),
    "DeviceActor": lambda ray: ray.remote(num_cpus=0, enable_task_events=False)(DeviceWorker),
    "FrontierActor": lambda ray: ray.remote(num_cpus=0, enable_task_events=False)(
        FrontierWorker),
}
_made: dict = {}


def __getattr__(name):
    """The Ray task or actor class ``name``, made (and Ray imported) on first use."""
    if name not in _REMOTE:
        raise AttributeError(name)
    if name not in _made:
        import ray
        _made[name] = _REMOTE[name](ray)
    return _made[name]


@dataclass
class NodeCacheSpec:
    """One node's L2: where it is, what it loads and its budget."""

    node: str                    # "node-<index>"
    node_id: str | None          # Ray's node id: load tasks are pinned there
    app: object
    item_keys: list[str]
    budget_bytes: int | None
    budget_items: int | None
    eviction: str
    preprocess_on: str | None = None     # a host-memory device: preprocess in the load task
    load_batch: int = 1
    load_slots: int = 1                  # the node's CPUs: batches never serialise them
    inline_bytes: int = 64 * 1024
    expected_item_bytes: float | None = None
    shipment: object = None              # the driver's local files (run/shipping.py)
    store: object = None                 # the run's L4 item store (store.py), or None
    read_ahead: list[int] | None = None  # items to load before they are asked for (policy.py)
    one_object: bool = False             # a load task's items in one object (BatchPart)


class _LoadTasks:
    """The node cache's loader: one ``load_items`` task per batch, on the cache's node."""

    def __init__(self, spec: NodeCacheSpec):
        import ray
        self.app_ref = ray.put(spec.app)
        # one object for every task: the shipment's refs are not serialised per task
        self.shipment = ray.put(spec.shipment) if spec.shipment is not None else None
        self.item_keys = spec.item_keys
        self.preprocess_on, self.inline_bytes = spec.preprocess_on, spec.inline_bytes
        self.store = spec.store
        self.one_object = spec.one_object
        # items measured far below the inline size all travel by value: one return per task
        self.all_inline = spec.expected_item_bytes is not None and \
            4 * spec.expected_item_bytes <= spec.inline_bytes
        self.options = {}
        if spec.node_id:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            self.options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(spec.node_id,
                                                                                 soft=False)

    def __call__(self, batch: list[int]) -> tuple[list, object]:
        """(a ref per item, a ref to the list of their infos)."""
        keys = [self.item_keys[i] for i in batch]
        load_items_task = __getattr__("load_items_task")
        if self.all_inline:
            ref = load_items_task.options(num_returns=1, **self.options).remote(
                self.app_ref, keys, self.preprocess_on, self.inline_bytes, True,
                shipment=self.shipment, store=self.store)
            return [ref] * len(batch), ref  # a failed load's error travels in every item
        returns = 2 if self.one_object else len(batch) + 1
        refs = load_items_task.options(num_returns=returns, **self.options).remote(
            self.app_ref, keys, self.preprocess_on, self.inline_bytes, shipment=self.shipment,
            store=self.store, one_object=self.one_object)
        if self.one_object:
            return [BatchPart(refs[0], i) for i in range(len(batch))], refs[1]
        return list(refs[:-1]), refs[-1]


def node_cache(spec: NodeCacheSpec, scheduler, metrics, loader=None) -> NodeCache:
    """A node cache loading through Ray tasks (or ``loader(spec)``'s load function: the
    in-process executor's threads); ``scheduler``/``metrics``: clients (or their in-process
    stand-ins inside the coordinator)."""
    cache = BudgetCache(spec.budget_bytes, spec.budget_items, make_eviction(spec.eviction))
    return NodeCache(spec.node, spec.item_keys, cache, (loader or _LoadTasks)(spec), scheduler,
                     EventBuffer(metrics), spec.load_batch, spec.load_slots, spec.read_ahead)


async def own_object(entry: tuple) -> tuple:
    """L3: a peer's object pulled into this node's object store and put there again, so this
    node owns its copy (the peer may evict its own, or be lost, without breaking this one)."""
    import ray
    value = await entry[1]  # (an ObjectRef or a BatchPart)
    return ("ref", ray.put(value))


def connect_l3(cache: NodeCache, index: int, peers: list, hops: int) -> None:
    """Give a node cache its L3 side: the shard it hosts and the other nodes' caches."""
    from ..cache.directory import Peers
    cache.peers = Peers(index, peers, hops, own=own_object)


class NodeCacheWorker:
    """A node's cache where no coordinator is: on every node but the head."""

    def __init__(self, spec: NodeCacheSpec, scheduler: SchedulerClient, metrics: MetricsClient):
        self.cache = node_cache(spec, scheduler, metrics)

    def rebind(self, spec: NodeCacheSpec, scheduler: SchedulerClient,
               metrics: MetricsClient) -> None:
        """Serve another run (warm.py): a new cache; the process and its imports stay."""
        self.__init__(spec, scheduler, metrics)

    def retire(self) -> None:
        """Idle in the warm pool until ``rebind``: let go of the run's items, and give the
        memory back (before the driver's finalize, driver._release)."""
        self.cache = None
        give_back_freed_memory()

    async def get(self, items: list[int]) -> dict:
        return await self.cache.get(items)

    # L3 (directory.py): the shard hosted here, and what this node hands to its peers
    def connect(self, index: int, peers: list, hops: int) -> bool:
        connect_l3(self.cache, index, peers, hops)
        return True

    async def take(self, items: list[int]) -> dict:
        return await self.cache.take(items)

    def dir_lookup(self, items: list[int], claim: int | None = None) -> dict:
        return self.cache.peers.shard_lookup(items, claim)

    def dir_record(self, node: int, added: list, removed: list) -> None:
        self.cache.peers.shard_record(node, added, removed)

    async def stats(self) -> dict:
        return await self.cache.stats()

    def ready(self) -> bool:
        return True


def device_options(device: str) -> dict:
    """Ray resources of a device actor: a GPU actor asks for one GPU, so Ray gives it a device
    of its own (``CUDA_VISIBLE_DEVICES``); without it every actor of a multi-GPU node used the
    first. A CPU actor asks for nothing: its node's CPUs are the load tasks'."""
    return {"num_gpus": 1} if device.startswith("cuda") else {}
