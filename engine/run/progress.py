"""One progress display for every kind of run: a rich bar on a terminal, a line every few
seconds otherwise (a notebook's or a log's output), counting any unit (tiles, cells, events,
work units) with optional extra figures beside the count.

    bar = Progress(total, unit="tiles", enabled=True, figures={"R": ".2f"})
    bar.update(done, R=1.3)          # as often as convenient: the display rate-limits itself
    bar.update(total, final=True, R=1.2)
    bar.close()
"""
from __future__ import annotations

import sys
import time


class Progress:
    LINE_EVERY_S = 5.0  # without a terminal: a line at most this often, and the final one

    def __init__(self, total: int, unit: str = "tiles", enabled: bool = True,
                 figures: dict[str, str] | None = None):
        self.enabled, self.total, self.unit = enabled, total, unit
        self.figures = dict(figures or {})  # name -> format spec, e.g. {"R": ".2f"}
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
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
        if self.bar is not None:
            self.bar.update(self.task, completed=done, **values)
        elif final or time.time() - self.last_line > self.LINE_EVERY_S:
            self.last_line = time.time()
            extra = "".join(f"  {name}={value:{self.figures[name]}}"
                            for name, value in values.items())
            print(f"[pairflow] {self.unit} {done}/{self.total}{extra}", file=sys.stderr,
                  flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
