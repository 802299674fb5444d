"""Starting or joining Ray, sized for the machine, on loopback unless told otherwise."""
from __future__ import annotations

import os

DEFAULT_OBJECT_STORE_MB = 1536


def init_ray(address: str | None = None, num_cpus: int | None = None,
             object_store_mb: int | None = None, quiet: bool = True) -> bool:
    """Start an in-process local Ray (or join ``address``); returns True if this call started it.

    A local Ray binds 127.0.0.1 only: Ray 2.60 otherwise binds the machine's external address.
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    import ray  # here, not at the top: the in-process executor reads this module without Ray
    if ray.is_initialized():
        return False
    kwargs = dict(logging_level="warning" if quiet else "info", log_to_driver=True)
    if address and address != "local":
        ray.init(address=address, **kwargs)
        return True
    # event_stats times every handler of every Ray event loop for Ray's debug dumps, which
    # nothing here reads: off, an idle actor costs much less CPU
    # address="local": a new Ray of our own, even where RAY_ADDRESS is set or a `ray start`
    # cluster runs on this machine (ray.init() would join that one and refuse num_cpus)
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
             object_store_memory=int((object_store_mb or DEFAULT_OBJECT_STORE_MB) * 2**20),
             include_dashboard=False, _node_ip_address="127.0.0.1",
             _system_config={"event_stats": False}, **kwargs)
    return True


def alive_nodes() -> list[dict]:
    """Alive nodes with their CPU/GPU counts, the head node (which a cluster cannot lose)
    first."""
    import ray
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    nodes.sort(key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
    return [{"node_id": n["NodeID"], "address": n.get("NodeManagerAddress"),
             "head": "node:__internal_head__" in n["Resources"],
             "cpus": int(n["Resources"].get("CPU", 0)), "gpus": int(n["Resources"].get("GPU", 0)),
             "object_store": int(n["Resources"].get("object_store_memory", 0))} for n in nodes]
