"""An in-process run loads the items its probe parsed instead of parsing them again (the probe
and the loaders share one process), and its result is the same. No Ray: the run is forced
in-process."""
import collections
import threading

import numpy as np
import zarr

from pairflow.apps.synthetic import SyntheticApp
from pairflow.engine import allpairs


class CountingApp(SyntheticApp):
    """Counts parses per key (one process: the driver's probe and the loader threads)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.parses = collections.Counter()
        self.lock = threading.Lock()

    def __getstate__(self):  # the counter stays shared: copies (the sinks') do not matter here
        return self.__dict__

    def parse(self, key, raw):
        with self.lock:
            self.parses[key] += 1
        return super().parse(key, raw)


def test_probe_items_are_not_parsed_again(tmp_path):
    n = 9
    app = CountingApp(n)
    res = allpairs(app=app, runs_root=str(tmp_path), progress=False, wait=True, num_cpus=2,
                   object_store_mb=256, executor="inprocess")
    assert res.summary["executor"] == "inprocess"
    # every item parsed once: the probe's two (first row, last column) were handed over
    loads = res.summary["tiers"]["source"]["loads"]
    assert loads == n == res.summary["n_items"]  # the host tier holds all: one load each
    assert sorted(app.parses) == app.keys() and set(app.parses.values()) == {1}
    m = zarr.open_group(res.outputs["dense"], mode="r")["value"][...]
    i, j = np.triu_indices(n, 1)
    assert np.array_equal(m[i, j], (i * 7919 + j) % 1000)  # the app's formula, by hand
