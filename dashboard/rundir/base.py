"""What every per-view reader of a run directory shares: its place in the run view, the run view's
lock and its cache of derived frames.

A reader (devices, cache, matrix, timeline, pipelines, farm, scheduling) holds the data of one
dashboard view: the rows it takes from the JSON Lines streams it names, and the frames it derives
from them. The run view (:mod:`.core`) owns the files, tails each stream once and hands each batch
of new records to every reader that named the stream, so a file is read once however many views
use it. Browser sessions share one run view, so every public reader method holds the run view's
lock (:func:`locked`) while it reads rows that a refresh may be appending to.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["Reader", "locked"]


def locked(fn: Callable) -> Callable:
    """Run ``fn`` holding ``self.lock`` (the run view's re-entrant lock)."""
    @functools.wraps(fn)
    def wrapper(self, *a, **kw):
        with self.lock:
            return fn(self, *a, **kw)
    return wrapper


class Reader:
    """The data of one dashboard view, fed by the run view.

    Subclasses set :attr:`view` (the view's name in dashboard/app.py) and :attr:`streams` (the
    core's stream names they take records from), and override :meth:`ingest`, :meth:`clear` and
    :meth:`thin` for those streams, and :meth:`applies`.
    """

    view: str = ""
    streams: tuple[str, ...] = ()

    def __init__(self, run):
        self.run = run  # the RunView (core.py) this reader is part of

    @property
    def lock(self):
        return self.run.lock

    def ingest(self, stream: str, recs: list[dict]) -> None:
        """New complete records of ``stream`` (in file order)."""

    def clear(self, stream: str) -> None:
        """``stream``'s file was truncated, replaced or removed: forget what came from it."""

    def thin(self, keep: set[float]) -> None:
        """Keep only the metrics snapshots taken at the times in ``keep`` (memory bound)."""

    def poll(self) -> None:
        """Called at the end of every refresh, for what is not a tailed stream."""

    def applies(self, kind: str | None) -> bool:
        """Whether the view makes sense for this run: ``kind`` is meta.json's (None before it
        exists); a reader may also look at what it has read."""
        return False

    def cached(self, name: Any, inputs: tuple[str, ...], build: Callable[[], Any]) -> Any:
        """``build()``, kept until one of ``inputs`` (stream or file names) changes."""
        return self.run.cached((self.view, name), self.run.versions(*inputs), build)


class RowsReader(Reader):
    """A view fed by one stream whose records it keeps as they are (farm.jsonl, pipeline.jsonl),
    offered for its run ``kind`` or once a record of its stream has been read."""

    kind: str = ""

    def __init__(self, run):
        super().__init__(run)
        self.rows: list[dict] = []

    def ingest(self, stream: str, recs: list[dict]) -> None:
        self.rows.extend(recs)

    def clear(self, stream: str) -> None:
        self.rows.clear()

    def applies(self, kind: str | None) -> bool:
        return kind == self.kind or bool(self.rows)
