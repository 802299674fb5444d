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


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config, items):
    """How ``make test``'s two pytest-xdist workers share the suite (``--dist loadgroup``).

    Every test that runs the engine (tests/integration, tests/dashboard) is in one group, run on
    one worker in the order of a serial run: in a trial that let two such modules run side by
    side on two cores, a cluster's node took longer than Ray's fixed 30 s to register. The unit
    and conformance tests, which start no Ray, run on the other worker meanwhile, a module at a
    time. Without xdist, the order changes, not what runs."""
    def group(item) -> str:
        path = item.nodeid.split("::", 1)[0]
        return "engine" if path.startswith(("tests/integration/", "tests/dashboard/")) else path

    items.sort(key=lambda item: group(item) != "engine")  # stable: the engine's group first
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
