import importlib
import os
import shutil
import signal
from pathlib import Path

import pytest

# Every server a test starts stays on loopback (Ray 2.60 otherwise binds the external address).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

# A suite started in the background (`nohup ... &`, a CI runner's job) inherits SIGINT ignored,
# and so would every process a test starts: the Ctrl-C tests would signal processes that never
# hear it. A user's Ctrl-C reaches a process in a terminal, where Python raises
# KeyboardInterrupt; so it is here (each pytest-xdist worker imports this file too).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SETUP = "run scripts/setup.sh (make setup), which installs it"


def need(path) -> Path:
    """A data file the suite needs. Missing, the test fails rather than skips: a suite that
    skips what it cannot find passes on a checkout that tests nothing."""
    path = Path(path)
    if not path.exists():
        pytest.fail(f"real data not found: {path}; {SETUP}", pytrace=False)
    return path


def need_module(name: str):
    """A Python package the suite needs, imported; missing, the test (or module) fails."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        pytest.fail(f"cannot import {name} ({err}); {SETUP}", pytrace=False)


def need_program(path_or_name: str) -> str:
    """An executable the suite needs (by path or on PATH); missing, the test fails."""
    found = shutil.which(path_or_name) or (path_or_name if Path(path_or_name).exists() else None)
    if not found:
        pytest.fail(f"program not found: {path_or_name}; {SETUP}", pytrace=False)
    return found


ENGINE_TESTS = ("tests/integration/", "tests/dashboard/")


def _scope(nodeid: str) -> str:
    """The unit ``make test``'s pytest-xdist workers share out: every test that runs the engine
    is one, each other module is one."""
    path = nodeid.split("::", 1)[0]
    return "engine" if path.startswith(ENGINE_TESTS) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """How ``make test``'s two pytest-xdist workers share the suite.

    The engine's tests (tests/integration, tests/dashboard) run on one worker, one after
    another in a serial run's order, so their module and session fixtures (clusters, shared
    runs) are made once: in a trial that let them run side by side on two cores, a cluster's
    node took longer than Ray's fixed 30 s to register. The unit and conformance tests, which
    start no Ray, run on the other worker meanwhile, a module at a time."""
    from xdist.scheduler import LoadScopeScheduling

    class EngineTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return EngineTestsTogether(config, log)


def pytest_collection_modifyitems(config, items):
    """The engine's tests first (stable: each part in the collection's order), so that they
    start at once on their worker and the short tests fill the other."""
    items.sort(key=lambda item: _scope(item.nodeid) != "engine")
