"""Starting or joining Ray, sized for the machine, on loopback unless told otherwise; Ray's own
messages go to the run's log, not the user's console. And what a process or thread that
computes asks of the system: an allocator that keeps freed memory (and no huge pages where
they cost host faults), long time slices."""
from __future__ import annotations

import logging
import os
import sys
import threading

DEFAULT_OBJECT_STORE_MB = 1536


class _RunLog:
    """Where Ray's chatter goes: the log file of the run this process runs now.

    Ray's driver-side messages (the token-authentication notice at start-up, its warnings) and
    every worker's stdout and stderr are the user's business only when something goes wrong,
    and then the run's own error says what; they are kept in the run directory for a closer
    look. Ray errors still reach the console as well."""

    FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    WORKERS = "pairflow_run_log"  # our handler's name in Ray's worker-output dispatcher

    def __init__(self):
        self.path: str | None = None
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        with self.lock:
            if self.path is None:
                return
            try:
                with open(self.path, "a") as fh:
                    fh.write(text)
            except OSError:  # the run directory was removed: nothing to keep it in
                pass

    def worker_lines(self, data: dict) -> None:
        """One batch of a worker's output, as Ray's dispatcher hands it over."""
        lines = data.get("lines") or []
        if data.get("pid") == "autoscaler":  # its periodic status, unless an event: as Ray does
            try:
                from ray._private.worker import filter_autoscaler_events
                lines = list(filter_autoscaler_events(lines))
            except ImportError:
                lines = []
        who = data.get("actor_name") or data.get("task_name") or "worker"
        prefix = f"({who} pid={data.get('pid')}{' stderr' if data.get('is_err') else ''}) "
        self.write("".join(prefix + line + "\n" for line in lines))


_RUN_LOG = _RunLog()


class _RunLogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        try:
            _RUN_LOG.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def route_ray_logs(path: str | None) -> None:
    """From now on, Ray's messages below ERROR and the workers' output go to ``path`` (the run
    directory's log) instead of the console; ``None`` leaves Ray's console output alone."""
    if path is None:
        return
    _RUN_LOG.path = path
    logger = logging.getLogger("ray")
    if not any(isinstance(h, _RunLogHandler) for h in logger.handlers):
        for h in logger.handlers:  # Ray's console handler: errors only
            h.setLevel(max(h.level, logging.ERROR))
        handler = _RunLogHandler()
        handler.setFormatter(logging.Formatter(_RunLog.FORMAT))
        logger.addHandler(handler)
    ray = sys.modules.get("ray")  # never imported here: the in-process path runs without Ray
    if ray is not None and ray.is_initialized():
        _route_worker_output()


def _route_worker_output() -> None:
    """The workers' stdout and stderr, which Ray prints on the driver's console, into the run's
    log (Ray 2.60's dispatcher of worker output; a Ray without it keeps printing)."""
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return
    dispatcher.remove_handler("ray_print_logs")
    if not any(name == _RunLog.WORKERS for name, _ in dispatcher.handlers):
        dispatcher.add_handler(_RunLog.WORKERS, _RUN_LOG.worker_lines)


