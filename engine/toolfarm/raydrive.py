"""A farm on Ray: one ``NodeWriter`` per node and one ``FarmWorker`` per worker slot
(``actors.py``), units handed out by ``dispatch.UnitQueue`` while the driver journals what the
writers report on disk. For farms bigger than a small one
(``engine.run.executor_choice.choose``), on a cluster (``ray_address``), or where Ray is up
already.
"""
from __future__ import annotations

import os
import time

from ..errors import PairflowError
from ..run.journal import JournalWriter
from ..run.progress import Progress
from ..run.rundir import FARM_LOG, JOURNAL, METRICS, JsonlWriter
from .dispatch import UnitQueue
from .index import UnitLedger
from .sizing import threads_per_worker


def start(spec, shared_digests: dict, volumes, values: dict, scratch_root: str,
          farm_digest: str, result_dir: str, attempt: int, units_left: int,
          workers_per_node: int | None, ray_address, num_cpus, object_store_mb,
          flush_bytes: int, flush_s: float) -> dict:
    """Ray up (started here unless it is up or a cluster is named), the shared files in the
    object store, a writer per node and the workers (a worker owning several cores is given
    them as ``{threads}``), all ready with their node prepared."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from ..run.runtime import alive_nodes, init_ray
    from .actors import FarmWorker, NodeWriter
    phases = {}
    t0 = time.perf_counter()
    started_ray = init_ray(ray_address, num_cpus, object_store_mb)
    nodes = alive_nodes()
    phases["ray_s"] = time.perf_counter() - t0
    state = {"ray": ray, "started_ray": started_ray, "nodes": nodes, "writers": [],
             "actors": [], "workers": {}, "phases": phases, "threads": {}}
    t0 = time.perf_counter()
    shared = {}
    for n, p in spec.shared.items():  # into the object store once; a node's first worker
        with open(p, "rb") as fh:     # fetches them
            shared[n] = {"path": p, "digest": shared_digests[n], "ref": ray.put(fh.read())}
    phases["put_shared_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i, node in enumerate(nodes):
        on_node = NodeAffinitySchedulingStrategy(node["node_id"], soft=False)
        w = NodeWriter.options(scheduling_strategy=on_node).remote(
            result_dir, list(spec.streams), f"a{attempt}-n{i}", flush_bytes, flush_s)
        state["writers"].append(w)
        state["actors"].append(w)
        cpus = max(1, int(node["cpus"]))
        for k, t in enumerate(threads_per_worker(cpus, max(1, units_left), workers_per_node)):
            wname = f"n{i}-w{k}"
            a = FarmWorker.options(scheduling_strategy=on_node, num_cpus=min(t, cpus)).remote(
                wname, spec.to_dict(), spec.inputs, [shared], volumes, scratch_root,
                farm_digest, {**values, "threads": str(t)}, w)
            state["workers"][wname] = a
            state["threads"][wname] = t
            state["actors"].append(a)
    writers_up = [w.ready.remote() for w in state["writers"]]
    state["infos"] = ray.get([a.ready.remote() for a in state["workers"].values()])
    ray.get(writers_up)
    phases["actors_s"] = time.perf_counter() - t0  # all up, shared files prepared
    bad = [i for i in state["infos"] if i.get("error")]
    if bad:
        raise PairflowError(f"farm: {bad[0]['worker']}: {bad[0]['error']}")
    return state


def run_step(state: dict, units: list) -> list[dict]:
    """The sizing ladder's step on Ray: unit i on worker i, all at once; their results with
    the outputs."""
    ray, workers = state["ray"], list(state["workers"].values())
    return ray.get([workers[i % len(workers)].run.remote(u.to_list())
                    for i, u in enumerate(units)])


def stop(state: dict, scratch_root: str, farm_digest: str, keep_scratch: bool) -> None:
    ray = state["ray"]
    if state["writers"] and not keep_scratch:  # each node's copy of the shared files goes
        try:
            ray.get([w.remove_scratch.remote(scratch_root, farm_digest)
                     for w in state["writers"]], timeout=60)
        except Exception:
            pass
    for a in state["actors"]:
        try:
            ray.kill(a)
        except Exception:
            pass
    if state["started_ray"]:
        ray.shutdown()


def drive(spec, units, done: set, probed: list[dict], state: dict, recorder, progress: bool,
          attempt: int) -> dict:
    """Hand out units, collect results, journal what is on disk, until every unit is on disk
    or given up. ``probed``: results of units the sizing ladder ran (outputs kept), written
    through the first node's writer before the rest is handed out."""
    ray, workers, writers = state["ray"], dict(state["workers"]), state["writers"]
    probed_ids = {r["unit"] for r in probed}
    todo = [u.uid for u in units if u.uid not in done and u.uid not in probed_ids]
    queue = UnitQueue(todo, spec.retries)
    journal = JournalWriter(recorder.file(JOURNAL))
    log = JsonlWriter(recorder.file(FARM_LOG))
    metrics = JsonlWriter(recorder.file(METRICS))
    n_total, reused = len(units), len(done)
    ledger = UnitLedger(journal, len(spec.streams), done)
    on_disk = ledger.on_disk
    bar = Progress(n_total, unit="units", enabled=progress, figures={"failed": "d"})
    calls: dict = {}    # each worker's outstanding exchange -> the worker
    unwritten: dict[str, set] = {w: set() for w in workers}  # ran, append not yet answered
    per_worker = {w: {"units": 0, "busy_s": 0.0, "failed_runs": 0} for w in workers}
    writer_stats = []
    t_run = time.time()
    last_drain = last_metrics = 0.0
    tool_s = tool_cpu_s = 0.0

    def drain(entries_lists) -> None:
        for entries in entries_lists:
            ledger.journal_entries(entries, f"attempt-{attempt}")

    def snapshot(final: bool = False) -> None:
        metrics.write([ledger.metrics_row(t_run, n_total, reused, queue, per_worker, final)])

    def exchange(wname: str) -> None:
        given = []
        while (u := queue.next_for(wname, len(workers))) is not None:
            given.append(units[u].to_list())
        calls[workers[wname].exchange.remote(given)] = wname

    def steal_for(idle: str) -> None:
        """An idle worker, nothing pending: take queued units back from the busiest."""
        plan = queue.steal(idle)
        if plan is None:
            return
        victim, n = plan
        try:
            back = ray.get(workers[victim].give_back.remote(n), timeout=30)
        except Exception:  # the victim died: its exchange says so, and its units go back
            return
        queue.returned(victim, [u[0] for u in back])

    def write_failed(wname: str, u: int, error: str) -> None:
        log.write([{"unit": u, "worker": wname, "ok": False, "error": error[:2000]}])
        per_worker[wname]["failed_runs"] += 1
        queue.failed(wname, u, {"error": error[:2000], "returncode": 0, "stderr": ""})

    for res in probed:  # the ladder's units: to disk through the first node's writer
        pw = per_worker.setdefault(res["worker"], {"units": 0, "busy_s": 0.0,
                                                   "failed_runs": 0})
        pw["units"] += 1
        pw["busy_s"] += res["seconds"]
        tool_s += res["seconds"]
        tool_cpu_s += res.get("cpu_s") or 0.0
        log.write([{k: v for k, v in res.items() if k not in ("outputs", "stderr")}
                   | {"attempt": 1}])
        queue.finished.add(res["unit"])
    if probed:
        ray.get(writers[0].append.remote([(r["unit"], units[r["unit"]].first, r["outputs"])
                                          for r in probed]))
    try:
        for wname in workers:
            exchange(wname)
        while not (queue.idle() and not any(unwritten.values())):
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=0.2)
            if ready:
                ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0)
            for ref in ready:
                wname = calls.pop(ref)
                try:
                    events = ray.get(ref)
                except Exception as exc:  # the worker is gone: its units go back
                    try:  # (and one whose exchange failed otherwise runs nothing more)
                        ray.kill(workers[wname])
                    except Exception:
                        pass
                    for u in sorted(unwritten.pop(wname)):  # its appends' answers died with it
                        write_failed(wname, u, f"worker lost before its output was written: "
                                               f"{exc}"[:500])
                    for lost in queue.lost_worker(wname):
                        log.write([{"unit": lost, "worker": wname, "ok": False,
                                    "error": f"worker lost: {exc}"[:500]}])
                    if workers.pop(wname, None) is not None and not workers:
                        raise PairflowError("farm: every worker was lost") from exc
                    continue
                pw = per_worker[wname]
                for kind, u_or_res, *error in events:
                    if kind == "written":
                        unwritten[wname].discard(u_or_res)
                        queue.written(u_or_res)
                        pw["units"] += 1
                        continue
                    if kind == "write_failed":
                        unwritten[wname].discard(u_or_res)
                        write_failed(wname, u_or_res, error[0])
                        continue
                    res = u_or_res
                    u = res["unit"]
                    pw["busy_s"] += res.get("seconds", 0.0)
                    tool_s += res.get("seconds", 0.0)
                    tool_cpu_s += res.get("cpu_s") or 0.0
                    log.write([{k: v for k, v in res.items() if k != "stderr" or not res["ok"]}
                               | {"attempt": queue.attempts.get(u, 1)}])
                    if res["ok"]:
                        queue.ran(wname, u, res["seconds"])
                        unwritten[wname].add(u)  # finished once its append is answered
                    else:
                        pw["failed_runs"] += 1
                        queue.failed(wname, u, {"error": res["error"],
                                                "returncode": res["returncode"],
                                                "stderr": res["stderr"]})
            for wname in workers:  # every worker whose exchange returned: the next one
                if wname not in calls.values():
                    steal_for(wname)
                    exchange(wname)
            now = time.time()
            if now - last_drain >= 1.0:  # the writers flush each second (flush_s)
                last_drain = now
                drain(ray.get([w.drain.remote() for w in writers]))
            if now - last_metrics >= 1.0:
                last_metrics = now
                snapshot()
                recorder.heartbeat()
            bar.update(len(on_disk), failed=len(queue.failures))
        closed = ray.get([w.close.remote() for w in writers])
        drain([c["entries"] for c in closed])
        writer_stats = [c["stats"] for c in closed]
        lost = sorted(queue.finished - on_disk)
        if lost:  # cannot happen unless a writer lost bytes it had accepted
            raise PairflowError(f"farm: units {lost[:10]} finished but never reached the disk; "
                                f"resume the run to rerun them")
        snapshot(final=True)
        bar.update(len(on_disk), final=True, failed=len(queue.failures))
    finally:
        bar.close()
        journal.close()
        log.close()
        metrics.close()
    wall = time.time() - t_run
    return {"run_s": wall, "units_done": len(on_disk), "units_run": len(queue.finished),
            "units_probed": len(probed), "units_reused": reused, "retries": queue.retried,
            "stolen": queue.stolen, "executor": "ray",
            "tool_s": tool_s, "tool_cpu_s": tool_cpu_s,
            "per_worker": per_worker, "writers": writer_stats,
            "journal_s": journal.append_seconds, "failures": queue.failures}
