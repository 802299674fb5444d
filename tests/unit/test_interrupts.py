"""A Ctrl-C inside ``noticed_interrupts`` is remembered even when something swallows its
KeyboardInterrupt (as Ray's signal polling can), and a user's own SIGINT handler is kept."""
import signal

import pytest

from engine.run.interrupts import noticed_interrupts


def test_a_swallowed_ctrl_c_is_raised_again_by_check():
    with noticed_interrupts() as interrupts:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # what a library polling for signals may do
        assert interrupts.seen.is_set()
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_ctrl_c_no_raise():
    with noticed_interrupts() as interrupts:
        interrupts.check()
    assert not interrupts.seen.is_set()


def test_a_users_own_handler_is_left_alone():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda s, f: calls.append(s))
    try:
        with noticed_interrupts() as interrupts:
            assert signal.getsignal(signal.SIGINT) is not interrupts._handler
            signal.raise_signal(signal.SIGINT)
        assert calls == [signal.SIGINT] and not interrupts.seen.is_set()
    finally:
        signal.signal(signal.SIGINT, previous)
