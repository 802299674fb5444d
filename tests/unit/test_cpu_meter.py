"""The benchmarks' CPU meter (benchmarks/cpu_meter.py) against the kernel's own count of this
process's CPU (``time.process_time``): a window read at once after the work, as every benchmark
reads a run's, holds all of the work's CPU, not only what the last sample had seen."""
from __future__ import annotations

import threading
import time

from tests.benchmark_modules import load_benchmark


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        pass


def _after_next_sample(meter, delay: float) -> tuple[float, float]:
    """(wall time, process CPU) ``delay`` s after the meter's next sample."""
    seen = len(meter.samples)
    while len(meter.samples) == seen:
        time.sleep(0.005)
    time.sleep(delay)
    return time.time(), time.process_time()


def test_a_window_read_at_once_holds_its_last_part():
    """A thread keeps this process busy across the whole window and past it, so the CPU
    interpolated between samples at either end is exact; the window ends half an interval
    after a sample, the part that was cut off before the meter waited for the next one."""
    interval = 0.4
    meter = load_benchmark("cpu_meter").CpuMeter(interval=interval)
    stop = threading.Event()
    burner = threading.Thread(target=_spin, args=(stop,))
    burner.start()
    try:
        t0, c0 = _after_next_sample(meter, interval / 2)
        _after_next_sample(meter, 0)
        _after_next_sample(meter, 0)
        t1, c1 = _after_next_sample(meter, interval / 2)
        driver = meter.roles_between(t0, t1).get("driver", 0.0)
    finally:
        stop.set()
        burner.join()
        meter.close()
    # within 0.05 s (the kernel counts in 10 ms ticks) of the kernel's count, where cutting
    # the last part off missed about half an interval (0.2 s)
    assert abs(driver - (c1 - c0)) < 0.05, (driver, c1 - c0)
