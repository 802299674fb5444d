"""Every process that parses or compares has run ``app.warmup`` first (loaders during the
pre-flight, the probe task, each device actor before its first tile), and batched loading
returns the same matrix as one task per item."""
import os
import sys
import time

import numpy as np
import pytest
import ray.cloudpickle

from pairflow.apps.synthetic import SyntheticApp

# workers cannot import this test module: ship its classes by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class WarmLoggingApp(SyntheticApp):
    """Appends "<what>" lines to a file per process, in order."""

    def __init__(self, n, log_dir):
        super().__init__(n)
        self.log_dir = log_dir

    def _log(self, what):
        with open(os.path.join(self.log_dir, f"{os.getpid()}.log"), "a") as fh:
            fh.write(f"{what} {time.time()}\n")

    def warmup(self, device):
        self._log(f"warm:{device}")

    def parse(self, key, raw):
        self._log("parse")
        return super().parse(key, raw)

    def compare(self, left, right, mask, device):
        self._log("compare")
        return super().compare(left, right, mask, device)


@pytest.mark.parametrize("load_batch", [1, 7])
def test_every_working_process_warmed_up_first(ray_local, tmp_path, load_batch):
    from pairflow.engine import allpairs
    logs = tmp_path / "logs"
    logs.mkdir()
    n = 24
    # warm-up is once per process and app class, and worker processes outlive a run: a class
    # of its own per test, so no process is already warm for it
    cls = type(f"WarmLoggingApp{load_batch}", (WarmLoggingApp,), {})
    res = allpairs(app=cls(n, str(logs)), sink="dense", runs_root=str(tmp_path),
                   progress=False, wait=True, leaf_items=4, load_batch=load_batch)
    m = res.matrix()
    iu = np.triu_indices(n, 1)
    assert np.array_equal(m[iu], (iu[0] * 7919 + iu[1]) % 1000)  # the app's own formula
    workers = 0
    for f in logs.iterdir():
        lines = [ln.split()[0] for ln in f.read_text().splitlines()]
        work = [i for i, w in enumerate(lines) if w in ("parse", "compare")]
        if not work:
            continue
        workers += 1
        warm = [i for i, w in enumerate(lines) if w.startswith("warm:")]
        assert warm and warm[0] < work[0], f"{f.name}: {lines[:5]}"
        if any(lines[i] == "compare" for i in work):  # a device actor (or the probe)
            assert any(lines[i] == "warm:cpu" for i in warm), f"{f.name}: {lines[:5]}"
    assert workers >= 2  # loaders and device actors both did work
    loads = res.summary["loads"]
    assert loads == n  # batched or not, one load per item (the host tier holds them all)