def init_ray(address: str | None = None, num_cpus: int | None = None,
             object_store_mb: int | None = None, quiet: bool = True,
             log_path: str | None = None) -> bool:
    """Start an in-process local Ray (or join ``address``); returns True if this call started it.

    A local Ray binds 127.0.0.1 only: Ray 2.60 otherwise binds the machine's external address.
    ``log_path``: the run's log, where Ray's own messages and the workers' output go
    (``route_ray_logs``).
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    import ray  # here, not at the top: the in-process executor reads this module without Ray
    route_ray_logs(log_path)  # after the import: it turns down the console handler Ray adds
    if ray.is_initialized():
        return False
    kwargs = dict(logging_level="warning" if quiet else "info", log_to_driver=True)
    if address and address != "local":
        ray.init(address=address, **kwargs)
        route_ray_logs(log_path)
        return True
    # event_stats times every handler of every Ray event loop for Ray's debug dumps, which
    # nothing here reads: off, an idle actor costs much less CPU
    # address="local": a new Ray of our own, even where RAY_ADDRESS is set or a `ray start`
    # cluster runs on this machine (ray.init() would join that one and refuse num_cpus)
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
             object_store_memory=int((object_store_mb or DEFAULT_OBJECT_STORE_MB) * 2**20),
             include_dashboard=False, _node_ip_address="127.0.0.1",
             _system_config={"event_stats": False}, **kwargs)
    route_ray_logs(log_path)
    return True


def shares_files(nodes: list[dict], setting: bool | None = None) -> bool:
    """Do the run's workers see the driver's files (``shared_fs``)? Unless told, yes exactly
    when every node is on the driver's machine: a cluster of several machines is not assumed
    to share a filesystem."""
    if setting is not None:
        return bool(setting)
    import ray
    here = ray.util.get_node_ip_address()
    return all(n["address"] in (here, None) for n in nodes)


def alive_nodes() -> list[dict]:
    """Alive nodes with their CPU/GPU counts, the head node (which a cluster cannot lose)
    first."""
    import ray
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    nodes.sort(key=lambda n: ("node:__internal_head__" not in n["Resources"], n["NodeID"]))
    return [{"node_id": n["NodeID"], "address": n.get("NodeManagerAddress"),
             "head": "node:__internal_head__" in n["Resources"],
             "cpus": int(n["Resources"].get("CPU", 0)), "gpus": int(n["Resources"].get("GPU", 0)),
             "object_store": int(n["Resources"].get("object_store_memory", 0))} for n in nodes]


def import_in_background(*names: str) -> None:
    """Import modules in a daemon thread (those not imported yet): a run starts the imports it
    will need later while its kernels (which release the GIL) run, instead of after them."""
    missing = [n for n in names if n not in sys.modules]
    if missing:
        import importlib
        threading.Thread(target=lambda: [importlib.import_module(n) for n in missing],
                         daemon=True, name="pairflow-import").start()


def in_background(fn, name: str = "pairflow-background"):
    """Run ``fn()`` on a daemon thread now; returns a wait: a call that blocks until ``fn`` has
    returned and raises what it raised (its value otherwise). For start-up work a run needs
    only later (a sink's imports for its finalize): done beside the tiles, whose kernels release
    the GIL, not on the one thread every run's start waits for."""
    import concurrent.futures as cf
    future: cf.Future = cf.Future()

    def body():
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to whoever waits
            future.set_exception(exc)

    threading.Thread(target=body, daemon=True, name=name).start()
    return future.result


# glibc's malloc thresholds for a process that computes (see keep_freed_memory). 32 MB is the
# largest mmap threshold glibc accepts on 64 bits. Rule: the trim threshold stays above what a
# parse's temporaries free (phylogeny's k = 7 parse of a bacterial proteome: up to ~250 MB), or
# a loader gives the top of its heap back after every parse and faults it in again on the next
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
_allocator_tuned = False


def keep_freed_memory() -> bool:
    """Let this process reuse the memory its arrays free, instead of returning it to the system
    and faulting fresh pages in on the next allocation (glibc's ``mallopt``; Linux only, once
    per process; ``PAIRFLOW_KEEP_FREED_MEMORY=0`` leaves malloc as it is). Returns whether it
    applied.

    Why: numpy kernels allocate temporaries of a few MB per call. glibc serves an allocation
    of at least its mmap threshold with fresh pages and, once more than its trim threshold lies
    free at the top of the heap, returns that to the system, so a loop of such calls faults in
    (and the kernel zeroes) every page again: a large share of a short kernel's time (the
    microscopy kernel's pair). The cost: up to ``TRIM_THRESHOLD`` of freed memory stays with
    each process that computes. First, numpy's huge-page advice as ``huge_page_advice`` rules
    (whatever ``PAIRFLOW_KEEP_FREED_MEMORY`` says)."""
    global _allocator_tuned
    huge_page_advice()  # the other half of not faulting fresh memory in (below)
    if _allocator_tuned:
        return True
    if os.environ.get("PAIRFLOW_KEEP_FREED_MEMORY", "1") == "0" or \
            not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl): its malloc has no such knobs
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    _allocator_tuned = bool(libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD)) and \
        bool(libc.mallopt(m_trim_threshold, TRIM_THRESHOLD))
    return _allocator_tuned


# numpy advises the kernel to back each array of 4 MB or more with transparent huge pages
# (madvise; THP "madvise" or "always" then gives it 2 MB pages). Where the kernel reports free
# memory to its hypervisor (a virtio balloon with free page reporting, feature bit 5), the
# free blocks of 2 MB and more that huge pages come from have been handed back to the host, so
# each fresh huge page costs host faults as well as its zeroing. Measured on such a VM (2
# cores, the 16 genomes' default job in-process, 3 runs each at a load of 12): 3.6-5.1 s of
# system time with numpy's advice, 0.56-0.64 s without, for 0.4 s more user time (TLB misses);
# the same job at a load of 1.2 still spent 3.2 s of system time with it
BALLOON_FEATURES = "/sys/bus/virtio/drivers/virtio_balloon/*/features"
BALLOON_F_REPORTING = 5
_huge_pages: list = []  # this process's decision, once made


def reports_free_pages(pattern: str = BALLOON_FEATURES) -> bool:
    """Does this kernel report its free memory to a hypervisor (a virtio balloon device that
    negotiated free page reporting: its sysfs ``features``, one 0/1 character per bit)?"""
    import glob
    for path in glob.glob(pattern):
        try:
            with open(path) as fh:
                bits = fh.read().strip()
        except OSError:
            continue
        if len(bits) > BALLOON_F_REPORTING and bits[BALLOON_F_REPORTING] == "1":
            return True
    return False


