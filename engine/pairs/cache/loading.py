"""Loading items: from a key to a parsed (and, on CPUs, preprocessed) host item.

Plain functions, free of Ray: ``actors.py`` runs them as Ray tasks on the item's node, the driver
runs the pre-flight (``check_items``) and the stage measurement (``measure_stages``) the same way,
and tests call them directly.
"""
from __future__ import annotations

import asyncio
import time
from typing import Sequence

import numpy as np

from ...errors import InputError, mark_failure
from ...run.io import fetch, io_stats
from ...run.runtime import keep_freed_memory, long_time_slices
from ...run.shipping import install
from ..app import PackKey
from .store import StoreStats, add_stats, content_digest, source_digest


def load_and_parse(app, key: str, preprocess_on: str | None = None, store=None, parsed=None):
    """Fetch and parse one item; with ``preprocess_on`` (a host-memory device such as "cpu")
    also preprocess it here, once per node, instead of once in every device actor's L1.

    ``store`` (an ``ItemStore``, L4): the item comes from the store when it holds an entry for
    these bytes and parse parameters, and goes into it after a parse; ``info["store"]`` counts
    what happened (``store.StoreStats``).

    ``parsed``: this item as the probe already fetched and parsed it (``measure_stages``'s
    ``keep``, only without a store), its info with the probe's times."""
    if parsed is not None:  # (what the probe read is counted by load_items, once)
        item, info = parsed
        return _prepared(app, key, item, {k: v for k, v in info.items() if k != "io"},
                         preprocess_on)
    t0 = time.time()
    if isinstance(key, PackKey):  # the app reads its members' files itself; the L4 store
        item = _step("parse", key, app.parse_pack, list(key.members))  # keeps items, not packs
        info = {"raw_bytes": 0, "load": (t0, t0), "parse": (t0, time.time())}
        if store is not None:
            info["store"] = StoreStats(bypassed=1).to_dict()
        return _prepared(app, key, item, info, preprocess_on)
    url = app.url(key)
    raw = fetch(url) if url else None
    t1 = time.time()
    info = {"raw_bytes": len(raw) if raw else 0, "load": (t0, t1)}
    digest = None
    if store is not None:
        stats = StoreStats()
        info["store"] = stats
        source = getattr(app, "store_source", None)
        source = source(key) if raw is None and callable(source) else None
        if raw is None and not source:
            stats.bypassed += 1
        else:
            content = content_digest(raw) if raw is not None else source_digest(source)
            digest = store.digest(key, content, preprocess_on)
            found, item = store.get(digest, stats)
            if found:
                info["store_read"] = (t1, time.time())
                info["nbytes"] = int(app.item_nbytes(item))
                info["store"] = stats.to_dict()
                return item, info
    t1 = time.time()
    item = _step("parse", key, app.parse, key, raw)
    info["parse"] = (t1, time.time())
    item, info = _prepared(app, key, item, info, preprocess_on)
    if digest is not None:
        store.put(digest, item, stats)
    if store is not None:
        info["store"] = stats.to_dict()
    return item, info


def _step(stage: str, key, call, *args):
    """An app's step on one item (or the probe's tile); a failure keeps the stage, what it
    ran on and the traceback from here down (``errors.mark_failure``), for the user's one line
    and ``-v``."""
    try:
        return call(*args)
    except Exception as exc:
        mark_failure(exc, f"{stage} of {key if stage == 'compare' else repr(str(key))}")
        raise


def _prepared(app, key: str, item, info: dict, preprocess_on: str | None):
    """A parsed item preprocessed here when asked (timed in ``info``), and its size."""
    if preprocess_on is not None:
        t0 = time.time()
        item = _step("preprocess", key, app.preprocess, key, item, preprocess_on)
        info["preprocess"] = (t0, time.time())
    info["nbytes"] = int(app.item_nbytes(item))
    return item, info


class BatchPart:
    """One item of a load task that returned its items as one object (``one_object``).

    Why: each object a task returns costs its worker, its owner and the raylet CPU (create,
    seal, location and reference bookkeeping, a borrow per device actor that uses it), so a
    task returns one object, not one per item. The price: an item cannot leave the object store
    alone, so a node cache does this only when its tier holds every item (none is evicted).
    ``await part`` gives the item; ``resolve`` fetches each batch once for many parts."""

    __slots__ = ("ref", "index")

    def __init__(self, ref, index: int):
        self.ref, self.index = ref, index

    def __await__(self):
        return self._get().__await__()

    async def _get(self):
        return (await self.ref)[self.index]


