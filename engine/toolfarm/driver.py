"""``pairflow.farm(...)``: an unmodified program over every unit of its input, on every core.

check the spec -> open the run directory (or resume it: same work, same cut) -> run the first
units in this process, measuring the tool (``sizing.UnitSizer``: with ``unit_records="auto"`` a
ladder of sizes, their outputs kept) -> cut the rest (``units.py``) -> in-process or Ray, by
the rule all engines follow (``engine.run.executor_choice.choose``: a farm's tools are child
processes, so on one machine threads of this process use every core and the farm stays
in-process whatever its size) -> hand out units (``dispatch.UnitQueue``: ``local.py`` on threads,
``raydrive.py`` on Ray actors) while journaling what the writers report on disk -> close the
writers, move the files to their final names -> summary.

Where a cluster is named, Ray is up already, or ``executor="ray"``, Ray starts first and the
ladder runs on its workers instead.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
import time
from dataclasses import dataclass, field, fields

from ..errors import InputError, PairflowError
from ..run.executor_choice import INPROCESS_MAX_S, choose, ray_is_up
from ..run.journal import check_same_work
from ..run.rundir import FARM_UNITS, JOURNAL, RunRecorder, read_json, write_json
from .index import replay
from .segment import fasta_stats, plan_volumes
from .shared import file_digest, prepare_node, scratch_dir
from .sizing import UnitSizer, threads_per_worker
from .spec import FarmSpec, placeholders
from .units import (AUTO, INPUTS_DIR, Unit, cut_units, decompressed, read_unit, record_names,
                    scan_records, take_unit)
from .writer import PARTIAL, finalize

SPEC_FIELDS = {f.name for f in fields(FarmSpec)}
FALLBACK_UNIT_RECORDS = 50  # auto units when the ladder's first step fails
ALL_CORES_LAST = 2          # units a worker at the end of a run passes every core (local.py)


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
         executor: str = "auto", inprocess_max_s: float = INPROCESS_MAX_S,
         **spec_fields) -> FarmResult:
    """Run ``spec`` (or a spec built from the keyword arguments named as ``FarmSpec``'s
    fields: ``program=[...]``, ``inputs=[...]``, ``shared={...}`` ...) over its inputs.

    ``resume=True`` with ``run_dir``: units whose every stream is journaled and still matches
    its CRC are kept, the rest run again. Units that fail after their retries are reported in
    ``result.failures`` (with the tool's stderr and exit status) while the others complete.

    ``scratch``: where each node keeps its copy of the shared files (default
    ``$PAIRFLOW_SCRATCH`` or the system temp directory), removed at the end unless
    ``keep_scratch``. ``executor``: ``"auto"`` (in-process unless a cluster is named or Ray is
    up in this process; ``inprocess_max_s`` is kept for the rule's other engines),
    ``"inprocess"`` or ``"ray"``; ``workers_per_node``: fewer workers than cores, each passing its share of the
    cores to the tool as ``{threads}``."""
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
                    flush_s, name, executor, inprocess_max_s)
    except KeyboardInterrupt:
        recorder.rundir.set_status("interrupted", error="interrupted")
        raise
    except BaseException as exc:
        recorder.failed(f"{type(exc).__name__}: {exc}" if not isinstance(
            exc, (PairflowError, InputError)) else str(exc))
        raise


def _run(spec, recorder, old_meta, digests, digest_s, progress, workers_per_node, ray_address,
         num_cpus, object_store_mb, scratch, keep_scratch, flush_bytes, flush_s, name,
         executor, inprocess_max_s) -> FarmResult:
    t_start = time.time()
    phases = {"digest_s": digest_s}
    input_digests, shared_digests = digests
    farm_digest = spec.digest(input_digests, shared_digests)
    fingerprint = spec.fingerprint(input_digests, shared_digests)
    t0 = time.perf_counter()
    # compressed inputs: cut by byte ranges, so decompressed once into the run directory
    # (a resume finds them there); the fingerprint keeps the files the user named
    spec.inputs = [decompressed(p, recorder.file(INPUTS_DIR)) for p in spec.inputs]
    phases["decompress_s"] = time.perf_counter() - t0
    # the rule of small all-pairs runs; an estimate of 0 asks whether anything forces Ray
    first_kind = choose(executor, ray_address, 0.0, inprocess_max_s, ray_is_up())
    cpus = int(num_cpus or os.cpu_count() or 1)
    scratch_root = scratch or os.environ.get("PAIRFLOW_SCRATCH") or tempfile.gettempdir()
    result_dir = recorder.rundir.result_dir

    t0 = time.perf_counter()
    plan = read_json(recorder.file(FARM_UNITS)) if old_meta is not None else None
    attempt = int(old_meta.get("attempt", 0)) + 1 if old_meta is not None else 0
    offsets = None
    if plan is not None:  # the first attempt's cut (a resume refuses a changed spec)
        records = plan["records"]
    else:  # a fresh run, or one killed before its cut was saved
        offsets = [scan_records(p, spec.cut, spec.pattern, spec.pattern_ends)
                   for p in spec.inputs]
        records = sum(len(o) - 1 for o in offsets)
        if records == 0:
            raise InputError(spec.inputs[0], "no records to run the tool on")
    values = {"input_records": str(records)}
    volumes = None
    if spec.volumes > 1:
        offs, letters = fasta_stats(spec.shared[spec.segment])
        volumes = plan_volumes(offs, letters, spec.volumes)
        values.update(db_letters=str(sum(letters)), db_records=str(len(letters)))
    phases["cut_s"] = time.perf_counter() - t0

    local, state, probed, kind = None, None, [], "ray"
    try:
        if first_kind == "inprocess":
            t0 = time.perf_counter()
            local = _prepare_here(spec, shared_digests, volumes, values, scratch_root,
                                  farm_digest)
            phases["prepare_s"] = time.perf_counter() - t0
            if plan is None:
                t0 = time.perf_counter()
                threads = threads_per_worker(cpus, _units_at_most(spec, offsets, records),
                                             workers_per_node)
                plan, probed = _first_units(spec, offsets, records, threads,
                                            _step_here(spec, local, values, threads), recorder,
                                            local_drive=True)
                phases["probe_s"] = time.perf_counter() - t0
        units = [Unit.from_list(u) for u in plan["units"]] if plan is not None else None
        done, resumed = set(), None
        if old_meta is not None and units is not None and offsets is None:
            t0 = time.perf_counter()
            done, resumed = replay(recorder.file(JOURNAL), result_dir, spec.streams, len(units))
            phases["replay_s"] = time.perf_counter() - t0
        if first_kind == "inprocess":
            # a farm's tools are child processes: threads of this process use every core
            kind = choose(executor, ray_address, _work_s(plan, units, done, probed, cpus),
                          inprocess_max_s, ray_is_up(), parallel_here=True)
        if kind == "ray":
            from . import raydrive
            left = len(units) - len(done) - len(probed) if units else records
            state = raydrive.start(spec, shared_digests, volumes, values, scratch_root,
                                   farm_digest, result_dir, attempt, left, workers_per_node,
                                   ray_address, num_cpus, object_store_mb, flush_bytes,
                                   flush_s)
            phases.update(state["phases"])
            if plan is None:  # Ray first: the ladder on its workers
                t0 = time.perf_counter()
                threads = list(state["threads"].values())
                plan, probed = _first_units(spec, offsets, records, threads,
                                            lambda step: raydrive.run_step(state, step),
                                            recorder)
                units = [Unit.from_list(u) for u in plan["units"]]
                phases["probe_s"] = time.perf_counter() - t0
            infos, nodes = state["infos"], len(state["nodes"])
            threads = list(state["threads"].values())
        else:
            threads = threads_per_worker(cpus, max(1, len(units) - len(done) - len(probed)),
                                         workers_per_node)
            infos = [{"worker": f"n0-w{i}", "node": "local", "host": "localhost",
                      "pid": os.getpid(), "threads": t,
                      "fetched_bytes": local["fetched_bytes"] if i == 0 else 0}
                     for i, t in enumerate(threads)]
            nodes = 1
        node_bytes: dict[str, int] = {}
        for i in infos:  # what each node fetched from the object store (once per node)
            node_bytes[i["node"]] = node_bytes.get(i["node"], 0) + i.get("fetched_bytes", 0)
        recorder.write_meta({"kind": "farm", "app": name, "program": spec.program,
                             "streams": list(spec.streams), "units_total": len(units),
                             "records_total": plan["records"], "attempt": attempt,
                             "fingerprint": fingerprint, "farm_digest": farm_digest,
                             "workers": infos, "executor": kind, "nodes": nodes,
                             "volumes": spec.volumes, "started": t_start})
        recorder.running()
        if kind == "ray":
            stats = raydrive.drive(spec, units, done, probed, state, recorder, progress,
                                   attempt)
        else:
            from .local import drive_local
            stats = drive_local(spec, units, done, probed, local["paths"], local["scratch"],
                                values, threads, result_dir, recorder, progress, attempt,
                                flush_bytes, flush_s, plan.get("all_cores_last", 0))
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
                   "records_total": plan["records"], "workers": len(threads),
                   "threads": threads, "nodes": nodes, "attempt": attempt,
                   "resumed": resumed, "failures": failures, "units_failed": len(failures),
                   "outputs": outputs, "phases": phases, "scratch": scratch_root,
                   "unit_records": plan.get("unit_records"),
                   "unit_choice": plan.get("unit_choice"), **stats}
        recorder.write_summary(summary)
        recorder.finished()
        return FarmResult(recorder.path, summary, failures)
    finally:
        if state is not None:
            raydrive.stop(state, scratch_root, farm_digest, keep_scratch)
        if local is not None and not keep_scratch:
            shutil.rmtree(local["scratch"], ignore_errors=True)


def _prepare_here(spec, shared_digests, volumes, values, scratch_root, farm_digest) -> dict:
    """This machine's copy of the shared files, prepared (``makeblastdb``...) as a node's."""
    scratch = scratch_dir(scratch_root, farm_digest, "local")
    shared = {n: {"path": p, "digest": shared_digests[n], "ref": p}
              for n, p in spec.shared.items()}

    def read(path):
        with open(path, "rb") as fh:
            return fh.read()
    prep = prepare_node(scratch, shared, spec.prepare, volumes, spec.segment, read, values)
    return {"scratch": scratch, "paths": prep["paths"],
            "fetched_bytes": prep.get("fetched_bytes", 0)}


def _step_here(spec, local: dict, values: dict, threads: list[int]):
    """The sizing ladder's step in this process: unit i on a thread of worker i, all at once."""
    from .local import run_unit_here

    def step(units: list[Unit]) -> list[dict]:
        def one(i: int) -> dict:
            return run_unit_here(spec, spec.inputs, units[i], local["paths"], local["scratch"],
                                 {**values, "threads": str(threads[i])}, f"n0-w{i}")
        with ThreadPoolExecutor(len(units)) as pool:
            return list(pool.map(one, range(len(units))))
    return step


def _units_at_most(spec, offsets, records: int) -> int:
    if spec.cut == "file":
        return len(offsets)
    if spec.unit_records == AUTO:
        return records
    return -(-records // spec.unit_records)


def _first_units(spec, offsets, records: int, threads: list[int], run_step,
                 recorder, local_drive: bool = False) -> tuple[dict, list[dict]]:
    """Run the first units, one per worker at a time, measuring the tool: with
    ``unit_records="auto"`` the ladder of ``sizing.UnitSizer`` until it chooses, else one
    step of the given size (its rate says whether the run is small). Then cut the rest where
    they end, and save the whole cut (a resume reuses it). Returns the plan and the results
    of the units that ran (their outputs kept: units of the run)."""
    per_file = spec.cut == "file"
    auto = spec.unit_records == AUTO and not per_file
    size_given = 1 if per_file else (None if auto else spec.unit_records)
    total_bytes = sum(o[-1] - o[0] for o in offsets)
    sizer = UnitSizer(records, len(threads), total_bytes / records)
    pos, units, probed, error, consumed = (0, 0), [], [], None, 0
    while True:
        size = sizer.next_step(records - consumed) if auto else \
            (size_given if not units else None)
        if size is None:
            break
        step = []
        for _ in threads:
            got = take_unit(offsets, pos, len(units) + len(step), size, per_file)
            if got is None:
                break
            step.append(got[0])
            pos = got[1]
        if not step:
            break
        for u, res in zip(step, run_step(step)):
            consumed += u.records
            if res["ok"]:
                probed.append(res)
                sizer.observe(size, u.records, u.end - u.start, res["seconds"],
                              res.get("cpu_s"))
            elif error is None:  # run again with the rest (and reported if it fails there)
                error = {"unit": u.uid, "error": res.get("error", "")[:500]}
        units.extend(step)
        if error is not None:
            break
    if auto:
        n = sizer.choose() if sizer.steps else FALLBACK_UNIT_RECORDS
    else:
        n = size_given
    tail = spec.tail_units if spec.tail_units is not None else \
        sizer.tail_units(n, 2 * len(threads)) if auto else 2 * len(threads)
    # long units and a tool with a thread option: the last units run with every core of the
    # node instead of being cut smaller (see local.drive_local), and the rest is cut into
    # units of one size (no short remainder last, where the all-core units balance the end)
    all_cores = ALL_CORES_LAST * len(threads) if local_drive and auto and tail and \
        spec.tail_units is None and len(threads) > 1 and uses_threads(spec) else 0
    if all_cores:
        tail = 0
        left = records - consumed
        n = max(1, -(-left // max(1, -(-left // n))))
    units += cut_units(offsets, n, tail, per_file=per_file, start=pos, uid0=len(units))
    rate = sizer.rate_at(n) if sizer.steps else None
    choice = {"unit_records": n, "auto": auto, "records_per_s": rate, "error": error,
              "tail_units": tail, "all_cores_last": all_cores,
              **({"curve": sizer.report()} if auto else {})}
    plan = {"streams": list(spec.streams), "inputs": spec.inputs, "records": records,
            "unit_records": n, "records_per_s": rate, "unit_choice": choice,
            "all_cores_last": all_cores,
            "units": [u.to_list() for u in units]}
    write_json(recorder.file(FARM_UNITS), plan)
    return plan, probed


def uses_threads(spec) -> bool:
    """The program passes the tool its thread option (``{threads}``)."""
    return any(f == "threads" for t in spec.program for f in placeholders(t))


def _work_s(plan: dict, units, done: set, probed: list, cpus: int) -> float | None:
    """Seconds of tool work per CPU left, at the rate the first units ran."""
    rate = plan.get("records_per_s")
    if not rate:
        return None
    ran = done | {r["unit"] for r in probed}
    left = sum(u.records for u in units if u.uid not in ran)
    return left / rate / max(1, cpus)
