"""``engine.farm(...)``: an unmodified program over every unit of its input, on every core.

check the spec -> open the run directory (or resume it: same work, same cut) -> cut the input
into units (``units.py``) -> start Ray, one writer per node and one worker per core -> hand out
units (``dispatch.UnitQueue``) while journaling what the writers report on disk -> close the
writers, move the files to their final names -> summary.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field, fields

from ..errors import InputError, PairflowError
from ..run.journal import JournalWriter, check_same_work
from ..run.progress import Progress
from ..run.rundir import (FARM_LOG, FARM_UNITS, JOURNAL, METRICS, JsonlWriter, RunRecorder,
                          read_json, write_json)
from .dispatch import UnitQueue
from .index import journal_blocks, replay
from .segment import fasta_stats, plan_volumes
from .shared import file_digest
from .spec import FarmSpec
from .units import (AUTO, INPUTS_DIR, PROBE_RECORDS, UNITS_PER_WORKER, Unit,
                    choose_unit_records, cut_units, decompressed, fit_unit_cost, read_unit,
                    record_names, scan_records)
from .writer import PARTIAL, finalize

SPEC_FIELDS = {f.name for f in fields(FarmSpec)}
FALLBACK_UNIT_RECORDS = 50  # auto units when the probe cannot time the tool


@dataclass
class FarmResult:
    run_dir: str
    summary: dict
    failures: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def gather(self, stream: str = "stdout", out=None) -> dict:
        from .gather import gather
        return gather(self.run_dir, stream, out)


def farm(spec: FarmSpec | None = None, *, run_dir: str | None = None, runs_root: str = "runs",
         name: str = "farm", resume: bool = False, progress: bool = True,
         workers_per_node: int | None = None, ray_address: str | None = None,
         num_cpus: int | None = None, object_store_mb: int | None = None,
         scratch: str | None = None, keep_scratch: bool = False,
         flush_bytes: int = 4 << 20, flush_s: float = 1.0, config_dump: dict | None = None,
         **spec_fields) -> FarmResult:
    """Run ``spec`` (or a spec built from the keyword arguments named as ``FarmSpec``'s
    fields: ``program=[...]``, ``inputs=[...]``, ``shared={...}`` ...) over its inputs.

    ``resume=True`` with ``run_dir``: units whose every stream is journaled and still matches
    its CRC are kept, the rest run again. Units that fail after their retries are reported in
    ``result.failures`` (with the tool's stderr and exit status) while the others complete.

    ``scratch``: where each node keeps its copy of the shared files (default
    ``$PAIRFLOW_SCRATCH`` or the system temp directory), removed at the end unless
    ``keep_scratch``."""
    unknown = set(spec_fields) - SPEC_FIELDS
    if unknown:
        raise PairflowError(f"farm: unknown option(s) {', '.join(sorted(unknown))}")
    if spec is None:
        spec = FarmSpec(**spec_fields)
    spec.inputs = [os.path.abspath(os.path.expanduser(p)) for p in spec.inputs]
    spec.shared = {k: os.path.abspath(os.path.expanduser(v)) for k, v in spec.shared.items()}
    spec.check()
    for path in spec.inputs + list(spec.shared.values()):
        if not os.path.isfile(path):
            raise InputError(path, "no such file")
    recorder = RunRecorder.open(run_dir, runs_root, name, resume)
    t0 = time.perf_counter()
    digests = ({p: file_digest(p) for p in spec.inputs},
               {n: file_digest(p) for n, p in spec.shared.items()})
    old_meta = recorder.read_meta() if resume else None
    if resume:  # a refused resume leaves the run it refused as it was
        if old_meta is None or old_meta.get("kind") != "farm":
            raise PairflowError(f"cannot resume {recorder.path}: not a farm's run")
        check_same_work(recorder.path, old_meta["fingerprint"], spec.fingerprint(*digests))
    digest_s = time.perf_counter() - t0
    recorder.starting()
    recorder.write_config(config_dump or {"farm": spec.to_dict()})
    try:
        return _run(spec, recorder, old_meta, digests, digest_s, progress, workers_per_node,
                    ray_address, num_cpus, object_store_mb, scratch, keep_scratch, flush_bytes,
                    flush_s, name)
    except KeyboardInterrupt:
        recorder.rundir.set_status("interrupted", error="interrupted")
        raise
    except BaseException as exc:
        recorder.failed(f"{type(exc).__name__}: {exc}" if not isinstance(
            exc, (PairflowError, InputError)) else str(exc))
        raise


def _run(spec, recorder, old_meta, digests, digest_s, progress, workers_per_node, ray_address,
         num_cpus, object_store_mb, scratch, keep_scratch, flush_bytes, flush_s,
         name) -> FarmResult:
    t_start = time.time()
    resume = old_meta is not None
    phases = {"digest_s": digest_s}
    input_digests, shared_digests = digests
    farm_digest = spec.digest(input_digests, shared_digests)
    fingerprint = spec.fingerprint(input_digests, shared_digests)
    t0 = time.perf_counter()
    # compressed inputs: cut by byte ranges, so decompressed once into the run directory
    # (a resume finds them there); the fingerprint keeps the files the user named
    spec.inputs = [decompressed(p, recorder.file(INPUTS_DIR)) for p in spec.inputs]
    phases["decompress_s"] = time.perf_counter() - t0

    import ray

    from ..run.runtime import alive_nodes, init_ray
    started_ray = init_ray(ray_address, num_cpus, object_store_mb)
    actors: list = []
    writers: list = []
    scratch_root = scratch or os.environ.get("PAIRFLOW_SCRATCH") or tempfile.gettempdir()
    try:
        nodes = alive_nodes()
        per_node = [workers_per_node or max(1, n["cpus"]) for n in nodes]
        n_workers = sum(per_node)

        t0 = time.perf_counter()
        offsets = None
        if resume:  # the first attempt's cut (a resume refuses a changed spec)
            plan = read_json(recorder.file(FARM_UNITS))
            records, attempt = plan["records"], int(old_meta.get("attempt", 0)) + 1
        else:
            offsets = [scan_records(p, spec.cut, spec.pattern, spec.pattern_ends)
                       for p in spec.inputs]
            records, attempt = sum(len(o) - 1 for o in offsets), 0
            if records == 0:
                raise InputError(spec.inputs[0], "no records to run the tool on")
            # auto units are cut once the workers are up: a probe of the tool sizes them
            plan = None if spec.unit_records == AUTO and spec.cut != "file" else \
                _cut(spec, offsets, records, spec.unit_records, n_workers, recorder)
        values = {"input_records": str(records)}
        result_dir = recorder.rundir.result_dir
        volumes = None
        if spec.volumes > 1:
            offs, letters = fasta_stats(spec.shared[spec.segment])
            volumes = plan_volumes(offs, letters, spec.volumes)
            values.update(db_letters=str(sum(letters)), db_records=str(len(letters)))
        phases["cut_s"] = time.perf_counter() - t0

        # shared files: into the object store once; each node's first worker fetches them
        t0 = time.perf_counter()
        shared = {}
        for n, p in spec.shared.items():
            with open(p, "rb") as fh:
                shared[n] = {"path": p, "digest": shared_digests[n], "ref": ray.put(fh.read())}
        phases["put_shared_s"] = time.perf_counter() - t0

        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from .actors import FarmWorker, NodeWriter
        t0 = time.perf_counter()
        workers = {}
        for i, node in enumerate(nodes):
            on_node = NodeAffinitySchedulingStrategy(node["node_id"], soft=False)
            w = NodeWriter.options(scheduling_strategy=on_node).remote(
                result_dir, list(spec.streams), f"a{attempt}-n{i}", flush_bytes, flush_s)
            writers.append(w)
            actors.append(w)
            for k in range(per_node[i]):
                wname = f"n{i}-w{k}"
                a = FarmWorker.options(scheduling_strategy=on_node).remote(
                    wname, spec.to_dict(), spec.inputs, [shared], volumes, scratch_root,
                    farm_digest, values, w)
                workers[wname] = a
                actors.append(a)
        writers_up = [w.ready.remote() for w in writers]
        infos = ray.get([a.ready.remote() for a in workers.values()])
        ray.get(writers_up)
        phases["actors_s"] = time.perf_counter() - t0  # all up, shared files prepared
        bad = [i for i in infos if i.get("error")]
        if bad:
            raise PairflowError(f"farm: {bad[0]['worker']}: {bad[0]['error']}")
        chosen = None
        if plan is None:  # unit_records="auto": time the tool, then cut
            t0 = time.perf_counter()
            chosen = _probe_unit_records(offsets, records, next(iter(workers.values())),
                                         n_workers)
            plan = _cut(spec, offsets, records, chosen["unit_records"], n_workers, recorder)
            phases["probe_s"] = time.perf_counter() - t0
        units = [Unit.from_list(u) for u in plan["units"]]
        done, resumed = set(), None
        if resume:
            t0 = time.perf_counter()
            done, resumed = replay(recorder.file(JOURNAL), result_dir, spec.streams, len(units))
            phases["replay_s"] = time.perf_counter() - t0
        node_bytes: dict[str, int] = {}
        for i in infos:  # what each node fetched from the object store (once per node)
            node_bytes[i["node"]] = node_bytes.get(i["node"], 0) + i["fetched_bytes"]
        recorder.write_meta({"kind": "farm", "app": name, "program": spec.program,
                             "streams": list(spec.streams), "units_total": len(units),
                             "records_total": plan["records"], "attempt": attempt,
                             "fingerprint": fingerprint, "farm_digest": farm_digest,
                             "workers": infos,
                             "nodes": len(nodes), "volumes": spec.volumes,
                             "started": t_start})
        recorder.running()
        stats = _drive(spec, units, done, workers, writers, recorder, progress, attempt)
        stats["node_bytes"] = node_bytes
        t0 = time.perf_counter()
        for stream in spec.streams:  # every attempt's files, now that all are whole
            sdir = os.path.join(result_dir, stream)
            for f in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
                if f.endswith(PARTIAL):
                    finalize(os.path.join(sdir, f[:-len(PARTIAL)]))
        phases["finalize_s"] = time.perf_counter() - t0
        failures = []
        for u, f in sorted(stats.pop("failures").items()):
            unit = units[u]
            names = record_names(read_unit(spec.inputs[unit.file], unit), spec.cut) \
                if spec.cut in ("fasta", "fastq") else []
            failures.append({"unit": u, "file": spec.inputs[unit.file],
                             "records": [unit.first, unit.first + unit.records - 1],
                             "names": names, **f})
        outputs = {s: sorted(os.path.join(result_dir, s, f)
                             for f in os.listdir(os.path.join(result_dir, s)))
                   for s in spec.streams if os.path.isdir(os.path.join(result_dir, s))}
        summary = {"kind": "farm", "wall_s": time.time() - t_start, "units_total": len(units),
                   "records_total": plan["records"], "workers": len(workers),
                   "nodes": len(nodes), "attempt": attempt, "resumed": resumed,
                   "failures": failures, "units_failed": len(failures), "outputs": outputs,
                   "phases": phases, "scratch": scratch_root,
                   "unit_records": plan.get("unit_records"), "unit_choice": chosen, **stats}
        recorder.write_summary(summary)
        recorder.finished()
        return FarmResult(recorder.path, summary, failures)
    finally:
        if writers and not keep_scratch:  # each node's copy of the shared files goes
            try:
                ray.get([w.remove_scratch.remote(scratch_root, farm_digest) for w in writers],
                        timeout=60)
            except Exception:
                pass
        for a in actors:
            try:
                ray.kill(a)
            except Exception:
                pass
        if started_ray:
            ray.shutdown()


def _cut(spec, offsets, records: int, unit_records: int, n_workers: int, recorder) -> dict:
    """Units of ``unit_records`` (the last ones smaller), saved: a resume reuses this cut."""
    tail = spec.tail_units if spec.tail_units is not None else 2 * n_workers
    units = cut_units(offsets, unit_records, tail, per_file=spec.cut == "file")
    plan = {"streams": list(spec.streams), "inputs": spec.inputs,
            "records": records, "unit_records": unit_records,
            "units": [u.to_list() for u in units]}
    write_json(recorder.file(FARM_UNITS), plan)
    return plan


def _probe_unit_records(offsets, records: int, worker, n_workers: int) -> dict:
    """``unit_records="auto"``: the tool timed by one worker on the first record and on the
    first ``PROBE_RECORDS`` of the first input (the one record twice, the faster counts), then
    ``choose_unit_records``. A probe the tool fails falls back to ``FALLBACK_UNIT_RECORDS``
    (the run itself then reports the failing records)."""
    import ray
    first = offsets[0]
    many = min(PROBE_RECORDS, len(first) - 1)
    if many < 2:  # nothing to fit: units for balance alone
        return {"unit_records": max(1, records // (n_workers * UNITS_PER_WORKER)),
                "probe": None}
    probe = [Unit(-1, 0, first[0], first[n], 0, n).to_list() for n in (1, many, 1)]
    timed = ray.get(worker.probe.remote(probe))
    if timed.get("error"):
        return {"unit_records": FALLBACK_UNIT_RECORDS, "probe": None,
                "error": timed["error"][:500]}
    t1, tm, t1b = timed["seconds"]
    fixed, per_record = fit_unit_cost(min(t1, t1b), tm, many)
    n = choose_unit_records(fixed, per_record, records, n_workers)
    return {"unit_records": n, "probe": {"records": [1, many], "seconds": timed["seconds"],
                                         "fixed_s": fixed, "per_record_s": per_record}}


def _drive(spec, units, done, workers, writers, recorder, progress, attempt) -> dict:
    """Hand out units, collect results, journal what is on disk, until every unit is on disk
    or given up."""
    import ray

    todo = [u.uid for u in units if u.uid not in done]
    queue = UnitQueue(todo, spec.retries)
    journal = JournalWriter(recorder.file(JOURNAL))
    log = JsonlWriter(recorder.file(FARM_LOG))
    metrics = JsonlWriter(recorder.file(METRICS))
    n_total, reused = len(units), len(done)
    journaled: dict[int, set] = {}
    on_disk = set(done)
    bar = Progress(n_total, unit="units", enabled=progress, figures={"failed": "d"})
    calls: dict = {}    # each worker's outstanding exchange -> the worker
    unwritten: dict[str, set] = {w: set() for w in workers}  # ran, append not yet answered
    per_worker = {w: {"units": 0, "busy_s": 0.0, "failed_runs": 0} for w in workers}
    writer_stats = []
    t_run = time.time()
    last_drain = last_metrics = 0.0
    tool_s = 0.0

    def drain(entries_lists) -> None:
        for entries in entries_lists:
            journal_blocks(journal, entries, f"attempt-{attempt}")
            for e in entries:
                journaled.setdefault(int(e["unit"]), set()).add(e["stream"])
        for u, got in list(journaled.items()):
            if len(got) == len(spec.streams):
                on_disk.add(u)
                del journaled[u]

    def snapshot(final: bool = False) -> None:
        metrics.write([{"t": time.time(), "elapsed": time.time() - t_run,
                        "units_done": len(on_disk), "units_total": n_total,
                        "units_reused": reused, "units_failed": len(queue.failures),
                        "retries": queue.retried,
                        "in_flight": sum(len(h) for h in queue.held.values()),
                        "workers": per_worker, "final": final}])

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
            "units_reused": reused, "retries": queue.retried, "stolen": queue.stolen,
            "tool_s": tool_s,
            "per_worker": per_worker, "writers": writer_stats,
            "journal_s": journal.append_seconds, "failures": queue.failures}
