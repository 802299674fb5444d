import importlib
import os
import shutil
from pathlib import Path

import pytest

# Every server a test starts stays on loopback (Ray 2.60 otherwise binds the external address).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

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


def pytest_collection_modifyitems(config, items):
    """How ``make test``'s two pytest-xdist workers share the suite (``--dist loadgroup``).

    Each module is one group, run whole on one worker: its module fixtures (a cluster, a run
    several tests read) are made once. The dashboard's modules are one group: their session
    fixtures (the runs the views show) are made once. Groups start longest-first, as far as
    the marks tell (multi-node or slow modules and the dashboard, then the rest of the
    integration tests, then the unit and conformance tests), so the many short tests fill the
    end instead of one long module running alone; without xdist the order changes, not what
    runs."""
    def group(item) -> str:
        path = item.nodeid.split("::", 1)[0]
        return "tests/dashboard" if path.startswith("tests/dashboard/") else path

    long_groups = {group(i) for i in items
                   if i.get_closest_marker("slow") or i.get_closest_marker("multinode")}
    long_groups.add("tests/dashboard")

    def rank(item) -> int:
        g = group(item)
        return 0 if g in long_groups else 1 if g.startswith("tests/integration/") else 2

    items.sort(key=rank)  # stable: within a rank, the collection's order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group(item)))
