"""The benchmarks' CPU meter (benchmarks/cpu_meter.py) on a controlled clock and CPU count: a
window read at once after the work, as every benchmark reads a run's, holds all of the work's
CPU, not only what the last sample had seen; and between samples the count is interpolated.

The meter reads its wall clock and this process's CPU seconds through ``clock`` and
``read_stat``; here both are counters: each sample is ``STEP`` s after the one before, and this
process has spent one CPU second per second (one core busy), so the CPU of any window is its
length, exactly."""
from __future__ import annotations

import os
import threading

import pytest

from tests.benchmark_modules import load_benchmark

STEP = 0.4  # seconds between samples, on the meter's (controlled) clock


class _BusyProcess:
    """This process, one core busy since time 0, as the meter reads it: ``stat`` runs just
    before ``clock`` in each sample, so the CPU it reports is that of the sample's time."""

    def __init__(self):
        self.t = 0.0
        self.lock = threading.Lock()

    def clock(self) -> float:
        with self.lock:
            t, self.t = self.t, self.t + STEP
        return t

    def stat(self, pids=None) -> dict:
        with self.lock:
            return {os.getpid(): (1, self.t, "python -m pytest")}


def _meter(process, interval):
    return load_benchmark("cpu_meter").CpuMeter(
        interval=interval, clock=process.clock, read_stat=process.stat,
        read_machine=lambda: {"idle": 0.0, "stolen by the VM host": 0.0})


def test_a_window_read_at_once_holds_its_last_part():
    """The window ends half a step past the last sample taken: the meter waits for the next
    sample and interpolates, so the window's CPU is its length (cutting the last part off,
    as the meter once did, would miss STEP / 2 = 0.2 s)."""
    process = _BusyProcess()
    meter = _meter(process, interval=0.2)  # real seconds between the thread's samples
    try:
        while len(meter.samples) < 4:  # read just after a sample: the next is a while off
            threading.Event().wait(0.005)
        t0 = meter.samples[1][0] + STEP / 2
        t1 = meter.samples[-1][0] + STEP / 2  # past every sample taken so far
        driver = meter.roles_between(t0, t1)["driver"]
        assert meter.samples[-1][0] >= t1  # it waited for a sample past the window
    finally:
        meter.close()
    assert driver == pytest.approx(t1 - t0, rel=1e-12)


def test_between_samples_the_count_is_interpolated():
    """Samples at 0, 0.4, 0.8 (one per call here: no sampling thread runs between them):
    the CPU at 0.1 is a quarter of the way to the second sample's 0.4, at 0.7 three quarters
    of the way from 0.4 to 0.8; before the first sample the first, after the last the last."""
    process = _BusyProcess()
    meter = _meter(process, interval=3600)  # the thread waits an hour: no sample of its own
    try:
        meter.sample()
        meter.sample()
        assert [s[0] for s in meter.samples] == [0.0, 0.4, 0.8]
        assert meter.at(0.1) == pytest.approx(0.1, rel=1e-12)
        assert meter.at(0.7) == pytest.approx(0.7, rel=1e-12)
        assert (meter.at(-1.0), meter.at(0.8)) == (0.0, pytest.approx(0.8, rel=1e-12))
    finally:
        meter.stop_event.set()
        meter.thread.join()
