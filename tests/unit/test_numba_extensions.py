"""pairflow's kernels compile without loading numba's installed extensions (awkward's imports all
of awkward: a CPU-second of start-up under load), and an awkward array handed to numba afterwards
still works (it registers its extension itself). Fresh processes: numba's state is per process."""
from __future__ import annotations

import subprocess
import sys

COMPILE = ("import numpy as np; from pairflow.kernels.jaccard import intersection_counts; "
           "a = np.arange(0, 40000, 2, dtype=np.uint64); b = np.arange(0, 40000, 3, "
           "dtype=np.uint64); print(int(intersection_counts([a], [b])[0, 0]))")


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_a_kernel_compiles_without_importing_awkward():
    out = _run(COMPILE + "; import sys; print('awkward' in sys.modules)")
    # multiples of 6 below 40,000: 6,667 (0 included)
    assert out == [str(len(range(0, 40000, 6))), "False"]


def test_an_awkward_array_still_goes_through_numba_after_a_kernel():
    code = (COMPILE + "\nimport awkward as ak, numba\n@numba.njit\ndef total(a):\n"
            "    s = 0\n    for row in a:\n        for x in row:\n            s += x\n"
            "    return s\nprint(total(ak.Array([[1, 2], [], [3, 4, 5]])))")
    assert _run(code) == [str(len(range(0, 40000, 6))), str(1 + 2 + 3 + 4 + 5)]
