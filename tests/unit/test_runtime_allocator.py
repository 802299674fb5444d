"""keep_freed_memory: glibc's thresholds really change, seen through mallinfo2 (no pairflow code
reads them back): after a kernel's temporaries are freed, their memory stays with the process (with glibc's
defaults it goes back to the system, and the next call faults it in again)."""
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")

PROBE = textwrap.dedent("""
    import ctypes, sys
    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    if {tune}:
        from pairflow.engine.run.runtime import keep_freed_memory
        assert keep_freed_memory()
    import numpy as np
    for _ in range(4):  # a kernel's loop: three 2 MB temporaries at a time, then freed
        a, b, c = np.ones(1 << 18), np.ones(1 << 18), np.ones(1 << 18)
        del a, b, c
    if {large}:  # a parse's: 160 MB of temporaries, each under the mmap threshold, then freed
        parts = [np.ones(20 << 17) for _ in range(8)]
        del parts
    info = libc.mallinfo2()
    print(info.hblkhd, info.fordblks)
""")


def _probe(tune: bool, large: bool = False) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(tune=tune, large=large)],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def test_freed_arrays_stay_in_the_heap_only_when_tuned():
    mmapped, free_in_heap = _probe(tune=True)
    assert free_in_heap >= 6 << 20  # the last three arrays' memory is kept for the next ones
    _, free_plain = _probe(tune=False)
    assert free_plain < 6 << 20     # glibc's defaults gave it back to the system


def test_a_parse_s_160_mb_of_temporaries_stay_in_the_heap_when_tuned():
    """Phylogeny's k = 7 parse frees ~130-250 MB: below the trim threshold, the next parse
    reuses that memory instead of faulting it in again (glibc's defaults, and a 128 MB
    threshold, gave it back)."""
    _, free_in_heap = _probe(tune=True, large=True)
    assert free_in_heap >= 150 << 20
    _, free_plain = _probe(tune=False, large=True)
    assert free_plain < 150 << 20
