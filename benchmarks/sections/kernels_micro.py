"""The "Kernel micro-benchmarks: k-mers and Jaccard" section of RESULTS.md, from `benchmarks/out/kernels_micro.json`
(written by `benchmarks/kernels_micro.py`); its explanation is `kernels_micro.md` beside this file."""
from __future__ import annotations

from report import num, table


def section(d: dict, ctx) -> list[str]:
    rows = [[k, num(r["mb"]), num(r["read_s"], "s"), num(r["kmers_s"], "s"),
             num(r["kmers_npsort_s"], "s"), f"{r['n_kmers']:,}"]
            for k, r in (d.get("genomes") or {}).items()]
    out = [table(["genome", "Mb", "read", "k-mers (radix)", "k-mers (np.sort)", "k-mers"], rows)]
    pairs = d.get("pairs") or {}
    if pairs:
        out.append(table(["pair", "sizes", "merge", "gallop", "np.intersect1d"],
                         [[k, " vs ".join(f"{x:,}" for x in r["sizes"]),
                           num(r["merge_ms"], "ms"), num(r["gallop_ms"], "ms"),
                           num(r["intersect1d_ms"], "ms")] for k, r in pairs.items()]))
    pr = d.get("prnu")
    if pr:
        out.append(f"PRNU residual and half spectrum of a {pr['side']}² photo (forensics' parse): "
                   f"{num(pr['compiled_scipy_fft_ms'], 'ms')} with the compiled loops and "
                   f"scipy.fft, {num(pr['array_code_numpy_fft_ms'], 'ms')} by the array-API code "
                   f"and numpy.fft ({num(pr['speedup'])}x).")
    return out