def wants_huge_pages(setting: str, numpy_set: bool, reporting: bool) -> bool | None:
    """The rule: should numpy advise huge pages in a computing process? ``setting`` is
    ``PAIRFLOW_HUGE_PAGES`` (``auto``, ``on``/``1``, ``off``/``0``); ``numpy_set``: the user set
    numpy's own ``NUMPY_MADVISE_HUGEPAGE``; ``reporting``: ``reports_free_pages()``. None: leave
    numpy as it is (auto, where the user chose through numpy's variable)."""
    setting = setting.strip().lower()
    if setting in ("1", "on", "true", "yes"):
        return True
    if setting in ("0", "off", "false", "no"):
        return False
    if numpy_set:
        return None
    return not reporting


def huge_page_advice() -> bool | None:
    """Apply ``wants_huge_pages`` to numpy in this process (once); returns whether numpy now
    advises huge pages (None: numpy left as it was, or it has no such switch)."""
    if _huge_pages:
        return _huge_pages[0]
    want = wants_huge_pages(os.environ.get("PAIRFLOW_HUGE_PAGES", "auto"),
                            "NUMPY_MADVISE_HUGEPAGE" in os.environ,
                            sys.platform.startswith("linux") and reports_free_pages())
    if want is not None:
        try:
            from numpy._core.multiarray import _set_madvise_hugepage
        except ImportError:
            try:
                from numpy.core.multiarray import _set_madvise_hugepage
            except ImportError:
                want = None
        if want is not None:
            _set_madvise_hugepage(want)
    _huge_pages.append(want)
    return want


def give_back_freed_memory() -> bool:
    """Return what this process has freed to the system now: a cycle collection, then glibc's
    ``malloc_trim`` (Linux only; False where it did not run). For a process that let go of a
    run (a retired actor, warm.py): ``keep_freed_memory`` keeps up to ``TRIM_THRESHOLD`` of
    freed heap for the next allocation, and a finished run makes none; what it held would
    stay counted in the process tree while the driver finalizes (issue 58: 10^6 reads)."""
    import gc
    gc.collect()
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    if not hasattr(libc, "malloc_trim"):
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True


def allocator_baseline() -> dict[int, int]:
    """The ``mallopt`` values (by <malloc.h> parameter) in force outside a pipeline's run: glibc's
    fixed defaults, with ``keep_freed_memory``'s thresholds where it applied. A setting that is
    held for a while (``engine/pipeline/memory.py``) restores these, so it does not undo this
    process's tuning."""
    m_trim_threshold, m_top_pad, m_mmap_threshold, m_mmap_max = -1, -2, -3, -4
    values = {m_trim_threshold: 128 * 1024, m_top_pad: 128 * 1024, m_mmap_max: 65536}
    if _allocator_tuned:
        values.update({m_trim_threshold: TRIM_THRESHOLD, m_mmap_threshold: MMAP_THRESHOLD})
    return values


# the time slice a computing thread asks Linux's scheduler (EEVDF) for, instead of its default
# (about a millisecond); the kernel accepts 0.1-100 ms (see long_time_slices)
TIME_SLICE_NS = 20_000_000
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}  # the syscall's number, by machine
_long_slices = threading.local()


def long_time_slices() -> bool:
    """Ask the scheduler for long time slices (``TIME_SLICE_NS``) for this thread, the one
    that computes (once per thread; Linux 6.12 or later, where a fair task's
    ``sched_attr.sched_runtime`` is its slice, takes it; older kernels ignore it;
    ``PAIRFLOW_LONG_SLICES=0`` leaves the scheduler as it is). Returns whether the kernel
    took the call.

    Why: while items load, a node runs more computing processes than it has cores (each
    device actor and each load slot), and with the default slice (about a millisecond) every
    core switches between them hundreds of times a second, each switch refilling the caches
    the kernels are blocked for (prnu's tile kernel keeps its blocks within one core's L2).
    Rule: a thread that computes keeps its core, and its caches, for a long slice; threads that
    wait (Ray's, the event loop) keep their short slices and still preempt these when they
    wake."""
    if getattr(_long_slices, "done", None) is not None:
        return _long_slices.done
    _long_slices.done = False
    number = _SCHED_SETATTR.get(os.uname().machine) if sys.platform.startswith("linux") else None
    if number is None or os.environ.get("PAIRFLOW_LONG_SLICES", "1") == "0":
        return False
    import ctypes
    import struct
    # struct sched_attr (<linux/sched/types.h>, 56 bytes): size, policy, flags, nice, priority,
    # runtime, deadline, period, util_min, util_max; policy 0 is SCHED_OTHER
    attr = ctypes.create_string_buffer(
        struct.pack("IIQiIQQQII", 56, 0, 0, os.getpriority(os.PRIO_PROCESS, 0), 0,
                    TIME_SLICE_NS, 0, 0, 0, 0), 56)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _long_slices.done = libc.syscall(number, 0, attr, 0) == 0
    except (OSError, AttributeError):
        pass
    return _long_slices.done
