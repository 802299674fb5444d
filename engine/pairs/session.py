"""A REPL session: one Ray kept up across runs, so each run after the first starts in well under
a second instead of paying Ray's start again.

    import engine
    with engine.session(num_cpus=2) as s:
        a = s.allpairs(app=app1, wait=True)     # waits for Ray (started in the background)
        b = s.allpairs(app=app2, wait=True)     # Ray is up: no start-up

Ray starts in a background thread when the session opens, so building the app overlaps it.
Runs inside a session use its Ray whatever their size (``executor="inprocess"`` still forces
threads). The coordinator and device actors of a run that finished cleanly stay up and serve
the next run (``rebind``: every object of the old run is replaced; imports, compiled kernels
and an app's ``warmup`` stay), so a later run starts no process; a failed run's actors are
stopped, never reused. ``close()`` (or leaving the
``with`` block) stops the Ray this session started; a Ray that was already up is left running.
"""
from __future__ import annotations

from .executor import RayExecutor


class _SessionExecutor(RayExecutor):
    """Ray, plus the warm actors of the session's finished runs: a run asks for a coordinator
    or a device actor on a node, and gets an idle one of the session's, rebound to the run
    (``rebind``), before a new process is started. Only actors of a run that finished cleanly
    come back (``keep``); a failed run's, or a killed one, are never reused."""

    def __init__(self, *args):
        super().__init__(*args)
        self.idle: dict[tuple[str, str], list] = {}  # (kind, node id) -> actors
        self.node_of: dict[int, str] = {}            # id(handle) -> node id

    def _take(self, kind: str, node: dict):
        pool = self.idle.get((kind, node["node_id"]))
        return pool.pop() if pool else None

    def coordinator(self, node, scheduler_kw, metrics_kw, cache_spec):
        handle = self._take("coordinator", node)
        if handle is None:
            handle = super().coordinator(node, scheduler_kw, metrics_kw, cache_spec)
        else:
            handle.rebind.remote(scheduler_kw, metrics_kw, cache_spec)  # ordered before use
        self.node_of[id(handle)] = node["node_id"]
        return handle

    def device(self, node, spec, app_ref):
        handle = self._take("device", node)
        if handle is None:
            handle = super().device(node, spec, app_ref)
        else:
            handle.rebind.remote(spec, app_ref)
        self.node_of[id(handle)] = node["node_id"]
        return handle

    def keep(self, devices, coordinator) -> list:
        """Take back a finished run's device actors and coordinator; returns what it does not
        keep (node-cache actors of other nodes: made per run), for the caller to stop."""
        for kind, handles in (("device", list(devices)), ("coordinator", [coordinator])):
            for h in handles:
                node = self.node_of.pop(id(h), None)
                if h is not None and node is not None:
                    self.idle.setdefault((kind, node), []).append(h)
        return []


class Session:
    """One Ray for many runs; ``defaults`` are ``allpairs`` options every run gets."""

    def __init__(self, num_cpus: int | None = None, object_store_mb: int | None = None,
                 ray_address: str | None = None, **defaults):
        self.runtime = dict(num_cpus=num_cpus, object_store_mb=object_store_mb,
                            ray_address=ray_address)
        self.defaults = defaults
        self.executor = _SessionExecutor(ray_address, num_cpus, object_store_mb)
        self.executor.start()
        self.runs: list = []
        self.closed = False

    def allpairs(self, *args, **options):
        """``engine.allpairs`` on this session's Ray; same arguments, same return."""
        from .driver import allpairs
        if self.closed:
            raise RuntimeError("this session is closed")
        opts = {**self.defaults, **options}
        for key, value in self.runtime.items():
            if value is not None:
                opts.setdefault(key, value)
        handle = allpairs(*args, session=self, **opts)
        self.runs.append(handle)
        return handle

    def close(self) -> None:
        """Stop the Ray this session started (a Ray already up when it opened keeps running)."""
        if self.closed:
            return
        self.closed = True
        if self.executor.started:
            import ray
            ray.shutdown()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session(runs={len(self.runs)}, closed={self.closed}, {self.runtime})"


def session(num_cpus: int | None = None, object_store_mb: int | None = None,
            ray_address: str | None = None, **defaults) -> Session:
    """A ``Session`` (module docstring): ``with engine.session(num_cpus=2) as s: ...``."""
    return Session(num_cpus, object_store_mb, ray_address, **defaults)
