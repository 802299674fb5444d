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
