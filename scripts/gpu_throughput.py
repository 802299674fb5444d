"""The throughput part of scripts/gpu_check.py: the hardware's limits, and reads at k = 5 and the
forensics compares on the device against the numpy kernels on every core of the same machine.

Each part returns a dict of figures (seconds, pairs per second, the ratio to the CPU, the share
of the limit that binds) and whether the device's answer equals the CPU's. Timings on a GPU are
taken after a warm-up call of the same shapes (cuBLAS, cuFFT and the caching allocator start on
their first call) and end with a synchronisation.
"""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

TOP_K = 10
READ_K = 5            # k-mer length of the reads part (canonical: 512-bit rows)
READ_LENGTH = 100
GENOME = 48_502       # the lambda phage's length: reads of one small genome overlap often
CPU_BLOCK = 2048      # reads per block of the CPU kernel's triangle (as benchmarks/many_small)


def sync(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def timed(fn, device: str, repeat: int = 1):
    """(result of the last call, best seconds of ``repeat`` calls), after one warm-up call."""
    out = fn()
    sync(device)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return out, best


def _blas_one_thread():
    """A context in which numpy's BLAS uses one thread (threads of our own share the cores)."""
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(1)
    except ImportError:
        import contextlib
        return contextlib.nullcontext()


# -- hardware limits ----------------------------------------------------------------------

def limits(device: str, quick: bool) -> dict:
    """Memory bandwidth (a copy, bytes read plus written), and the bf16, int8 and float64 matrix
    product rates, measured on ``device`` (torch: cuda, or the CPU for torch-cpu)."""
    import torch
    dev = "cuda" if device == "cuda" else "cpu"
    out: dict = {"device": dev}
    n_copy = (1 << 22) if quick else ((1 << 30) if dev == "cuda" else (1 << 26))
    src = torch.ones(n_copy, dtype=torch.float32, device=dev)
    dst = torch.empty_like(src)
    _, s = timed(lambda: dst.copy_(src), device, repeat=5)
    out["memory_GBps"] = 2 * src.numel() * 4 / s / 1e9
    del src, dst
    side = 256 if quick else (8192 if dev == "cuda" else 1024)
    for name, dtype in (("bf16_TFLOPs", torch.bfloat16), ("fp64_TFLOPs", torch.float64)):
        a = torch.ones((side, side), dtype=dtype, device=dev)
        _, s = timed(lambda: a @ a, device, repeat=3)
        out[name] = 2 * side ** 3 / s / 1e12
    a = torch.ones((side, side), dtype=torch.int8, device=dev)
    try:
        _, s = timed(lambda: torch._int_mm(a, a), device, repeat=3)
        out["int8_TOPs"] = 2 * side ** 3 / s / 1e12
    except RuntimeError as exc:  # no int8 product here: the figure is missing, said why
        out["int8_TOPs"] = None
        out["int8_error"] = str(exc)[:300]
    out["matrix_side"] = side
    out["copy_bytes"] = 2 * n_copy * 4
    return out


# -- reads at k = 5 -------------------------------------------------------------------------

def simulate_reads(n: int, seed: int = 0) -> list[bytes]:
    """``n`` reads of READ_LENGTH from both strands of one random genome, 1 % substitutions."""
    rng = np.random.default_rng(seed)
    bases = np.frombuffer(b"ACGT", np.uint8)
    genome = rng.integers(0, 4, GENOME)
    starts = rng.integers(0, GENOME - READ_LENGTH, n)
    reads = genome[starts[:, None] + np.arange(READ_LENGTH)[None, :]]
    flip = rng.random(n) < 0.5
    reads[flip] = 3 - reads[flip, ::-1]
    errors = rng.random(reads.shape) < 0.01
    reads[errors] = rng.integers(0, 4, int(errors.sum()))
    return [bytes(row) for row in bases[reads]]


def cpu_reads_topk(rows: np.ndarray, threads: int):
    """Each read's TOP_K best J among the others by the CPU kernel (kernels.bitset's
    ``bitset_jaccard_topk``, both sides of each upper-triangle block) on ``threads`` threads,
    merged with ties to the lower index: (j, count) arrays, and the kernel's seconds."""
    from pairflow.kernels.bitset import bitset_jaccard_topk
    n = rows.shape[0]
    edges = list(range(0, n, CPU_BLOCK)) + [n]
    blocks = [(edges[a], edges[a + 1], edges[b], edges[b + 1])
              for a in range(len(edges) - 1) for b in range(a, len(edges) - 1)]

    def one(block):
        r0, r1, c0, c1 = block
        mask = np.triu(np.ones((r1 - r0, c1 - c0), bool), 1) if r0 == c0 else None
        i, j, v, col = bitset_jaccard_topk(rows[r0:r1], rows[c0:c1], mask, TOP_K, rows=True,
                                           cols=True)
        # a row's candidate (i, j) is query i's; a column's is query j's, with target i
        return np.where(col, j + c0, i + r0), np.where(col, i + r0, j + c0), v

    bitset_jaccard_topk(rows[:64], rows[:64], None, TOP_K, rows=True, cols=True)  # compiled
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(one, blocks))
    seconds = time.perf_counter() - t0
    # a cell lies in one block and is a candidate of its row, of its column, or of both (as
    # two queries): no (query, target) comes twice. One sort of 64-bit keys: the query, then J
    # descending (J's float32 bits: exact and order-keeping for rows of at most 2,048 bits,
    # whose distinct J differ by >= 1/2048²), then the lower target
    if n >= 1 << 17 or rows.shape[1] > 32:
        raise ValueError("the merge's keys hold at most 131,071 reads of 2,048 bits")
    qi = np.concatenate([p[0] for p in parts]).astype(np.uint64)
    tj = np.concatenate([p[1] for p in parts]).astype(np.uint64)
    jbits = np.concatenate([p[2] for p in parts]).astype(np.float32).view(np.uint32)
    key = (qi << np.uint64(47)) | ((np.uint64(1 << 30) - jbits.astype(np.uint64))
                                  << np.uint64(17)) | tj
    key.sort()
    qi = (key >> np.uint64(47)).astype(np.int64)
    tj = (key & np.uint64((1 << 17) - 1)).astype(np.int64)
    k = min(TOP_K, n - 1)
    take = np.searchsorted(qi, np.arange(n))[:, None] + np.arange(k)[None, :]
    best = tj[take]
    counts = _pair_counts(rows, np.repeat(np.arange(n), k), best.ravel()).reshape(n, k)
    return best, counts, seconds


