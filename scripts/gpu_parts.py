"""The correctness parts of scripts/gpu_check.py: every kernel's device path against its numpy
path on the same inputs, and the engine's in-process run with a device actor against a CPU run.

Tolerances are the ones each kernel's tests document: counts exact (bitset, merge, the product
form's top-k); composition distances 1e-12 absolute (tests/unit/test_composition.py, numpy
against torch); residuals 1e-9 absolute, NCC 1e-6 absolute and PCE 1e-6 relative
(tests/unit/test_prnu.py on photos); registration 1e-9 (tests/unit/test_registration.py).
"""
from __future__ import annotations

import time

import numpy as np

from pairflow.engine import BasePairApp


def _record(kernel: str, backend: str, tolerance: str, fn) -> dict:
    """Run one comparison: ``fn`` returns (max_abs, max_rel, equal, size)."""
    t0 = time.time()
    out = {"kernel": kernel, "backend": backend, "tolerance": tolerance}
    try:
        max_abs, max_rel, equal, size = fn()
        out.update(max_abs=float(max_abs), max_rel=float(max_rel), equal=bool(equal),
                   size=size)
    except Exception as exc:
        import traceback
        out.update(equal=False, error=repr(exc), traceback=traceback.format_exc())
    out["seconds"] = time.time() - t0
    return out


