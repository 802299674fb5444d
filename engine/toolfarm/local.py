"""A farm on threads of this process, without Ray: for a farm small enough that starting Ray
would cost more than it brings (the rule is ``engine.run.executor_choice.choose``, the one that
puts small all-pairs runs in-process too).

Each worker is a thread that takes units from the same ``dispatch.UnitQueue`` the Ray driver
uses and runs the tool on them (``tool.run_unit``: the tool is a child process, so threads
run it on every core as well as Ray's processes would; the GIL is held only to read a unit and
hand its output over). Outputs go to one ``BlockWriter`` per stream, exactly the files and the
journal lines a Ray run writes on its node, so ``gather``, ``resume`` and the dashboard read
both alike. The main thread journals what the writers report on disk, writes metrics and the
heartbeat, and advances the progress bar.
"""
from __future__ import annotations

import os
import threading
import time

from ..run.journal import JournalWriter
from ..run.progress import Progress
from ..run.rundir import FARM_LOG, JOURNAL, METRICS, JsonlWriter
from .dispatch import UnitQueue
from .index import UnitLedger
from .tool import run_unit
from .units import read_unit
from .writer import BlockWriter

NODE = "local"


def run_unit_here(spec, inputs, unit, paths, scratch: str, values: dict, worker: str) -> dict:
    """One unit through the tool in this process, as a result record (what a Ray worker's
    ``run`` returns: unit, worker, node, ok, seconds, error, outputs ...)."""
    t0 = time.time()
    base = {"unit": unit.uid, "worker": worker, "node": NODE, "t_start": t0}
    try:
        data = read_unit(inputs[unit.file], unit)
        res = run_unit(spec, data, paths, scratch, values)
    except Exception as exc:  # unreadable input, a merge that cannot parse the output
        return {**base, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                "returncode": None, "stderr": "", "seconds": time.time() - t0}
    out = {**base, "ok": res.ok, "seconds": res.seconds, "cpu_s": res.cpu_s,
           "t_end": time.time(),
           "returncode": res.returncode, "error": res.error, "stderr": res.stderr,
           "bytes_in": len(data)}
    if res.ok:
        out["outputs"] = res.outputs
        out["bytes_out"] = sum(len(b) for b in res.outputs.values())
    return out