def _pair_counts(rows: np.ndarray, qi: np.ndarray, tj: np.ndarray) -> np.ndarray:
    """|A ∩ B| of the pairs (qi, tj) by numpy popcounts (a check apart from the kernels)."""
    both = rows[qi] & rows[tj]
    return np.unpackbits(both.view(np.uint8), axis=1).sum(axis=1).astype(np.int64)


def reads(device: str, n: int, lim: dict, threads: int, old_path: bool) -> dict:
    """Reads at k = 5, each read's TOP_K: the device's product form against the CPU kernel on
    ``threads`` cores; ``old_path``: also the engine's GPU path today (kernels.bitset's
    ``bitset_intersections`` on the device: float32 product, every count back to the host)."""
    import torch
    from pairflow.kernels.backend import namespace_for, to_device
    from pairflow.kernels.bitset import bitset_intersections, kmer_bitsets
    from pairflow.kernels.bitset_mm import intersections_mm, jaccard_topk_mm, product_form, unpack_bits
    rows = kmer_bitsets(simulate_reads(n), READ_K)
    pairs = n * (n - 1) // 2
    cpu_j, cpu_c, cpu_s = cpu_reads_topk(rows, threads)
    xp = namespace_for(device)
    drows = to_device(xp, rows.view(np.int64), device)
    free = torch.cuda.mem_get_info()[0] if device == "cuda" else 2 << 30
    block_bytes = int(min(free * 0.3, 24 << 30))
    u = unpack_bits(xp, drows)
    form, form_error = product_form(xp, u), None
    if form == "int8":  # where torch's int8 product refuses, the float32 one, said why
        try:
            intersections_mm(xp, u[:40], u[:64], "int8")
        except RuntimeError as exc:
            form, form_error = "float32", str(exc)[:300]
    (dev_j, dev_c), dev_s = timed(lambda: jaccard_topk_mm(
        xp, drows, TOP_K, block_bytes=block_bytes, form=form), device)
    block = max(1, min(n, block_bytes // (24 * n)))

    def products():
        for r0 in range(0, n, block):
            intersections_mm(xp, u[r0:r0 + block], u, form)
    _, product_s = timed(products, device)
    bits = int(u.shape[1])
    full = n * n  # the product form computes both halves of the square
    out = {"n": n, "pairs": pairs, "bits": bits, "form": form, "form_error": form_error,
           "block_rows": block,
           "cpu_threads": threads, "cpu_s": cpu_s, "cpu_pairs_per_s": pairs / cpu_s,
           "device_s": dev_s, "device_pairs_per_s": pairs / dev_s,
           "product_s": product_s, "vs_cpu": cpu_s / dev_s,
           "equal": bool(np.array_equal(dev_j, cpu_j) and np.array_equal(dev_c, cpu_c))}
    rate = lim.get("int8_TOPs") if form == "int8" else lim.get("bf16_TFLOPs")
    int_min_s = 2.0 * full * bits / (rate * 1e12) if rate else None
    mem_min_s = 8.0 * full / (lim["memory_GBps"] * 1e9)  # the int32 counts written and read
    bound = max(x for x in (int_min_s, mem_min_s) if x is not None)
    out.update(int_limit_s=int_min_s, memory_limit_s=mem_min_s,
               binds="integer" if int_min_s and int_min_s >= mem_min_s else "memory",
               share_of_limit=bound / dev_s)
    if old_path:
        rows_list = drows
        _, old_s = timed(lambda: bitset_intersections(rows_list, rows_list, xp=xp), device)
        out.update(engine_path_s=old_s, engine_path_pairs_per_s=pairs / old_s)
    return out


# -- forensics -----------------------------------------------------------------------------

def camera_images(n: int, side: int, cameras: int = 4, seed: int = 1) -> list[np.ndarray]:
    """``n`` noise images, shot ``i`` by camera ``i % cameras`` (a faint shared pattern)."""
    rng = np.random.default_rng(seed)
    patterns = [rng.normal(size=(side, side)) for _ in range(cameras)]
    return [0.3 * patterns[i % cameras] + rng.normal(size=(side, side)) for i in range(n)]


def forensics(device: str, n: int, side: int, lim: dict, threads: int, leaf: int) -> dict:
    """NCC/PCE of every pair of ``n`` images (the upper triangle): the numpy kernel in tiles of
    ``leaf`` on ``threads`` threads, against the device's matrix-product form (the engine's
    kernel, tiles of ``leaf`` one after another) and its batched-FFT form (rows against the
    columns from their own on)."""
    from pairflow.kernels.backend import namespace_for, to_device, to_numpy
    from pairflow.kernels.prnu import PEAK_NEIGHBOURHOOD, ncc_pce, prepare
    from pairflow.kernels.prnu_fft import ncc_pce_fft
    images = camera_images(n, side)
    pairs = n * (n - 1) // 2
    cpu_items = [prepare(np, x) for x in images]
    edges = list(range(0, n, leaf)) + [n]
    tiles = [(edges[a], edges[a + 1], edges[b], edges[b + 1])
             for a in range(len(edges) - 1) for b in range(a, len(edges) - 1)]

    def run_tiles(items, xp, out_n, out_p):
        for r0, r1, c0, c1 in tiles:
            mask = np.triu(np.ones((r1 - r0, c1 - c0), bool), 1) if r0 == c0 else None
            a, p = ncc_pce(xp, items[r0:r1], items[c0:c1], side, mask=mask)
            out_n[r0:r1, c0:c1], out_p[r0:r1, c0:c1] = to_numpy(a), to_numpy(p)

    cpu_ncc, cpu_pce = np.zeros((n, n)), np.zeros((n, n))

    def cpu_tile(t):
        r0, r1, c0, c1 = t
        mask = np.triu(np.ones((r1 - r0, c1 - c0), bool), 1) if r0 == c0 else None
        a, p = ncc_pce(np, cpu_items[r0:r1], cpu_items[c0:c1], side, mask=mask)
        cpu_ncc[r0:r1, c0:c1], cpu_pce[r0:r1, c0:c1] = a, p

    ncc_pce(np, cpu_items[:2], cpu_items[:2], side)
    with _blas_one_thread():
        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(cpu_tile, tiles))
        cpu_s = time.perf_counter() - t0
    xp = namespace_for(device)
    dev_items = [prepare(xp, to_device(xp, x, device)) for x in images]
    mm_ncc, mm_pce = np.zeros((n, n)), np.zeros((n, n))
    _, mm_s = timed(lambda: run_tiles(dev_items, xp, mm_ncc, mm_pce), device)
    fft_ncc, fft_pce = np.zeros((n, n)), np.zeros((n, n))

    def fft_rows():
        step = max(1, leaf)
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            a, p = ncc_pce_fft(xp, dev_items[r0:r1], dev_items[r0:], side,
                               batch_bytes=(4 << 30) if device == "cuda" else (256 << 20))
            fft_ncc[r0:r1, r0:], fft_pce[r0:r1, r0:] = to_numpy(a), to_numpy(p)
    _, fft_s = timed(fft_rows, device)
    upper = np.triu(np.ones((n, n), bool), 1)

    def agree(ncc, pce):
        d_ncc = float(np.abs(ncc - cpu_ncc)[upper].max())
        d_pce = float((np.abs(pce - cpu_pce) / np.maximum(np.abs(cpu_pce), 1.0))[upper].max())
        return {"max_abs_ncc": d_ncc, "max_rel_pce": d_pce,
                "equal": d_ncc <= 1e-6 and d_pce <= 1e-6}

    s2 = PEAK_NEIGHBOURHOOD ** 2
    half = side // 2 + 1
    mm_flops = 8.0 * s2 * side * half * pairs  # complex multiply-adds of the shift sums
    fft_bytes = 8.0 * (2 * side * side + 4 * side * half) * n * n / 2  # maps and products
    same = upper & (np.arange(n)[:, None] % 4 == np.arange(n)[None, :] % 4)
    return {"n": n, "side": side, "pairs": pairs, "leaf": leaf, "cpu_threads": threads,
            "cpu_s": cpu_s, "cpu_pairs_per_s": pairs / cpu_s,
            "matmul": {"s": mm_s, "pairs_per_s": pairs / mm_s, "vs_cpu": cpu_s / mm_s,
                       "share_of_fp64_limit": mm_flops / (lim["fp64_TFLOPs"] * 1e12) / mm_s,
                       **agree(mm_ncc, mm_pce)},
            "fft": {"s": fft_s, "pairs_per_s": pairs / fft_s, "vs_cpu": cpu_s / fft_s,
                    "share_of_memory_limit": fft_bytes / (lim["memory_GBps"] * 1e9) / fft_s,
                    **agree(fft_ncc, fft_pce)},
            "same_camera_min_pce": float(cpu_pce[same].min()) if same.any() else None,
            "other_camera_max_pce": float(cpu_pce[upper & ~same].max())}


def cpu_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
