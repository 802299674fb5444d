"""The progress display without a terminal: a line per few seconds and a final one, counting
the unit it was given, with its extra figures formatted as asked."""
import time

from engine.run.progress import Progress


def test_lines_without_a_terminal(capsys, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    bar = Progress(40, unit="cells", enabled=True, figures={"R": ".2f"})
    bar.tty, bar.bar = False, None  # as under pytest's captured stderr
    bar.update(3, R=1.234)
    clock[0] += 1
    bar.update(5, R=1.3)  # too soon after the last line: nothing
    clock[0] += Progress.LINE_EVERY_S + 1
    bar.update(9)
    bar.update(12, final=True, R=2.0)
    bar.close()
    assert capsys.readouterr().err.splitlines() == [
        "[pairflow] cells 3/40  R=1.23",
        "[pairflow] cells 9/40  R=0.00",
        "[pairflow] cells 40/40  R=2.00",
    ]


def test_disabled_shows_nothing(capsys):
    bar = Progress(5, enabled=False)
    bar.update(5, final=True)
    bar.close()
    assert capsys.readouterr().err == ""