async def resolve(handles: dict) -> dict:
    """``{key: value}`` for ``{key: handle}`` (ObjectRefs or ``BatchPart``s), each object
    fetched once however many of its parts are asked for."""
    refs = list(dict.fromkeys(h.ref if isinstance(h, BatchPart) else h
                              for h in handles.values()))
    values = dict(zip(refs, await asyncio.gather(*refs)))
    return {key: values[h.ref][h.index] if isinstance(h, BatchPart) else values[h]
            for key, h in handles.items()}


def load_items(app, keys: list[str], preprocess_on: str | None = None, inline_bytes: int = 0,
               all_inline: bool = False, shipment=None, store=None,
               parsed: dict | None = None, one_object: bool = False):
    """One or more items in one task (``num_returns=len(keys) + 1``): one return per item, so
    each stays a separate object the node cache can evict alone, then the list of their infos.
    A Ray task costs a few ms of CPU; items that parse in less are loaded in batches.

    ``one_object`` (``num_returns=2``): the items as one list, then the infos, for a node cache
    whose tier holds every item (``BatchPart``).

    An item of at most ``inline_bytes`` travels in its info instead (``info["value"]``; its own
    return is ``None``): the node cache keeps small items as values, because an ObjectRef per
    small sequence costs more CPU to hand over and fetch than aligning it.

    ``all_inline`` (``num_returns=1``): only the infos, every item inside its own, for apps whose
    items are all small. Even an unused return object costs the owner, the worker and the raylet
    bookkeeping, once per item of the run.

    ``shipment``: the driver's local files, through the object store (``run/shipping.py``).
    ``store``: the run's L4 item store, or None (``load_and_parse``).

    ``parsed``: items the probe parsed in this process (key -> (item, info)), taken out as
    they are used: an in-process run loads them without parsing them again."""
    install(shipment)
    long_time_slices()  # the task's thread parses: fewer switches on a core it shares
    warm_process(app, "host")  # a loader process that ran no pre-flight check is cold
    before = io_stats()
    taken = [parsed.pop(key, None) if parsed else None for key in keys]
    out = [load_and_parse(app, key, preprocess_on, store, p) for key, p in zip(keys, taken)]
    if out:  # what this task read, by scheme (files read once per process count once)
        io = io_delta(before, io_stats())
        for p in taken:  # and what the probe read for the items it hands over
            for kind, d in ((p or (None, {}))[1].get("io") or {}).items():
                was = io.setdefault(kind, {"gets": 0, "bytes": 0})
                io[kind] = {k: was[k] + d[k] for k in ("gets", "bytes")}
        out[0][1]["io"] = io
    items = []
    for item, info in out:
        if all_inline or info["nbytes"] <= inline_bytes:
            info["value"], item = item, None
        items.append(item)
    infos = [info for _, info in out]
    if one_object:
        return items, infos
    return infos if all_inline else (*items, infos)


def io_delta(before: dict, after: dict) -> dict:
    """``io_stats`` counts read between two snapshots, by scheme."""
    out = {}
    for kind, now in after.items():
        was = before.get(kind, {"gets": 0, "bytes": 0})
        d = {k: now[k] - was[k] for k in ("gets", "bytes")}
        if d["gets"]:
            out[kind] = d
    return out


_WARM: set = set()


def _warms_up(app) -> bool:
    """Does the app define its own ``warmup`` (whose contract is to load its kernels)?"""
    from ..app import BasePairApp
    return getattr(type(app), "warmup", BasePairApp.warmup) is not BasePairApp.warmup


def warm_process(app, device: str) -> None:
    """``app.warmup(device)`` once per process, app class and ``app.warm_token`` (see
    ``BasePairApp.warmup``); first, the process's allocator keeps what it frees
    (``runtime.keep_freed_memory``).

    ``warm_token`` (optional, hashable): what else the warm-up prepares besides kernels (the
    Jaccard app builds its files' record items there). Without it a second run in one session
    (a REPL, a benchmark) over other files would skip that and probe a record's parse as a
    whole file's."""
    keep_freed_memory()
    token = (type(app).__qualname__, device, getattr(app, "warm_token", None))
    warm = getattr(app, "warmup", None)
    if warm is not None and token not in _WARM:
        warm(device)
        _WARM.add(token)


