"""A REPL session: one Ray kept up across runs, so each run after the first starts in well under
a second instead of paying Ray's start again.

    import pairflow
    with pairflow.session(num_cpus=2) as s:
        a = s.allpairs(app=app1, wait=True)     # waits for Ray (started in the background)
        b = s.allpairs(app=app2, wait=True)     # Ray is up: no start-up

Ray starts in a background thread when the session opens, so building the app overlaps it.
Runs inside a session use its Ray whatever their size (``executor="inprocess"`` still forces
threads). As for any run on a Ray that stays up, the coordinator and device actors of a run
that finished cleanly stay up and serve the next run (warm.py), so a later run starts no
process; a failed run's actors are stopped, never reused. ``close()`` (or leaving the
``with`` block) stops the Ray this session started; a Ray that was already up is left running.
"""
from __future__ import annotations

from .workers.executor import RayExecutor


class Session:
    """One Ray for many runs; ``defaults`` are ``allpairs`` options every run gets."""

    def __init__(self, num_cpus: int | None = None, object_store_mb: int | None = None,
                 ray_address: str | None = None, **defaults):
        self.runtime = dict(num_cpus=num_cpus, object_store_mb=object_store_mb,
                            ray_address=ray_address)
        self.defaults = defaults
        self.executor = RayExecutor(ray_address, num_cpus, object_store_mb)
        self.executor.start()
        self.runs: list = []
        self.closed = False

    def allpairs(self, *args, **options):
        """``pairflow.allpairs`` on this session's Ray; same arguments, same return."""
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
    """A ``Session`` (module docstring): ``with pairflow.session(num_cpus=2) as s: ...``."""
    return Session(num_cpus, object_store_mb, ray_address, **defaults)
