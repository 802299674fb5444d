"""One progress display for every kind of run: a rich bar on a terminal, a line every few
seconds otherwise (a notebook's or a log's output), counting any unit (tiles, cells, events,
work units) with optional extra figures beside the count.

    bar = Progress(total, unit="tiles", enabled=True, figures={"R": ".2f"})
    bar.update(done, R=1.3)          # as often as convenient: the display rate-limits itself
    bar.update(total, final=True, R=1.2)
    bar.note("course", "course change: ...")   # once per key
    bar.close()

Both forms show the time left: rich's column on a terminal, ``ETA`` on the line otherwise (from
the rate since the first update that saw progress, so start-up does not count as slow work).
"""
from __future__ import annotations

import sys
import time


def format_eta(s: float | None) -> str:
    """Seconds left as a person reads them: ``?``, ``45 s``, ``3 min 05 s``, ``2 h 10 min``."""
    if s is None:
        return "?"
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class Progress:
    LINE_EVERY_S = 5.0  # without a terminal: a line at most this often, and the final one

    def __init__(self, total: int, unit: str = "tiles", enabled: bool = True,
                 figures: dict[str, str] | None = None, clock=None):
        self.enabled, self.total, self.unit = enabled, total, unit
        self.clock = clock or (lambda: time.time())
        self._since: tuple[float, int] | None = None  # (time, done) of the first update
        self.figures = dict(figures or {})  # name -> format spec, e.g. {"R": ".2f"}
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.noted: set = set()  # the keys of the notes shown (``note``)
        self.bar = None
        if enabled and self.tty:
            from rich.progress import (BarColumn, MofNCompleteColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            from rich.progress import Progress as RichProgress
            extra = [TextColumn(f"{name}={{task.fields[{name}]:{spec}}}")
                     for name, spec in self.figures.items()]
            self.bar = RichProgress(TextColumn(f"[bold]{unit}"), BarColumn(),
                                    MofNCompleteColumn(), TimeElapsedColumn(),
                                    TimeRemainingColumn(), *extra, transient=False)
            self.task = self.bar.add_task(unit, total=total,
                                          **{name: 0.0 for name in self.figures})
            self.bar.start()

    def update(self, done: int, final: bool = False, **figures) -> None:
        if not self.enabled:
            return
        if final:
            done = self.total
        values = {name: figures.get(name, 0.0) for name in self.figures}
        now = self.clock()
        if self._since is None:
            self._since = (now, done)
        if self.bar is not None:
            self.bar.update(self.task, completed=done, **values)
        elif final or now - self.last_line > self.LINE_EVERY_S:
            self.last_line = now
            extra = "".join(f"  {name}={value:{self.figures[name]}}"
                            for name, value in values.items())
            if not final:
                extra += f"  ETA {format_eta(self.eta(done, now))}"
            print(f"[pairflow] {self.unit} {done}/{self.total}{extra}", file=sys.stderr,
                  flush=True)

    def note(self, key: str, text: str) -> bool:
        """A line that says what changed under way (a course change), once per ``key``,
        beside the count: above the bar on a terminal, a line of its own otherwise."""
        if not self.enabled or key in self.noted:
            return False
        self.noted.add(key)
        if self.bar is not None:
            self.bar.console.print(f"[pairflow] {text}")
        else:
            print(f"[pairflow] {text}", file=sys.stderr, flush=True)
        return True

    def eta(self, done: int, now: float | None = None) -> float | None:
        """Seconds left at the rate since the first update; None before any progress."""
        if self._since is None:
            return None
        t0, done0 = self._since
        now = self.clock() if now is None else now
        if done <= done0 or now <= t0:
            return None
        return (now - t0) / (done - done0) * max(0, self.total - done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
