"""The modules an app's step after the run needs (``BasePairApp.imports_after``) are imported
while its tiles compute, by the driver (engine/pairs/driver.py), and an app of the protocol alone
(no such method) needs none. No Ray: the run is forced in-process."""
import sys
import time

from pairflow.apps.synthetic import SyntheticApp
from pairflow.engine import allpairs
from pairflow.engine.pairs.app import imports_after

MODULE = "mailbox"  # a standard module nothing of the run imports itself


class AfterApp(SyntheticApp):
    def imports_after(self):
        return (MODULE,)


def test_imports_after_are_imported_during_the_run(tmp_path):
    sys.modules.pop(MODULE, None)
    res = allpairs(app=AfterApp(9), runs_root=str(tmp_path), progress=False, wait=True,
                   num_cpus=2, object_store_mb=256, executor="inprocess")
    assert res.summary["executor"] == "inprocess"
    deadline = time.time() + 10  # (a daemon thread: it may finish just after a tiny run)
    while MODULE not in sys.modules and time.time() < deadline:
        time.sleep(0.01)
    assert MODULE in sys.modules


def test_an_app_without_the_method_needs_nothing():
    class Bare:
        pass
    assert imports_after(Bare()) == ()
    assert imports_after(AfterApp(3)) == (MODULE,)
