"""Ctrl-C that always stops a run.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be. While a
run waits, that is mostly inside Ray's C++ waits, which check for signals themselves and hand
the interrupt back as an error status; an interrupt that lands in code which drops it (a
callback, a finalizer, a library's ``except BaseException``) is lost, and the run goes on to
the end as if nobody had pressed Ctrl-C. One handler, ``on_sigint``, records every SIGINT
before it raises, and a waiting loop calls ``raise_if_interrupted`` on each turn: an interrupt
lost on the way is raised again within one turn.

The ``pairflow`` command installs ``on_sigint`` for its whole life (it also tells an interrupt
that the engine turned into its own error from a failure); ``catching_ctrl_c`` installs it
around a run's wait in a Python user's process, unless they installed a handler of their own.
"""
from __future__ import annotations

import contextlib
import signal
import threading

SIGINT_SEEN = threading.Event()


def on_sigint(signum, frame):
    SIGINT_SEEN.set()
    raise KeyboardInterrupt


def raise_if_interrupted() -> None:
    if SIGINT_SEEN.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def catching_ctrl_c():
    """``on_sigint`` while the block runs, where SIGINT still has Python's own handler and
    this is the main thread (only it may set handlers); otherwise the handler stays as it is."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    SIGINT_SEEN.clear()
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