def _diff(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise ValueError(f"shape {got.shape} against {want.shape}")
    d = np.abs(got - want)
    return float(d.max(initial=0.0)), float((d / np.maximum(np.abs(want), 1e-300)).max(
        initial=0.0))


def _exact(got, want):
    a, r = _diff(got, want)
    return a, r, a == 0.0, int(np.asarray(want).size)


def _within(got, want, atol=0.0, rtol=0.0):
    a, r = _diff(got, want)
    ok = bool(np.all(np.abs(np.asarray(got, float) - np.asarray(want, float))
                     <= atol + rtol * np.abs(np.asarray(want, float))))
    return a, r, ok, int(np.asarray(want).size)


def _proteomes(seed: int, count: int, proteins: int) -> list[list[bytes]]:
    rng = np.random.default_rng(seed)
    letters = np.frombuffer(b"ACDEFGHIKLMNPQRSTVWYXB", np.uint8)
    weights = rng.random(len(letters)) ** 2
    weights[-2:] = 0.002
    weights /= weights.sum()
    return [[bytes(rng.choice(letters, int(rng.integers(20, 400)), p=weights))
             for _ in range(proteins)] for _ in range(count)]


def _cloud(rng, sites: int = 8, per_site: int = 12) -> np.ndarray:
    """A ring of sites with localisations scattered about each (a nuclear-pore-like particle)."""
    angles = np.arange(sites) * 2 * np.pi / sites
    centres = 50.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
    pts = np.repeat(centres, per_site, axis=0) + rng.normal(0, 3.0, (sites * per_site, 2))
    return pts - pts.mean(axis=0)


def checks(backends: list[str], quick: bool, log) -> list[dict]:
    """Every kernel with a device path, on each backend, against numpy on the same inputs."""
    from pairflow.kernels.backend import namespace_for, to_device, to_numpy
    from pairflow.kernels.bitset import bitset_intersections, kmer_bitsets
    from pairflow.kernels.bitset_mm import jaccard_topk_mm
    from pairflow.kernels.composition import composition_vector, cv_distance_matrix, encode_proteins
    from pairflow.kernels.jaccard import intersection_counts
    from pairflow.kernels.kmers import canonical_kmers
    from pairflow.kernels.prnu import ncc_pce, noise_residual, prepare
    from pairflow.kernels.prnu_fft import ncc_pce_fft
    from pairflow.kernels.registration import center, register
    from scripts.gpu_throughput import camera_images, cpu_reads_topk, cpu_threads, \
        simulate_reads
    npx = namespace_for("cpu")
    reads = simulate_reads(300 if quick else 2000, seed=5)
    rows = {k: kmer_bitsets(reads, k) for k in (5, 7)}
    sets = [canonical_kmers([r], 21).hashes for r in reads[:40 if quick else 80]]
    proteomes = _proteomes(2, 3 if quick else 5, 20 if quick else 60)
    cv_k = 4 if quick else 5
    residues = [encode_proteins(p) for p in proteomes]
    cpu_vectors = [composition_vector(npx, r, cv_k) for r in residues]
    full = np.ones((len(residues), len(residues)), bool)
    want_cv = cv_distance_matrix(npx, cpu_vectors, cpu_vectors, full, dense=False)
    side = 64 if quick else 256
    shots = camera_images(4, side, seed=9)
    want_res = [noise_residual(np, x) for x in shots]
    width = side
    want_spec = [prepare(np, r) for r in want_res]
    want_ncc, want_pce = ncc_pce(np, want_spec, want_spec, width)
    rng = np.random.default_rng(4)
    clouds = []
    for angle in (0.3, 2.1, 4.0):
        a = _cloud(rng)
        c, s = np.cos(angle), np.sin(angle)
        b = a @ np.array([[c, -s], [s, c]]).T + rng.normal(0, 1.0, a.shape)
        clouds.append((a, center(np, b[rng.random(len(b)) > 0.15])))
    want_reg = [register(np, a, b, 2.0) for a, b in clouds]
    want_top = cpu_reads_topk(rows[5], cpu_threads())
    out = []
    for backend in backends:
        xp = namespace_for(backend)

        def dev(a, xp=xp, backend=backend):
            return to_device(xp, a, backend)

        for k in (5, 7):
            out.append(_record(
                f"bitset_intersections k={k}", backend, "exact",
                lambda k=k, dev=dev, xp=xp: _exact(bitset_intersections(
                    dev(rows[k].view(np.int64)), dev(rows[k].view(np.int64)), xp=xp),
                    bitset_intersections(rows[k], rows[k]))))
        out.append(_record("bitset_mm.jaccard_topk_mm k=5 top-10", backend, "exact",
                           lambda dev=dev, xp=xp: _exact(np.stack(jaccard_topk_mm(
                               xp, dev(rows[5].view(np.int64)), 10)), np.stack(want_top[:2]))))
        out.append(_record("jaccard.intersection_counts (merge) k=21", backend, "exact",
                           lambda dev=dev, xp=xp: _exact(intersection_counts(
                               [dev(s.view(np.int64)) for s in sets],
                               [dev(s.view(np.int64)) for s in sets], xp=xp),
                               intersection_counts(sets, sets))))

        def cv(dev=dev, xp=xp):
            vs = [composition_vector(xp, dev(r), cv_k) for r in residues]
            return _within(cv_distance_matrix(xp, vs, vs, full, dense=False), want_cv,
                           atol=1e-12)
        out.append(_record(f"composition.cv_distance_matrix k={cv_k}", backend,
                           "abs 1e-12", cv))
        res = {}

        def residual(dev=dev, xp=xp, res=res):
            res["r"] = [noise_residual(xp, dev(x)) for x in shots]
            return _within(np.stack([to_numpy(r) for r in res["r"]]), np.stack(want_res),
                           atol=1e-9)
        out.append(_record(f"prnu.noise_residual {side}x{side}", backend, "abs 1e-9",
                           residual))

        def pairs(form, dev=dev, xp=xp, res=res):
            spec = [prepare(xp, r) for r in res.get("r") or [dev(x) for x in want_res]]
            ncc, pce = (ncc_pce if form == "matmul" else ncc_pce_fft)(xp, spec, spec, width)
            a1, r1, ok1, n1 = _within(to_numpy(ncc), want_ncc, atol=1e-6)
            a2, r2, ok2, _ = _within(to_numpy(pce), want_pce, rtol=1e-6, atol=1e-6)
            return max(a1, a2), max(r1, r2), ok1 and ok2, 2 * n1
        out.append(_record("prnu.ncc_pce (matmul form)", backend,
                           "ncc abs 1e-6, pce rel 1e-6", lambda: pairs("matmul")))
        out.append(_record("prnu_fft.ncc_pce_fft (batched FFT form)", backend,
                           "ncc abs 1e-6, pce rel 1e-6", lambda: pairs("fft")))

        def reg(dev=dev, xp=xp):
            got = [register(xp, dev(a), dev(b), 2.0) for a, b in clouds]
            return _within(np.array(got), np.array(want_reg), atol=1e-9, rtol=1e-9)
        out.append(_record("registration.register", backend, "abs 1e-9 + rel 1e-9", reg))
        for r in out[-9:]:
            log(f"  {r['kernel']} on {r['backend']}: equal={r['equal']} "
                f"max_abs={r.get('max_abs')} {r.get('error', '')}")
    return out


class ReadsApp(BasePairApp):
    """Reads in memory (no files): item i is read i's k-mer bitset row; the device holds it as a
    tensor (or a numpy row on the CPU); a tile's J through the device's kernel."""

    name = "gpu_check_reads"

    def __init__(self, n: int, k: int = 5):
        from pairflow.kernels.bitset import kmer_bitsets
        from scripts.gpu_throughput import simulate_reads
        self.n, self.k = n, k
        self.rows = kmer_bitsets(simulate_reads(n, seed=3), k)
        self.seen: set = set()  # (device argument, where the tile's arrays were)

    def keys(self):
        return [f"read{i:06d}" for i in range(self.n)]

    def parse(self, key, raw):
        return self.rows[int(key[4:])].copy()

    def preprocess(self, key, item, device):
        if device == "cpu":
            return item
        from pairflow.kernels.backend import namespace_for, to_device
        return to_device(namespace_for(device), item.view(np.int64), device)

    def compare(self, left, right, mask, device):
        from pairflow.kernels.backend import namespace_for, to_numpy
        from pairflow.kernels.bitset import bitset_intersections, bitset_sizes
        from pairflow.kernels.jaccard import jaccard_from_counts
        xp = None if device == "cpu" else namespace_for(device)
        self.seen.add((device, str(getattr(left[0], "device", "numpy"))))
        inter = bitset_intersections(left, right, mask=mask, xp=xp)
        sl = bitset_sizes(np.stack([to_numpy(x) for x in left]))
        sr = bitset_sizes(np.stack([to_numpy(x) for x in right]))
        return {"similarity": jaccard_from_counts(inter, sl, sr)}

    def fields(self):
        return {"similarity": "float64"}

    def describe(self):
        return {"app": self.name, "n": self.n, "k": self.k}


TIER_KEYS = ("hits", "misses", "evictions", "bytes_in")


def engine(device: str, quick: bool, runs_root: str) -> dict:
    """The in-process executor, one device actor, on the CPU and then on ``device`` (cuda, or
    torch-cpu in CI): the same leaf, the same L1 budget in bytes (real device memory on a GPU,
    small enough that the L1 evicts), a TopK(10) sink (Parquet: no zarr). The device run's top-k,
    R and tier counters must equal the CPU run's. Both with one tile under way per actor
    (``in_flight=1``): then the hand-out order, and so every counter, does not depend on timing
    (with a prefetch racing the compute, 25 of 3,600 L1 lookups moved between hit and miss from
    one run to the next). A third run on the device with ``in_flight=2`` (loads beside the
    compute) must give the same top-k; its counters are reported."""
    from pairflow.engine.pairs.driver import allpairs
    n, leaf, l1_items = (300, 25, 120) if quick else (3000, 100, 480)
    target = "cuda" if device == "cuda" else "torch-cpu"
    runs = {}
    for name, dev, in_flight in (("cpu", "cpu", 1), ("device", target, 1),
                                 ("device_prefetch", target, 2)):
        app = ReadsApp(n)
        budget = l1_items * int(app.rows[0].nbytes)
        peak0 = None
        if dev == "cuda":
            import torch
            torch.cuda.reset_peak_memory_stats()
            peak0 = torch.cuda.memory_allocated()
        res = allpairs(app=app, sink={"type": "topk", "k": 10, "field": "similarity"},
                       devices=dev, executor="inprocess", actors_per_node=1, leaf_items=leaf,
                       in_flight=in_flight, device_cache_bytes=budget, progress=False,
                       wait=True, runs_root=runs_root)
        s = res.summary
        top = res.topk.sort_values(["qi", "rank"]).reset_index(drop=True)
        runs[name] = {"device": dev, "in_flight": in_flight, "R": s["R"], "loads": s["loads"],
                      "n_actors": s["n_actors"], "executor": s["executor"],
                      "tiles": s["tiles_total"], "leaf": s["leaf_items"],
                      "l1_budget_bytes": budget, "tiers": s["tiers"],
                      "compute_s": s["compute_s"], "seen": sorted(map(list, app.seen)),
                      "_top": top}
        if dev == "cuda":
            import torch
            runs[name]["cuda_peak_bytes_over_start"] = torch.cuda.max_memory_allocated() - peak0
    tops = {name: r.pop("_top") for name, r in runs.items()}
    cpu, got = runs["cpu"], runs["device"]

    def same_top(a, b):
        return a.shape == b.shape and bool((a[["qi", "ti", "rank"]].values ==
                                            b[["qi", "ti", "rank"]].values).all()) and \
            bool((a["score"].values == b["score"].values).all())
    result_equal = same_top(tops["cpu"], tops["device"]) and \
        same_top(tops["cpu"], tops["device_prefetch"])
    tiers_equal = all(cpu["tiers"][t][key] == got["tiers"][t][key]
                      for t in ("L1", "L2") for key in TIER_KEYS) and \
        cpu["tiers"]["source"]["loads"] == got["tiers"]["source"]["loads"]
    on_device = all(d == target and (target != "cuda" or w.startswith("cuda"))
                    for r in (got, runs["device_prefetch"]) for d, w in r["seen"])
    return {"runs": runs, "target": target, "topk_rows": int(len(tops["cpu"])),
            "result_equal": result_equal, "R_equal": cpu["R"] == got["R"],
            "tiers_equal": tiers_equal, "evictions": got["tiers"]["L1"]["evictions"],
            "on_device": on_device,
            "equal": result_equal and cpu["R"] == got["R"] and tiers_equal and on_device and
            got["tiers"]["L1"]["evictions"] > 0 and got["executor"] == "inprocess"}
