"""Side work an app does around a run (sketches before it, tracebacks after it) spread over the
cluster's CPUs as Ray tasks, or done in this process when there is no Ray to spread it on.

Apps must not import Ray (they would be tied to one runtime and pay its import in every tool
that only reads their configs); this is the one place their side work meets it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .executor_choice import ray_is_up as _ray_is_up  # the one check (tests patch this name)




def _chunks(n_items: int, n_chunks: int, weights: Sequence[float] | None) -> list[list[int]]:
    """Item positions cut into ``n_chunks``: contiguous runs, or with ``weights`` the heaviest
    first dealt round-robin, so chunks of very uneven items still cost about the same."""
    n_chunks = max(1, min(n_items, n_chunks))
    if weights is None:
        bounds = [round(c * n_items / n_chunks) for c in range(n_chunks + 1)]
        return [list(range(a, b)) for a, b in zip(bounds, bounds[1:]) if b > a]
    order = sorted(range(n_items), key=lambda i: -weights[i])
    dealt: list[list[int]] = [[] for _ in range(n_chunks)]
    for pos, i in enumerate(order):
        dealt[pos % n_chunks].append(i)
    return [c for c in dealt if c]


def map_chunks(fn: Callable[..., list], items: Sequence, *shared: Any,
               weights: Sequence[float] | None = None, chunks_per_cpu: int = 4,
               runtime: dict | None = None) -> list:
    """``fn(chunk, *shared)`` over chunks of ``items``, each call returning one result per item
    of its chunk; returns the results in the order of ``items``.

    The chunks run as Ray tasks (one CPU each, ``shared`` put in the object store once) when Ray
    is up in this process, or after starting or joining it with ``runtime`` (``ray_address``,
    ``num_cpus``, ``object_store_mb``: what ``pairflow.allpairs`` takes); otherwise ``fn`` runs
    here, once, on all the items.
    """
    items = list(items)
    if runtime is not None and not _ray_is_up():
        from .runtime import init_ray
        init_ray(runtime.get("ray_address"), runtime.get("num_cpus"),
                 runtime.get("object_store_mb"))
    if not _ray_is_up() or len(items) < 2:
        return list(fn(items, *shared))
    import ray
    cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
    chunks = _chunks(len(items), chunks_per_cpu * cpus, weights)
    task = ray.remote(num_cpus=1)(fn)
    shared_refs = [ray.put(s) for s in shared]
    outs = ray.get([task.remote([items[i] for i in c], *shared_refs) for c in chunks])
    results: list = [None] * len(items)
    for chunk, out in zip(chunks, outs):
        for i, r in zip(chunk, out):
            results[i] = r
    return results
