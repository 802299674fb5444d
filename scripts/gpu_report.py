"""The GPU section of benchmarks/RESULTS.md from scripts/gpu_check.py's JSON (issue 64's
acceptance: device, driver, each kernel against its numpy oracle, throughput against the CPU
kernel and the hardware's limit, the engine run's R and tier counters).

    python scripts/gpu_report.py benchmarks/out/gpu.json     # Markdown on stdout

Every figure comes from the JSON; nothing here measures.
"""
from __future__ import annotations

import json
import sys


def _f(x, digits: int = 3) -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _table(head: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_f(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _result(parts: dict, name: str):
    p = parts.get(name) or {}
    if "result" in p:
        return p["result"], None
    return None, p.get("error") or p.get("skipped") or "not run"


def markdown(report: dict) -> str:
    parts, meta = report["parts"], report["meta"]
    out = [f"## GPU device check — `scripts/gpu_check.py --device {meta['device']}`"
           + (" (quick)" if meta.get("quick") else ""),
           f"All comparisons equal: {_f(report['ok'])}; {report['seconds']:.0f} s in all."]
    env, why = _result(parts, "env")
    if env:
        gpu = env.get("gpu") or {}
        out.append(f"Device: {gpu.get('name', 'CPU (torch-cpu)')}, "
                   f"{_f(gpu.get('memory_GiB'))} GiB, {gpu.get('multiprocessors', '—')} SMs; "
                   f"nvidia-smi: {env.get('nvidia_smi', '—')}; torch "
                   f"{env['modules'].get('torch', {}).get('version', '—')} (CUDA "
                   f"{env.get('torch_cuda')}), CuPy "
                   f"{env['modules'].get('cupy', {}).get('version', 'absent')}; "
                   f"{env['cpus']} CPU threads.")
    lim, why = _result(parts, "limits")
    if lim:
        out.append("Hardware limits measured in the run: " + ", ".join(
            f"{k} {_f(lim.get(k))}" for k in ("memory_GBps", "bf16_TFLOPs", "int8_TOPs",
                                               "fp64_TFLOPs")) + ".")
    checks, why = _result(parts, "checks")
    out.append("### Kernels against numpy")
    out.append(_table(["kernel", "backend", "tolerance", "max abs diff", "equal"],
                      [[c["kernel"], c["backend"], c["tolerance"], c.get("max_abs"),
                        c["equal"] if "error" not in c else f"error: {c['error'][:80]}"]
                       for c in checks]) if checks else f"not run: {why}")
    eng, why = _result(parts, "engine")
    out.append("### Engine, in-process, one device actor")
    if eng:
        rows = []
        for name, r in eng["runs"].items():
            l1 = r["tiers"]["L1"]
            rows.append([name, r["device"], r["in_flight"], r["R"], l1["hits"], l1["misses"],
                         l1["evictions"], r["l1_budget_bytes"], r["tiles"]])
        out.append(_table(["run", "device", "in flight", "R", "L1 hits", "L1 misses",
                           "L1 evictions", "L1 budget (bytes)", "tiles"], rows))
        out.append(f"Top-k equal to the CPU run's: {_f(eng['result_equal'])}; R equal: "
                   f"{_f(eng['R_equal'])}; tier counters equal: {_f(eng['tiers_equal'])}.")
    else:
        out.append(f"not run: {why}")
    reads, why = _result(parts, "reads")
    out.append("### Reads, k = 5, each read's 10 best")
    out.append(_table(["reads", "pairs", "CPU pairs/s", "device pairs/s", "vs CPU",
                       "share of the binding limit", "binds", "form", "equal"],
                      [[r["n"], r["pairs"], r["cpu_pairs_per_s"], r["device_pairs_per_s"],
                        r["vs_cpu"], r["share_of_limit"], r["binds"], r["form"], r["equal"]]
                       for r in reads]) if reads else f"not run: {why}")
    f, why = _result(parts, "forensics")
    out.append("### Forensics, NCC and PCE of every pair")
    out.append(_table(["form", "pairs/s", "vs CPU", "share of its limit", "equal"],
                      [["numpy, every core", f["cpu_pairs_per_s"], 1.0, None, True],
                       ["matrix products (engine's)", f["matmul"]["pairs_per_s"],
                        f["matmul"]["vs_cpu"], f["matmul"]["share_of_fp64_limit"],
                        f["matmul"]["equal"]],
                       ["batched FFT", f["fft"]["pairs_per_s"], f["fft"]["vs_cpu"],
                        f["fft"]["share_of_memory_limit"], f["fft"]["equal"]]])
               + f"\n\n{f['n']} images of {f['side']}², {f['pairs']} pairs."
               if f else f"not run: {why}")
    return "\n\n".join(out) + "\n"


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        sys.stdout.write(markdown(json.load(fh)))