def check_items(app, keys: list[str], shipment=None, warm: bool = True) -> list[str]:
    """Pre-flight: every item's raw bytes checked before any compute; returns problems.
    The loader process is warmed up on the way, so the first load does not pay for it
    (``warm=False``: a thread checking beside the probe, which warms this process up)."""
    install(shipment)
    if warm:
        warm_process(app, "host")
    problems = []
    for key in keys:
        try:
            url = app.url(key)
            app.check(key, fetch(url) if url else None)
        except InputError as exc:
            problems.append(str(exc))
        except Exception as exc:  # an app's own check failing is still a named problem
            problems.append(f"{app.url(key) or key}: {type(exc).__name__}: {exc}")
    return problems


def load_batches(missing: list, per_task: int, slots: int) -> list[list]:
    """Batches of at most ``per_task`` items, and never fewer batches than ``slots`` (the
    node's CPUs) while there are items enough: batching must not serialise what could run in
    parallel."""
    size = min(max(1, per_task), max(1, -(-len(missing) // max(1, slots))))
    return [missing[i:i + size] for i in range(0, len(missing), size)]


# the probe's first parse taking more than this many times its second, and this much longer,
# is a cold one and the second stands for both: the load batch and the leaf are not set from a
# fresh process's cold first parse
MEASURE_COLD, MEASURE_COLD_S = 2.0, 0.001
# a sample compare shorter than this is repeated on a larger tile of the same items
MEASURE_MIN_S = 0.005
MEASURE_MAX_SIDE = 1024
MEASURE_REPS_S = 0.05  # another timed rep only while the reps so far took less
# a kernel that shares each item's part among a tile's pairs costs less a pair in a larger
# tile: the tile doubles again while the last doubling cut a pair's cost by more than a tenth,
# and while the doubled compare would take at most MEASURE_GROW_S and MEASURE_GROW_SHARE of
# the run's compares on one core (start-up the run waits for: a small run's probe stays short)
MEASURE_AMORTISED = 0.9
MEASURE_GROW_S = 0.25
MEASURE_GROW_SHARE = 0.01
# the probe times CPU, and a compare that waits (on a tool, a service, a sleep) spends little:
# a compare short in CPU doubles only while the doubled one's wall time (4x the last) stays
# under this. Not a bound on longer ones: while Ray starts beside the probe, wall time runs many
# times the CPU time, and their CPU budget bounds them already
MEASURE_GROW_WALL_S = 2.0


def probe_grows(side: int, t_pair: float, t_half: float | None = None,
                budget_s: float = MEASURE_GROW_S, wall_s: float = 0.0) -> bool:
    """Does the probe time a tile of twice ``side`` next, having timed ``t_pair`` a pair in a
    tile of ``side`` (``t_half``: in the tile of half the side, None for the first)? A
    compare shorter than ``MEASURE_MIN_S`` grows while the doubled one's wall time (4x
    ``wall_s``, this one's) stays under ``MEASURE_GROW_WALL_S``; a longer one only within
    ``budget_s``.

    Rule: a pair is timed in a tile near the run's, not in 2 x 2. A kernel that gathers each
    item's part once for all a tile's pairs (forensics' spectrum rows) costs several times
    less a pair in a real tile, and a leaf chosen from the 2 x 2 figure comes out too small."""
    if side >= MEASURE_MAX_SIDE:
        return False
    if t_pair * side * side < MEASURE_MIN_S:
        return 4 * wall_s <= MEASURE_GROW_WALL_S
    if t_half is not None and t_pair > MEASURE_AMORTISED * t_half:
        return False
    return t_pair * (2 * side) ** 2 <= budget_s


def measure_stages(app, keys: Sequence[str], device: str, grow: bool = True,
                   shipment=None, store=None, preprocess_on: str | None = None,
                   keep: dict | None = None, pairs: int = 0) -> dict:
    """Parse and compare a small sample, timing the second compare (the first compiles), or
    the first when the app has a warm-up of its own (it compiled the kernels).
    The process is warmed up first, so first-call costs do not inflate the parse time, and
    a first parse that took more than ``MEASURE_COLD`` times the second (and over
    ``MEASURE_COLD_S`` longer) counts as the second's time.

    ``grow``: while a compare of the sample takes under ``MEASURE_MIN_S``, or a pair still
    costs less in a larger tile (``probe_grows``), the tile is doubled (the sample's items
    repeated), so ``t_pair`` is a pair's cost inside a real tile: for pairs of microseconds a
    2 x 2 tile times the call around the pairs, not the pairs, and the leaf chosen from it came
    out tiles a fraction of their per-tile overhead.

    ``shipment``: the driver's local input files, installed before anything is read (nothing
    shared between nodes: ``engine/run/shipping.py``).

    ``store``: the run's L4 store; the sample comes from it when it holds the items (a run
    over stored items pays a store read per load, not a parse), else is parsed and kept, as
    the load tasks will load it (``preprocess_on``: preprocessed on the host), so the probe
    parses nothing the store has and stores nothing the run will not read.

    ``pairs``: the run's, which bound how long the probe may grow a long compare (0: only
    while it is shorter than ``MEASURE_MIN_S``).

    ``keep``: a dict that receives the sample's parsed items (key -> (item, info), the info
    with what was read), for a run in this process to load instead of parsing them again
    (without a store only: with one, the run reads them from the store)."""
    install(shipment)
    warm_process(app, "host")
    warm_process(app, device)
    sample = list(dict.fromkeys(keys))[:2]
    if store is None:
        preprocess_on = None
    loaded, took, cpu = [], [], []
    for k in sample:
        before, t0, c0 = io_stats(), time.perf_counter(), time.thread_time()
        item, info = load_and_parse(app, k, preprocess_on, store)
        took.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        loaded.append((item, info))
        if keep is not None and store is None:
            keep[k] = (item, {**info, "io": io_delta(before, io_stats())})
    if store is None and len(took) == 2 and took[0] > MEASURE_COLD * took[1] \
            and took[0] - took[1] > MEASURE_COLD_S:
        # the process's first parse paid one-off costs the app's warm-up did not (a decoder's
        # plugin, an FFT's plans): the second, warm, as the loaders parse all but their first,
        # stands for both (not a third parse: the probe's parses are counted, and handed over)
        took[0], cpu[0] = took[1], cpu[1]
    items = [item for item, _ in loaded]
    t_parse = sum(took) / max(1, len(took))
    # (this thread's CPU: the work the executor's choice weighs; a loaded machine's waits are not)
    t_parse_cpu = sum(cpu) / max(1, len(cpu))
    dev = items if preprocess_on == device else \
        [_step("preprocess", k, app.preprocess, k, it, device) for k, it in zip(sample, items)]
    mask = np.ones((len(dev), len(dev)), bool)
    probe = f"the probe's tile of {', '.join(repr(str(k)) for k in sample)}"
    if not _warms_up(app):  # the first call compiles; an app's own warm-up has done that
        _step("compare", probe, app.compare, dev, dev, mask, device)
    # on the CPU, this thread's CPU time: the inputs are checked on another thread meanwhile,
    # and its waits for the GIL are not a pair's cost (counted, they can send a small run to Ray)
    clock = time.thread_time if device == "cpu" else time.perf_counter
    t_half = None  # t_pair in the tile of half the side
    while True:
        reps, t0, c0 = 0, time.perf_counter(), clock()
        # up to 3 reps while they are short: one compare of large items times itself well,
        # and each rep more is start-up the run waits for
        while reps < 3 and (reps == 0 or time.perf_counter() - t0 < MEASURE_REPS_S):
            _step("compare", probe, app.compare, dev, dev, mask, device)
            reps += 1
        t_pair = (clock() - c0) / (reps * mask.size)
        wall = (time.perf_counter() - t0) / reps
        budget = min(MEASURE_GROW_S, MEASURE_GROW_SHARE * pairs * t_pair)
        if not (grow and dev and probe_grows(len(dev), t_pair, t_half, budget, wall)):
            break
        t_half = t_pair
        dev = dev * 2
        mask = np.ones((len(dev), len(dev)), bool)
    nbytes = float(np.mean([app.item_nbytes(it) for it in items])) if items else 0.0
    out = {"t_pair": t_pair, "t_parse": t_parse, "t_parse_cpu": t_parse_cpu,
           "item_bytes": nbytes}
    if store is not None:  # what the probe found in the L4 store, counted with the run's
        out["store"] = {}
        for _, info in loaded:
            add_stats(out["store"], info["store"])
    return out
