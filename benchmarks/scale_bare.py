"""The synthetic app's bare baseline for ``benchmarks/scale.py``: its compare as a plain numpy
script on 2 threads, nothing of pairflow imported (``bare_synthetic``)."""
from __future__ import annotations

import threading
import time

import numpy as np


def bare_synthetic(n: int, max_pairs: float = 1e9, rows: int = 64, cols: int = 4096,
                   seed: int = 1) -> dict:
    """The synthetic compare as a plain numpy script, no pairflow: value(i, j) over chunks of
    ``rows`` x ``cols`` pairs (cache-sized) on 2 threads (numpy releases the GIL), in two
    forms: the app's expression ``(i * 7919 + j) % 1000`` in int64, and the same values from
    residues (``a_i + b_j``, less 1000 where it reaches 1000) in int32, in place, which the
    compiled kernel also uses; the faster is the baseline (``compare``). Over all pairs i < j
    of the ``n`` items when there are at most ``max_pairs`` of them, else over chunks drawn
    at random from that triangle (the same n: indices as large) until ``max_pairs``."""
    from concurrent.futures import ThreadPoolExecutor
    total = n * (n - 1) // 2
    if total <= max_pairs:  # every pair: rows r0.., columns from r0 (a chunk's i >= j
        # cells, next to the diagonal, are computed but not counted)
        chunks = [(r0, c0, min(n, r0 + rows) - r0, min(n, c0 + cols) - c0)
                  for r0 in range(0, n, rows) for c0 in range(r0, n, cols)]
        pairs, mode = total, "all pairs"
    else:
        rng = np.random.default_rng(seed)
        count = int(max_pairs // (rows * cols))
        r0 = rng.integers(0, n - rows - cols, count)
        c0 = r0 + rows + (rng.random(count) * (n - cols - rows - r0)).astype(np.int64)
        chunks = [(int(a), int(b), rows, cols) for a, b in zip(r0, c0)]
        pairs, mode = count * rows * cols, f"{count:,} chunks drawn from the triangle"

    def int64(chunk):
        r, c, nr, nc = chunk
        li = np.arange(r, r + nr, dtype=np.int64)[:, None]
        ri = np.arange(c, c + nc, dtype=np.int64)[None, :]
        return int(((li * 7919 + ri) % 1000)[0, 0])

    local = threading.local()

    def int32(chunk):
        r, c, nr, nc = chunk
        if getattr(local, "v", None) is None:
            local.v = np.empty((rows, cols), np.int32)
            local.m = np.empty((rows, cols), bool)
        v, m = local.v[:nr, :nc], local.m[:nr, :nc]
        a = ((np.arange(r, r + nr, dtype=np.int64) * 7919) % 1000).astype(np.int32)
        b = (np.arange(c, c + nc, dtype=np.int64) % 1000).astype(np.int32)
        np.add(a[:, None], b[None, :], out=v)
        np.greater_equal(v, 1000, out=m)
        np.subtract(v, 1000, out=v, where=m)
        return int(v[0, 0])
    out = {"rows": n, "mode": mode, "chunk": [rows, cols], "threads": 2}
    with ThreadPoolExecutor(2) as pool:
        for name, fn in (("int64", int64), ("int32", int32)):
            list(pool.map(fn, chunks[:4]))  # warm
            t0 = time.perf_counter()
            list(pool.map(fn, chunks))
            dt = time.perf_counter() - t0
            out[name] = {"seconds": dt, "pairs": pairs, "pairs_per_s": pairs / dt}
    best = max(("int64", "int32"), key=lambda k: out[k]["pairs_per_s"])
    out["compare"] = dict(out[best], form=best)
    return out
