"""Ctrl-C while the driver waits on Ray: never lost.

Why: Ray's core worker polls for signals while ``ray.wait``/``ray.get`` block (its
``check_signals`` calls ``PyErr_CheckSignals``); the KeyboardInterrupt that raises is turned into
an "interrupted" status, which some of its calls drop. The signal is then consumed and the run
goes on as if Ctrl-C was never pressed (seen: a Python user's Ctrl-C ignored until the run
finished). ``noticed_interrupts`` records every SIGINT in an event as well, so the driver's wait
loop can raise KeyboardInterrupt itself after each call into Ray.

A handler is installed only in the main thread and only over Python's default one: a user's
own SIGINT handler is left alone.
"""
from __future__ import annotations

import contextlib
import signal
import threading


class Interrupts:
    """The SIGINTs seen while installed; ``check`` raises KeyboardInterrupt after one."""

    def __init__(self):
        self.seen = threading.Event()

    def _handler(self, signum, frame):
        self.seen.set()
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.seen.is_set():
            raise KeyboardInterrupt


@contextlib.contextmanager
def noticed_interrupts():
    interrupts = Interrupts()
    installed = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if installed:
        signal.signal(signal.SIGINT, interrupts._handler)
    try:
        yield interrupts
    finally:
        if installed:
            signal.signal(signal.SIGINT, signal.default_int_handler)