def drive_local(spec, units, done: set, probed: list[dict], paths, scratch: str,
                values: dict, threads: list[int], result_dir: str, recorder, progress: bool,
                attempt: int, flush_bytes: int, flush_s: float, all_cores_last: int = 0) -> dict:
    """Run every unit not in ``done`` on ``len(threads)`` worker threads (worker i passes
    ``threads[i]`` as ``{threads}``); ``probed``: results of units already run (the sizing
    ladder's), written first. Returns the run's statistics (the Ray driver's keys).

    ``all_cores_last``: a unit taken with fewer than this many units left to hand out passes
    every core of the node as ``{threads}``. With one core a worker, the last units of a run
    leave cores idle while the slowest one finishes (the tail); a unit running on all cores
    takes the cores a worker leaves the moment it leaves them (while others still run, the
    kernel shares the cores among all the tools' threads). A one-core unit started as the
    others take the all-core units gets one thread's share of the cores while they get
    several: with one all-core unit per worker it would end with them if the tool's threads
    scaled perfectly, and blastp's 2 threads ran 1.45x one thread at load 20 (a one-core unit
    of 589 queries then ended 7 s after the last all-core unit, a core idle meanwhile); the
    driver gives two per worker (``driver.ALL_CORES_LAST``)."""
    writers = {s: BlockWriter(os.path.join(result_dir, s, f"a{attempt}-n0"), s, flush_bytes,
                              flush_s) for s in spec.streams}
    names = [f"n0-w{i}" for i in range(len(threads))]
    probed_ids = {r["unit"] for r in probed}
    queue = UnitQueue([u.uid for u in units if u.uid not in done and u.uid not in probed_ids],
                      spec.retries)
    journal = JournalWriter(recorder.file(JOURNAL))
    log = JsonlWriter(recorder.file(FARM_LOG))
    metrics = JsonlWriter(recorder.file(METRICS))
    n_total, reused = len(units), len(done)
    per_worker = {w: {"units": 0, "busy_s": 0.0, "failed_runs": 0} for w in names}
    ledger = UnitLedger(journal, len(spec.streams), done)
    on_disk = ledger.on_disk
    lock = threading.Condition()
    errors: list[BaseException] = []
    bar = Progress(n_total, unit="units", enabled=progress, figures={"failed": "d"})
    t_run = time.time()
    tool_s = tool_cpu_s = 0.0

    def write(res: dict) -> None:
        unit = units[res["unit"]]
        for s, w in writers.items():
            w.append(unit.uid, unit.first, res["outputs"].get(s, b""))

    def record(wname: str, res: dict) -> None:
        """Log one tool run and account for it (under ``lock``)."""
        nonlocal tool_s, tool_cpu_s
        pw = per_worker.setdefault(wname, {"units": 0, "busy_s": 0.0, "failed_runs": 0})
        pw["busy_s"] += res.get("seconds", 0.0)
        tool_s += res.get("seconds", 0.0)
        tool_cpu_s += res.get("cpu_s") or 0.0
        log.write([{k: v for k, v in res.items()
                    if k != "outputs" and (k != "stderr" or not res["ok"])}
                   | {"attempt": queue.attempts.get(res["unit"], 1)}])
        if res["ok"]:
            pw["units"] += 1

    for res in probed:  # the ladder's units: on their way to disk before the rest starts
        write(res)
        record(res["worker"], res)
        queue.finished.add(res["unit"])

    def work(i: int) -> None:
        wname = names[i]
        vals = {**values, "threads": str(threads[i])}
        vals_all = {**values, "threads": str(sum(threads))}
        while True:
            with lock:
                while True:
                    if errors or queue.idle():
                        return
                    u = queue.next_for(wname, len(names))
                    if u is not None:
                        break
                    lock.wait(0.5)  # units held by others may fail and come back
                last = len(queue.pending) < all_cores_last
            res = run_unit_here(spec, spec.inputs, units[u], paths, scratch,
                                vals_all if last else vals, wname)
            res["threads"] = int((vals_all if last else vals)["threads"])
            try:
                if res["ok"]:
                    write(res)
            except BaseException as exc:  # the writer failed (disk full): the run stops
                with lock:
                    errors.append(exc)
                    lock.notify_all()
                return
            with lock:
                record(wname, res)
                if res["ok"]:
                    queue.succeeded(wname, u, res["seconds"])
                else:
                    per_worker[wname]["failed_runs"] += 1
                    queue.failed(wname, u, {"error": res["error"],
                                            "returncode": res["returncode"],
                                            "stderr": res["stderr"]})
                lock.notify_all()

    def drain(entries) -> None:
        ledger.journal_entries(entries, f"attempt-{attempt}")

    def snapshot(final: bool = False) -> None:
        metrics.write([ledger.metrics_row(t_run, n_total, reused, queue, per_worker, final)])

    open_writers = writers
    pool = [threading.Thread(target=work, args=(i,), name=f"farm-{names[i]}", daemon=True)
            for i in range(len(names))]
    try:
        for t in pool:
            t.start()
        last = 0.0
        while alive := [t for t in pool if t.is_alive()]:
            alive[0].join(timeout=0.2)
            if time.time() - last >= 1.0:
                last = time.time()
                drain([e for w in writers.values() for e in w.drain()])
                snapshot()
                recorder.heartbeat()
            bar.update(len(on_disk), failed=len(queue.failures))
        if errors:
            raise errors[0]
        open_writers, closed = {}, writers
        drain([e for w in closed.values() for e in w.close()])
        snapshot(final=True)
        bar.update(len(on_disk), final=True, failed=len(queue.failures))
    finally:
        for w in open_writers.values():  # a failed run: stop the writer threads
            try:
                w.close()
            except BaseException:
                pass
        bar.close()
        journal.close()
        log.close()
        metrics.close()
    stats = [{s: {"bytes": w.written_bytes, "flushes": w.flushes, "file": w.location}
              for s, w in writers.items()}]
    return {"run_s": time.time() - t_run, "units_done": len(on_disk),
            "units_run": len(queue.finished), "units_probed": len(probed),
            "units_reused": reused, "retries": queue.retried, "stolen": 0, "tool_s": tool_s,
            "tool_cpu_s": tool_cpu_s,
            "per_worker": per_worker, "writers": stats, "journal_s": journal.append_seconds,
            "failures": queue.failures, "executor": "inprocess"}
