"""long_time_slices: the slice the kernel reports for the thread (``se.slice`` in
/proc/thread-self/sched, which no pairflow code reads) becomes TIME_SLICE_NS for the computing
thread only, and stays as it was with PAIRFLOW_LONG_SLICES=0."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PROBE = textwrap.dedent("""
    import ctypes, os, struct, sys, threading
    from pairflow.engine.run.runtime import long_time_slices
    # the default slice first (sched_runtime 0): a thread inherits its parent's, and the test
    # process may have computed in a thread that asked for long ones
    attr = struct.pack("IIQiIQQQII", 56, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0, 0, 0, 0,
                       0, 0)
    number = {{"x86_64": 314, "aarch64": 274}}[os.uname().machine]
    assert ctypes.CDLL(None).syscall(number, 0, ctypes.create_string_buffer(attr, 56), 0) == 0
    def slice_ns():
        for line in open("/proc/thread-self/sched"):
            if line.startswith("se.slice"):
                return int(line.split(":")[1])
        return -1
    out = {{}}
    def compute():
        out["before"] = slice_ns()
        out["applied"] = long_time_slices()
        out["after"] = slice_ns()
    t = threading.Thread(target=compute)
    t.start(); t.join()
    print(out["before"], out["applied"], out["after"], slice_ns())
""")


def _probe(env: dict) -> list[str]:
    return subprocess.run([sys.executable, "-c", PROBE.format()],
                          capture_output=True, text=True, check=True,
                          env={**os.environ, **env}).stdout.split()


def _kernel_reports_slices() -> bool:
    with open("/proc/thread-self/sched") as fh:
        return any(line.startswith("se.slice") for line in fh)


@pytest.mark.skipif(not _kernel_reports_slices(), reason="a kernel before EEVDF's slices")
def test_the_computing_thread_gets_long_slices_and_no_other():
    from pairflow.engine.run.runtime import TIME_SLICE_NS
    before, applied, after, main_thread = _probe({"PAIRFLOW_LONG_SLICES": "1"})
    assert applied == "True"
    assert int(after) == TIME_SLICE_NS != int(before)
    assert int(main_thread) == int(before)  # a thread's own setting: Ray's threads keep theirs


@pytest.mark.skipif(not _kernel_reports_slices(), reason="a kernel before EEVDF's slices")
def test_turned_off_the_scheduler_is_left_as_it_is():
    before, applied, after, _ = _probe({"PAIRFLOW_LONG_SLICES": "0"})
    assert applied == "False" and after == before
