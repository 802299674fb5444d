import importlib
import os
import shutil
import signal
import sys
import tempfile
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


class _OldTopLevelNames:
    """The repository's folders install as ``pairflow.engine``, ``pairflow.apps`` ...; run from
    the checkout, Python would also find them as top-level ``engine``, ``apps`` ... (the working
    directory is on sys.path), and code that imports those names would pass here and fail for a
    user. In the test processes such an import fails, naming the right one."""
    NAMES = ("engine", "apps", "kernels", "operators", "dashboard", "configs")

    def find_spec(self, name, path=None, target=None):
        if name in self.NAMES:
            raise ImportError(f"import pairflow.{name}, not the checkout's folder {name!r} "
                              "(it installs as pairflow.{name})".replace("{name}", name))
        return None


if not any(isinstance(f, _OldTopLevelNames) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldTopLevelNames())


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


ENGINE_TESTS = ("tests/integration/", "tests/dashboard/", "tests/differential/")
ALONE = "multinode"  # the marker of the engine's tests that nothing else of the engine runs beside
# The modules whose every test is marked ALONE (checked at collection): one unit of work, run
# first, while the other worker runs the unit tests, which need no lock.
ALONE_MODULES = tuple(f"tests/integration/{name}.py" for name in (
    "test_readme_tour", "test_cluster", "test_stealing_cluster", "test_l3", "test_l3_lost_node",
    "test_sweep",
    "test_mixed_devices")) + ("tests/differential/test_multinode.py",)


def _scope(nodeid: str) -> str:
    """The unit ``make test``'s pytest-xdist workers share out: a module; or all of
    tests/dashboard (its session fixture makes three engine runs, once per worker that runs
    any of it); or all of ALONE_MODULES."""
    path = nodeid.split("::", 1)[0]
    if path in ALONE_MODULES:
        return "alone"
    return "tests/dashboard" if path.startswith("tests/dashboard/") else path


def _order(nodeid: str) -> int:
    """The order the units are handed out in: ALONE_MODULES, the tests that start no Ray,
    then the rest of the engine's."""
    path = nodeid.split("::", 1)[0]
    return 0 if path in ALONE_MODULES else 2 if path.startswith(ENGINE_TESTS) else 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """How ``make test``'s two pytest-xdist workers share the suite: a unit at a time
    (``_scope``), in ``_order`` (the collection's, which ``pytest_collection_modifyitems``
    sorts), so that module and session fixtures (clusters, shared runs) are made once per
    worker; ``pytest_runtest_protocol`` keeps the engine's tests that start clusters alone."""
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return ByScope(config, log)


def _alone(item) -> bool:
    return item is not None and item.get_closest_marker(ALONE) is not None


def pytest_collection_modifyitems(config, items):
    """Items in ``_order`` (stable: each part in the collection's order). Every test of
    ALONE_MODULES must be marked ALONE, and a module of tests/integration whose every test is
    must be listed (tests/dashboard is one unit of its own)."""
    items.sort(key=lambda item: _order(item.nodeid))
    alone = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        alone[path] = alone.get(path, True) and _alone(item)
    for path, every in alone.items():
        if path in ALONE_MODULES and not every:
            raise pytest.UsageError(f"{path} is in ALONE_MODULES (tests/conftest.py), but not "
                                    f"every test of it is marked {ALONE!r}")
        if every and path.startswith("tests/integration/") and path not in ALONE_MODULES:
            raise pytest.UsageError(f"{path}: every test is marked {ALONE!r}; list it in "
                                    f"ALONE_MODULES (tests/conftest.py)")


class EngineLock:
    """A readers-writer lock the workers of one pytest-xdist run share (``flock`` on two files).

    Two engine tests may run side by side (readers); a test marked ``multinode`` (a cluster of
    its own, or several Rays at once) runs with no other engine test beside it (the writer).
    Why: on two cores, a cluster's node starting beside another cluster's took longer than
    Ray's fixed 30 s to register with its head (``ray/_private/node.py``), and the test failed.
    The writer waits holding the turnstile, so readers cannot starve it."""

    def __init__(self, prefix: str):
        self._turnstile = open(prefix + ".turnstile", "a")
        self._lock = open(prefix + ".lock", "a")
        self.kept = False  # held, alone, over to the next test (which runs alone too)

    def acquire(self, alone: bool) -> None:
        import fcntl
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def release(self) -> None:
        import fcntl
        fcntl.flock(self._lock, fcntl.LOCK_UN)


def _engine_lock(config) -> EngineLock | None:
    """This worker's handle on the run's lock; None outside pytest-xdist (one test at a time)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    lock = getattr(config, "_pairflow_engine_lock", None)
    if lock is None:
        # beside the workers' own temporary directories, in the run's, which pytest rotates
        basetemp = getattr(config.option, "basetemp", None)
        shared = (Path(basetemp).parent if basetemp else
                  Path(tempfile.gettempdir()) / workerinput["testrunuid"])
        shared.mkdir(parents=True, exist_ok=True)
        lock = config._pairflow_engine_lock = EngineLock(str(shared / "engine-tests"))
    return lock


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """An engine test's setup, call and teardown under the run's ``EngineLock``. A test that
    runs alone keeps the lock while the next test runs alone too, so that a module's cluster
    (started in its first test's setup, stopped in its last one's teardown) never has another
    engine test beside it."""
    lock = _engine_lock(item.config) if item.nodeid.startswith(ENGINE_TESTS) else None
    if lock is None:
        return (yield)
    alone = _alone(item)
    if not lock.kept:
        lock.acquire(alone)
    lock.kept = False
    try:
        return (yield)
    finally:
        if alone and _alone(nextitem):
            lock.kept = True
        else:
            lock.release()
