"""The run view: one run directory read incrementally, composed of one reader per dashboard view.

The view owns the files (the whole-file JSON ones and one tailer per JSON Lines stream), reads
only what was appended at each :meth:`RunView.refresh` and hands each stream's new records to
the readers that take them; each reader (:mod:`.devices`, :mod:`.cache`, :mod:`.matrix`,
:mod:`.timeline`, :mod:`.pipelines`, :mod:`.farm`, :mod:`.scheduling`, and the snapshots behind
the overview) derives its view's frames, cached here until their inputs change. The run's state
and progress (:class:`.state.RunState`) are the view's own methods. :meth:`RunView.views` says
which views apply to the run, from meta.json's kind and what the readers have found.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .base import Reader, locked
from .cache import CacheTiers
from .devices import Devices
from .farm import Farm
from .matrix import Matrix, read_plan
from .pipelines import Pipelines
from .scheduling import Scheduling
from .snapshots import Snapshots
from .state import TERMINAL_STATES, RunState
from .tail import JsonFile, JsonlTailer
from .timeline import Timeline
from .values import num

__all__ = ["RunView", "shared_view", "VIEWS"]

#: the dashboard's views in the order the page lists them
VIEWS = ("overview", "devices", "cache", "matrix", "timeline", "pipelines", "farm", "scheduling", "results")
#: the JSON Lines streams tailed, by name
STREAMS = {"metrics": "metrics.jsonl", "tiles": "tiles.jsonl", "trace": "trace.jsonl",
           "pipeline": "pipeline.jsonl", "farm": "farm.jsonl"}
#: the files replaced as a whole, by name: (file, read as text)
FILES = {"meta": ("meta.json", False), "status": ("status.json", False), "summary": ("summary.json", False),
         "plan": ("tiles.json", False), "config": ("config.yaml", True)}


@dataclass
class _Stream:
    """One tailed JSONL file, the readers it feeds and a version bumped on every change."""

    tailer: JsonlTailer
    readers: list[Reader] = field(default_factory=list)
    seen_resets: int = 0
    version: int = 0


@dataclass
class _Cache:
    key: Any = None
    value: Any = None


class RunView(RunState):
    """Everything the dashboard shows, derived from one run directory.

    Call :meth:`refresh` (cheap: reads only what was appended), then :meth:`overview` or a view's
    reader (``view.devices``, ``view.cache``, ``view.matrix``, ``view.timeline``,
    ``view.pipelines``, ``view.farm``, ``view.scheduling``, ``view.snapshots``); each returns plain
    dicts / pandas frames and caches its result until its inputs change. Thread-safe: one view can
    be shared by several browser sessions.

    Time axes are seconds since the run started (``meta.started``, else the first metrics
    snapshot's ``t - elapsed``, else the earliest span).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        *,
        eta_window_s: float = 30.0,
        stale_after_s: float = 30.0,
        max_spans: int = 500_000,
        max_snapshots: int = 10_000,
        clock: Callable[[], float] = time.time,
    ):
        self.run_dir = Path(run_dir)
        self.eta_window_s = eta_window_s
        self.stale_after_s = stale_after_s
        self.max_spans = max_spans
        self.max_snapshots = max_snapshots
        self.clock = clock
        self.lock = threading.RLock()
        self.files = {name: JsonFile(self.run_dir / f, text=text) for name, (f, text) in FILES.items()}
        # the plan as columns, not a dict per tile (matrix.read_plan)
        self.files["plan"] = JsonFile(self.run_dir / FILES["plan"][0], parse=read_plan)
        self._caches: dict[Any, _Cache] = {}
        self.last_refresh: float | None = None
        self.refresh_seconds: float = 0.0

        self.snapshots = Snapshots(self)
        self.devices = Devices(self)
        self.cache = CacheTiers(self)
        self.matrix = Matrix(self)
        self.timeline = Timeline(self)
        self.pipelines = Pipelines(self)
        self.farm = Farm(self)
        self.scheduling = Scheduling(self)
        self.readers: tuple[Reader, ...] = (self.snapshots, self.devices, self.cache, self.matrix,
                                            self.timeline, self.pipelines, self.farm, self.scheduling)
        self._streams = {name: _Stream(JsonlTailer(self.run_dir / f), [r for r in self.readers if name in r.streams])
                         for name, f in STREAMS.items()}

    # ---------------------------------------------------------------- reading

    def refresh(self, max_bytes_per_file: int | None = 64 << 20) -> "RunView":
        """Read what was appended since the last call.  Never raises on a malformed directory."""
        with self.lock:
            t0 = time.perf_counter()
            final = self.status.get("state") in TERMINAL_STATES
            for name, stream in self._streams.items():
                recs = stream.tailer.poll(final=final, max_bytes=max_bytes_per_file)
                if stream.tailer.resets != stream.seen_resets:
                    stream.seen_resets = stream.tailer.resets
                    for r in stream.readers:
                        r.clear(name)
                    stream.version += 1
                if recs:
                    for r in stream.readers:
                        r.ingest(name, recs)
                    if name == "metrics":
                        self._thin_snapshots()
                    stream.version += 1
            for r in self.readers:
                r.poll()
            self.last_refresh = self.clock()
            self.refresh_seconds = time.perf_counter() - t0
        return self

    def _thin_snapshots(self) -> None:
        """Keep memory bounded on long runs: every reader of the metrics keeps the same snapshots."""
        while len(self.snapshots.rows) > max(self.max_snapshots, 4):
            keep = self.snapshots.keep_on_thinning()
            for r in self._streams["metrics"].readers:
                r.thin(keep)

    def stream_exists(self, name: str) -> bool:
        return self._streams[name].tailer.exists

    def touch(self, name: str) -> None:
        """Stream ``name``'s data changed by other means than its file (trace.parquet)."""
        self._streams[name].version += 1

    def bad_lines(self) -> int:
        """Complete lines skipped in all streams for not being JSON objects."""
        return sum(s.tailer.bad_lines for s in self._streams.values())

    def versions(self, *names: str) -> tuple:
        """The versions of streams and files: a cache key that changes with any of them."""
        out = []
        for n in names:
            if n in self._streams:
                out.append(self._streams[n].version)
            else:
                f = self.files[n]
                f.get()
                out.append(f.version)
        return tuple(out)

    def cached(self, name: Any, key: Any, build: Callable[[], Any]) -> Any:
        c = self._caches.setdefault(name, _Cache())
        if c.key != key or c.value is None:
            c.value = build()
            c.key = key
        return c.value

    # ---------------------------------------------------------------- the files as read

    def _dict(self, name: str) -> dict:
        v = self.files[name].get()
        return v if isinstance(v, dict) else {}

    @property
    def meta(self) -> dict:
        return self._dict("meta")

    @property
    def status(self) -> dict:
        return self._dict("status")

    @property
    def summary(self) -> dict:
        return self._dict("summary")

    @property
    def config_text(self) -> str | None:
        return self.files["config"].get()

    @property
    def last_metrics(self) -> dict:
        """The last metrics snapshot as written (nested), or {}."""
        return dict(self.snapshots.raw_last or {})

    @property
    def kind(self) -> str | None:
        """What the run is ("allpairs", "pipeline", "farm"): meta.json's, else summary.json's."""
        k = self.meta.get("kind") or self.summary.get("kind")
        return str(k) if k else None

    @property
    def started(self) -> float | None:
        s = num(self.meta.get("started"))
        if s is not None:
            return s
        if self.snapshots.rows:
            m = self.snapshots.rows[0]
            if m.get("elapsed") is not None:
                return m["t"] - m["elapsed"]
            return m["t"]
        return self.timeline.first_t0()

    @locked
    def views(self) -> list[str]:
        """The views that apply to this run, in page order. Until meta.json (or summary.json)
        says what the run is, every view is offered: a run writes its status and plan first, and
        a sidebar that grew view by view as files appeared would drop the view being looked at.
        Then each reader decides from the kind and what it has read (pipeline.jsonl in an
        all-pairs run would bring the pipelines view); overview and results always apply."""
        if self.kind is None:
            return list(VIEWS)
        offered = {r.view for r in self.readers if r.applies(self.kind)} | {"overview", "results"}
        return [v for v in VIEWS if v in offered]


_SHARED: dict[str, RunView] = {}
_SHARED_LOCK = threading.Lock()


def shared_view(run_dir: str | os.PathLike, **kw: Any) -> RunView:
    """The process-wide :class:`RunView` of a run directory (one per resolved path), shared by all
    browser sessions of a dashboard server and pre-filled by dashboard/serve.py at start."""
    key = str(Path(run_dir).expanduser().resolve())
    with _SHARED_LOCK:
        v = _SHARED.get(key)
        if v is None:
            v = _SHARED[key] = RunView(key, **kw)
        return v
