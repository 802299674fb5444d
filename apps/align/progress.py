"""The align app's progress display: a bar in cells and cells/s (a line every 5 s when stderr is
not a terminal), read from the run directory like any other watcher of a run.

Why its own: Smith-Waterman's work is cells, not pairs or tiles; the engine's bar counts tiles,
which differ by orders of magnitude in cells, so this display replaces it (the ``watch`` hook).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING

from pairflow.engine import PairWeights, read_json

if TYPE_CHECKING:
    from .app import AlignApp


class _Watch:
    """A progress bar in cells and cells/s, read from the run directory (tiles.json for the
    planned tiles, tiles.jsonl for the finished ones), like any other watcher of a run."""

    def __init__(self, run_dir: str, app: AlignApp, interval: float = 0.5):
        self.run_dir, self.interval = run_dir, interval
        self.stop_event = threading.Event()
        space = app.space()
        w = PairWeights([app.lengths[k] for k in app.row_keys()],
                        [app.lengths[k] for k in app.col_keys()])
        tiles = read_json(os.path.join(run_dir, "tiles.json"), []) or []
        self.cells = {t["id"]: space.weight(t["r0"], t["r1"], t["c0"], t["c1"], w) for t in tiles}
        self.total = sum(self.cells.values()) or float(app.cells())
        self.n_tiles = len(tiles)
        self.done: set = set()
        self.done_cells = 0.0
        self.offset = 0
        self.t0 = time.time()
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.bar = None
        if self.tty:
            from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Progress(TextColumn("[bold]align"), BarColumn(),
                                TextColumn("{task.fields[cells]} cells"),
                                TextColumn("{task.fields[rate]}"),
                                TextColumn("tiles {task.fields[tiles]}"),
                                TimeElapsedColumn(), TimeRemainingColumn(), transient=False)
            self.task = self.bar.add_task("align", total=self.total, cells="0", rate="",
                                          tiles=f"0/{self.n_tiles}")
            self.bar.start()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        import json
        path = os.path.join(self.run_dir, "tiles.jsonl")
        try:
            with open(path) as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind("\n") + 1  # a partial last line waits for the next read
        for line in data[:end].splitlines():
            try:
                t = json.loads(line)["id"]
            except (ValueError, KeyError):
                continue
            if t not in self.done:
                self.done.add(t)
                self.done_cells += self.cells.get(t, 0.0)
        self.offset += len(data[:end].encode())

    def _show(self, final: bool = False) -> None:
        elapsed = max(1e-9, time.time() - self.t0)
        rate = self.done_cells / elapsed
        text = f"{_si(self.done_cells)}/{_si(self.total)}"
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done_cells, cells=text,
                            rate=f"{_si(rate)}cells/s", tiles=f"{len(self.done)}/{self.n_tiles}")
        elif final or time.time() - self.last_line > 5:
            self.last_line = time.time()
            pct = 100.0 * self.done_cells / self.total if self.total else 100.0
            print(f"[pairflow align] {pct:5.1f}%  cells {text}  {_si(rate)}cells/s  "
                  f"tiles {len(self.done)}/{self.n_tiles}", file=sys.stderr, flush=True)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            self._read()
            self._show()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self._read()
        self._show(final=True)
        if self.bar is not None:
            self.bar.stop()


def _si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f} "


def watch(run_dir: str, app: AlignApp):
    """Start the cells/s progress display for a run under way; returns its ``stop``."""
    return _Watch(run_dir, app).stop
