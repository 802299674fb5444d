"""Tool farms from the command line: ``pairflow app=farm farm=blastp farm.queries=q.fa ...``
(configs/farm/ holds one preset per tool) and ``pairflow gather RUN_DIR STREAM [-o FILE]``.

Thin wiring: the preset's ``command + args + positionals`` is the program, ``input`` the files
cut into units, the rest goes to ``pairflow.farm`` as it is.
"""
from __future__ import annotations

import sys

resumes = True  # run() hands cfg.resume to pairflow.farm, which resumes from its journal
SPEC_KEYS = ("cut", "unit_records", "feed", "streams", "prepare", "retries", "timeout_s",
             "volumes", "segment", "volume_args", "merge")


def spec_options(cfg) -> dict:
    """``pairflow.farm``'s spec keywords from the ``farm`` group."""
    from omegaconf import OmegaConf

    from pairflow.apps.data import expand_inputs
    f = OmegaConf.to_container(cfg.farm, resolve=True)
    program = list(f["command"]) + [str(a) for a in f.get("args") or []] + \
        list(f.get("positionals") or [])
    options = {k: f[k] for k in SPEC_KEYS if f.get(k) is not None}
    options["prepare"] = [list(p) for p in options.get("prepare", [])]
    return dict(program=program, inputs=expand_inputs(f["input"]),
                shared={k: str(v) for k, v in (f.get("shared") or {}).items()}, **options)


def run(cfg, run_dir: str | None = None):
    """The Hydra entry point (``pairflow app=farm farm=...``)."""
    from omegaconf import OmegaConf

    from pairflow.apps.options import executor_options, runtime_options
    from pairflow.engine import farm
    return farm(**spec_options(cfg), run_dir=run_dir, runs_root=str(cfg.runs_root),
                name=f"farm-{cfg.farm.name}", resume=bool(cfg.resume),
                progress=bool(cfg.progress), config_dump=OmegaConf.to_container(cfg, resolve=True),
                **runtime_options(cfg), **executor_options(cfg))


def report(result) -> str:
    s = result.summary
    lines = [f"app=farm units={s['units_done']}/{s['units_total']} records={s['records_total']} "
             f"workers={s['workers']} nodes={s['nodes']} ({s.get('executor', 'ray')}) "
             f"wall {s['wall_s']:.2f} s "
             f"(tool {s['tool_s']:.2f} s), retries={s['retries']}"]
    if s.get("resumed"):
        r = s["resumed"]
        lines.append(f"resumed: {r['reused']} units kept, {r['rerun']} rerun "
                     f"({len(r['corrupt_units'])} failed their CRC)")
    for f in s["failures"]:
        names = ", ".join(f["names"][:5]) + (" ..." if len(f["names"]) > 5 else "")
        lines.append(f"FAILED unit {f['unit']} (records {f['records'][0]}-{f['records'][1]} of "
                     f"{f['file']}{': ' + names if names else ''}) after {f['attempts']} "
                     f"attempts: {f['error']}")
        if f.get("stderr"):
            lines.append("  stderr: " + f["stderr"].strip().replace("\n", "\n          ")[-800:])
    streams = ", ".join(s["outputs"])
    lines.append(f"run directory: {result.run_dir}")
    lines.append(f"streams: {streams}; in input order: pairflow gather {result.run_dir} "
                 f"{next(iter(s['outputs']), 'stdout')} -o FILE")
    return "\n".join(lines)


def gather_main(argv: list[str]) -> int:
    """``pairflow gather RUN_DIR STREAM [-o FILE]``."""
    import argparse

    from pairflow.engine import PairflowError, gather
    parser = argparse.ArgumentParser(
        prog="pairflow gather",
        description="Write one output stream of a farm run in input order, checking every "
                    "block's CRC32 (a failing block: resume the run to rerun its unit).")
    parser.add_argument("run_dir")
    parser.add_argument("stream", help="stdout, or a named stream such as tblout")
    parser.add_argument("-o", "--output", help="write here (complete or not at all); "
                                               "default: standard output")
    args = parser.parse_args(argv)
    try:
        report = gather(args.run_dir, args.stream, args.output)
    except PairflowError as exc:
        print(f"pairflow: error: {exc}", file=sys.stderr)
        return 2
    if report["missing"]:
        print(f"pairflow gather: {len(report['missing'])} unit(s) have no output (failed or not "
              f"run yet): {report['missing'][:20]}", file=sys.stderr)
        return 1
    return 0
