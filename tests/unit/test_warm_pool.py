"""The warm pool's rules (engine/pairs/workers/warm.py), without Ray: an actor is taken only for
the kind, node and resources it was started with, once, and only by the connection that handed it
back."""
from pairflow.engine.pairs.workers.warm import WarmPool

OWNER = ("01000000", "node-a")


def test_an_actor_is_taken_once_for_its_own_kind_and_node():
    pool = WarmPool()
    assert pool.give(OWNER, "device", "node-a", {}, "cpu-actor")
    assert pool.give(OWNER, "coordinator", "node-a", {}, "coord")
    assert pool.take(OWNER, "device", "node-b", {}) is None          # another node
    assert pool.take(OWNER, "device", "node-a", {"num_gpus": 1}) is None
    assert pool.take(OWNER, "device", "node-a", {}) == "cpu-actor"
    assert pool.take(OWNER, "device", "node-a", {}) is None          # taken already
    assert pool.take(OWNER, "coordinator", "node-a", {}) == "coord"
    assert (pool.taken, pool.returned, pool.size()) == (2, 2, 0)


def test_an_actor_holding_a_gpu_is_not_kept_idle():
    pool = WarmPool()
    assert not pool.give(OWNER, "device", "node-a", {"num_gpus": 1}, "gpu-actor")
    assert pool.size() == 0 and pool.take(OWNER, "device", "node-a", {"num_gpus": 1}) is None
    assert pool.give(OWNER, "device", "node-a", {"num_gpus": 0}, "asks-for-none")


def test_a_new_connection_to_ray_forgets_the_old_ones_actors():
    pool = WarmPool()
    pool.give(OWNER, "device", "node-a", {}, "old")
    assert pool.take(("02000000", "node-a"), "device", "node-a", {}) is None
    assert pool.size() == 0
    assert pool.take(OWNER, "device", "node-a", {}) is None  # gone with its connection
