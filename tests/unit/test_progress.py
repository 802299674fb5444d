"""The progress display without a terminal: a line per few seconds and a final one, counting
the unit it was given, with its extra figures formatted as asked and the time left."""
from pairflow.engine.run.progress import Progress, format_eta


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def test_lines_without_a_terminal(capsys):
    clock = Clock()
    bar = Progress(40, unit="cells", enabled=True, figures={"R": ".2f"}, clock=clock)
    bar.tty, bar.bar = False, None  # as under pytest's captured stderr
    bar.update(3, R=1.234)      # the first update: no rate yet
    clock.t += 1
    bar.update(5, R=1.3)        # too soon after the last line: nothing
    clock.t += Progress.LINE_EVERY_S + 1
    bar.update(9)               # 6 cells in 7 s since the first update: 31 left take 36.2 s
    clock.t += 2
    bar.update(15, R=1.5)       # too soon again
    clock.t += 100
    bar.update(30, R=1.7)       # 27 cells in 109 s: 10 left take 40.4 s
    clock.t += 600
    bar.update(31, R=1.8)       # 28 in 709 s: 9 left take 227.9 s
    bar.update(12, final=True, R=2.0)
    bar.close()
    assert capsys.readouterr().err.splitlines() == [
        "[pairflow] cells 3/40  R=1.23  ETA ?",
        "[pairflow] cells 9/40  R=0.00  ETA 36 s",
        "[pairflow] cells 30/40  R=1.70  ETA 40 s",
        "[pairflow] cells 31/40  R=1.80  ETA 3 min 48 s",
        "[pairflow] cells 40/40  R=2.00",
    ]


def test_eta_from_the_rate_since_the_first_update():
    clock = Clock()
    bar = Progress(100, enabled=False, clock=clock)
    assert bar.eta(0) is None
    bar.enabled = True
    bar.tty, bar.bar = False, None
    bar.update(10)
    assert bar.eta(10) is None            # no progress seen yet
    clock.t += 20
    assert bar.eta(30) == 20 / 20 * 70    # 20 items in 20 s, 70 left
    assert bar.eta(100) == 0.0


def test_format_eta_by_hand():
    assert [format_eta(s) for s in (None, 0, 44.6, 60, 185, 3599, 7800)] == \
        ["?", "0 s", "45 s", "1 min 00 s", "3 min 05 s", "59 min 59 s", "2 h 10 min"]


def test_disabled_shows_nothing(capsys):
    bar = Progress(5, enabled=False)
    bar.update(5, final=True)
    bar.close()
    assert capsys.readouterr().err == ""


def test_a_note_is_said_once_between_the_lines(capsys):
    """A course change (issue 57) is said on the progress line when it happens, once."""
    bar = Progress(10, enabled=True)
    bar.tty, bar.bar = False, None
    assert bar.note("course", "course change at 40% of the tiles")
    assert not bar.note("course", "course change at 40% of the tiles")
    assert capsys.readouterr().err == "[pairflow] course change at 40% of the tiles\n"
    off = Progress(10, enabled=False)
    assert not off.note("course", "x") and capsys.readouterr().err == ""
