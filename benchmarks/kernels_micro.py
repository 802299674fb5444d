"""Micro-benchmarks of the k-mer and Jaccard kernels on the 16 ragout genomes, and of the PRNU
residual on a 512² photograph (one core, no Ray).

Why: the engine's tile sizes and the design's cost model rest on these per-item and per-pair
costs, and the choices inside the kernels (radix sort instead of np.sort/np.unique, a branch-free
merge, galloping; scipy.fft for the residual's transforms) are only justified by them.  Best of ``--repeat`` runs, after a warm-up call
(numba compilation or cache load excluded).

    .venv/bin/python benchmarks/kernels_micro.py [--data DIR] [--k 21] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import sys
import time

import numpy as np

from _record import out_path, write  # noqa: E402

from pairflow.kernels.jaccard import _gallop_count, _merge_count, intersection_counts, jaccard_from_counts  # noqa: E402
from pairflow.kernels.kmers import canonical_kmers  # noqa: E402
from pairflow.operators.sequences import file_stem, read_records  # noqa: E402


def best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from pairflow.apps.data import data_dir
    ap.add_argument("--data", default=data_dir())  # PAIRFLOW_DATA, else the user data dir
    ap.add_argument("--k", type=int, default=21)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--unique", action="store_true", help="also time np.unique (seconds per genome)")
    ap.add_argument("--json", "--out", dest="json",
                    help="write the results here (default: benchmarks/out/kernels_micro.json)")
    ap.add_argument("--quick", action="store_true", help="--repeat 1, the 4 V. cholerae genomes")
    a = ap.parse_args()
    started = time.time()
    if a.quick:
        a.repeat = 1
    group = "V.Cholerae" if a.quick else "*"  # --quick: the 4 V. cholerae genomes
    paths = sorted(glob.glob(f"{a.data}/root/usr/share/doc/ragout/examples/{group}/references/*.fasta.gz"))
    if not paths:
        sys.exit(f"no genomes under {a.data}; run pairflow data install")
    res: dict = {"k": a.k, "genomes": {}}

    canonical_kmers([b"ACGT" * 10], a.k)  # compile or load the numba cache
    canonical_kmers([b"ACGT" * 10], a.k, sort="numpy")
    items = {}
    print(f"{'genome':<22}{'Mb':>6}{'read s':>9}{'kmers s':>9}{'np.sort s':>10}{'k-mers':>11}")
    for p in paths:
        name = file_stem(p)
        t_read, recs = best(lambda: read_records(p), 1)
        seqs = [r.sequence for r in recs]
        t_radix, ks = best(lambda: canonical_kmers(seqs, a.k), a.repeat)
        t_np, ks2 = best(lambda: canonical_kmers(seqs, a.k, sort="numpy"), 2)
        assert np.array_equal(ks.hashes, ks2.hashes)
        mb = sum(map(len, seqs)) / 1e6
        row = {"mb": mb, "read_s": t_read, "kmers_s": t_radix, "kmers_npsort_s": t_np, "n_kmers": int(ks.hashes.size)}
        if a.unique:
            codes = canonical_kmers(seqs, a.k).hashes
            t_u, _ = best(lambda: np.unique(np.concatenate([codes, codes])), 1)
            row["np_unique_s"] = t_u
            print(f"  np.unique of {2 * codes.size:,} codes: {t_u:.2f} s")
        res["genomes"][name] = row
        items[name] = ks.hashes
        print(f"{name:<22}{mb:>6.2f}{t_read:>9.3f}{t_radix:>9.3f}{t_np:>10.3f}{ks.hashes.size:>11,}")

    names = list(items)
    sizes = {n: items[n].size for n in names}
    near = min(names, key=lambda n: abs(sizes[n] - 2.7e6))
    pairs = {
        "related (2 S. aureus)": ("COL", "N315"),
        "unrelated (S. aureus vs V. cholerae)": ("COL", "H1"),
    }
    res["pairs"] = {}
    for label, (x, y) in pairs.items():
        if x not in items or y not in items:
            x, y = near, names[0]
        A, B = items[x], items[y]
        t_m, c = best(lambda: _merge_count(A, B), a.repeat)
        t_g, c2 = best(lambda: _gallop_count(A, B), a.repeat)
        t_i, c3 = best(lambda: np.intersect1d(A, B, assume_unique=True).size, 2)
        assert c == c2 == c3
        res["pairs"][label] = {"sizes": [int(A.size), int(B.size)], "merge_ms": t_m * 1e3, "gallop_ms": t_g * 1e3,
                               "intersect1d_ms": t_i * 1e3}
        print(f"{label}: {A.size:,} vs {B.size:,} k-mers: merge {t_m*1e3:.1f} ms, gallop {t_g*1e3:.1f} ms, "
              f"np.intersect1d {t_i*1e3:.0f} ms ({t_i/t_m:.0f}x)")

    try:
        from pairflow.kernels.backend import namespace_for, to_device

        xp = namespace_for("torch-cpu")
        A, B = (to_device(xp, items[n], "torch-cpu") for n in (near, names[0]))
        t_t, _ = best(lambda: intersection_counts([A], [B], xp=xp), 2)
        res["torch_cpu_searchsorted_ms"] = t_t * 1e3
        print(f"torch-cpu searchsorted, one pair: {t_t*1e3:.0f} ms")
    except ImportError:
        pass

    arrs = [items[n] for n in names]
    mask = np.triu(np.ones((len(arrs), len(arrs)), bool), 1)
    t_all, inter = best(lambda: intersection_counts(arrs, arrs, mask=mask), 1)
    j = jaccard_from_counts(inter, [x.size for x in arrs], [x.size for x in arrs])
    t_k = sum(r["kmers_s"] for r in res["genomes"].values())
    res["all_pairs"] = {"n": len(arrs), "pairs": int(mask.sum()), "merge_s": t_all, "kmers_s": t_k}
    print(f"all {int(mask.sum())} pairs of {len(arrs)} genomes: merges {t_all:.2f} s + k-mer sets {t_k:.2f} s "
          f"(one core); max off-diagonal J = {j[mask].max():.3f}")
    res["prnu"] = prnu_residual(a.repeat)
    write(out_path("kernels_micro.json", a.json), res, "kernels_micro", quick=a.quick, started=started)


def prnu_residual(repeat: int) -> dict:
    """One 512² grey photograph (scikit-image's camera, the forensics app's data): its noise
    residual and kept half spectrum (``noise_residual`` + ``prepare``, forensics' parse), as
    the kernels run it on numpy (compiled loops, scipy.fft: ``kernels.prnu._compiled_path``,
    ``kernels.backend.fft_of``) and as the array-API code alone does (numpy.fft), taken in turn
    (this VM's speed drifts within minutes); both give the same residual to rounding."""
    import pairflow.kernels.backend as backend
    import pairflow.kernels.prnu as prnu
    from skimage import data as images
    xp = backend.namespace_for("cpu")
    image = np.asarray(images.camera(), dtype=np.float64)[:512, :512]
    compiled, fft_of = prnu._compiled_path, prnu.fft_of

    def parse(kernels: bool):
        prnu._compiled_path = compiled if kernels else (lambda a: False)
        prnu.fft_of = fft_of if kernels else (lambda xp: np.fft)
        try:
            return prnu.prepare(xp, prnu.noise_residual(xp, image))
        finally:
            prnu._compiled_path, prnu.fft_of = compiled, fft_of
    assert np.abs(parse(True) - parse(False)).max() < 1e-9  # (and the loops compiled, warm)
    times: dict = {True: [], False: []}
    for _ in range(max(repeat, 5)):
        for kernels in times:
            times[kernels].append(best(lambda: parse(kernels), 1)[0])
    out = {"side": 512, "compiled_scipy_fft_ms": min(times[True]) * 1e3,
           "array_code_numpy_fft_ms": min(times[False]) * 1e3}
    out["speedup"] = out["array_code_numpy_fft_ms"] / out["compiled_scipy_fft_ms"]
    print(f"PRNU residual + half spectrum of a 512² photo: {out['compiled_scipy_fft_ms']:.1f} ms "
          f"(compiled loops, scipy.fft) against {out['array_code_numpy_fft_ms']:.1f} ms (the "
          f"array-API code, numpy.fft): {out['speedup']:.2f}x")
    return out


if __name__ == "__main__":
    main()
