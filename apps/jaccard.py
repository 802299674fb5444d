"""Exact Jaccard similarity of k-mer sets, all pairs: the genome-comparison app.

An item is a genome (one file, all its records; ``item=file``) or one record (``item=record``).
``parse`` turns a file into its sorted unique canonical k-mers (compiled scan + radix sort), the
host item the object store shares zero-copy; ``compare`` counts |A∩B| for a whole tile with a
compiled merge (or ``searchsorted`` on a torch device); ``postprocess`` gives similarity
J = |A∩B| / |A∪B|, distance 1 - J and the intersection size.
"""
from __future__ import annotations

import numpy as np

from engine import BasePairApp, InputError, url_digest
from kernels.jaccard import intersection_counts, jaccard_from_counts
from kernels.kmers import canonical_kmers
from operators.sequences import SequenceCatalog

_ACGT = np.zeros(256, bool)
_ACGT[list(b"ACGTacgt")] = True


def _has_valid_kmer(seqs, k: int) -> bool:
    """Is there a window of k A/C/G/T letters? (the pre-flight: no k-mer set is built)"""
    for seq in seqs:
        ok = _ACGT[np.frombuffer(bytes(seq), np.uint8)]
        if len(ok) < k:
            continue
        bounds = np.concatenate([[-1], np.flatnonzero(~ok), [len(ok)]])
        if (np.diff(bounds) - 1).max() >= k:
            return True
    return False


class JaccardApp(BasePairApp):
    name = "jaccard"

    def __init__(self, urls: list[str], k: int = 21, item: str = "file"):
        if not isinstance(k, int) or not 1 <= k <= 31:
            raise ValueError(f"k must be an integer from 1 to 31 (k-mers are 2-bit packed "
                             f"in 64 bits), got {k!r}")
        if item not in ("file", "record"):
            raise ValueError(f"item must be 'file' or 'record', got {item!r}")
        if not urls:
            raise InputError("inputs", "no input files")
        self.k, self.item = k, item
        self.urls = list(urls)
        self.catalog = SequenceCatalog(self.urls, item)
        self._keys = self.catalog.keys()

    def keys(self):
        return self._keys

    def url(self, key):
        return self.catalog.fetch_url(key)

    def _sequences(self, key: str, raw: bytes | None) -> list:
        return [r.sequence for r in self.catalog.records(key, raw)]

    def check(self, key, raw):
        if not _has_valid_kmer(self._sequences(key, raw), self.k):
            url, _, record = self.catalog.location(key)
            raise InputError(url,
                             f"no valid {self.k}-mer (every window of {self.k} letters holds a "
                             f"letter other than A/C/G/T, or the sequence is shorter than k)",
                             record=record)

    def warmup(self, device):
        """Load the compiled kernels before the first tile, unless every input is a small local
        file: then every item parses and compares on the kernels' numpy path (no numba)."""
        device = "cpu" if device == "host" else device
        if not self._small_inputs():
            from kernels.lazyjit import compile_now
            compile_now("kernels.kmers", "kernels.jaccard")
        one = self.preprocess("warmup", {"kmers": canonical_kmers([b"ACGTACGTAC" * 4],
                                                                  self.k).hashes}, device)
        self.compare([one], [one], np.ones((1, 1), bool), device)

    def _small_inputs(self) -> bool:
        """Every input an uncompressed local file, all of them together at most ``SMALL_BASES``
        bytes (so no item has more bases than the numpy path takes)."""
        import os
        from kernels.kmers import SMALL_BASES
        if any("://" in u or not os.path.isfile(u) or u.endswith((".gz", ".bz2", ".xz"))
               for u in self.urls):
            return False
        return sum(os.path.getsize(u) for u in self.urls) <= SMALL_BASES

    def parse(self, key, raw):
        kset = canonical_kmers(self._sequences(key, raw), self.k)
        if len(kset.hashes) == 0:
            self.check(key, raw)
        return {"kmers": kset.hashes, "skipped": int(kset.skipped_windows),
                "windows": int(kset.n_windows)}

    def item_nbytes(self, item):
        return int(item["kmers"].nbytes) if isinstance(item, dict) else super().item_nbytes(item)

    def preprocess(self, key, item, device):
        kmers = item["kmers"]
        if device == "cpu":
            return kmers
        from kernels.backend import namespace_for, to_device
        xp = namespace_for(device)
        return to_device(xp, kmers.view(np.int64), device)

    def compare(self, left, right, mask, device):
        xp = None
        if device != "cpu":
            from kernels.backend import namespace_for
            xp = namespace_for(device)
        inter = intersection_counts(left, right, mask=mask, xp=xp)
        size_l = np.array([len(x) for x in left], dtype=np.int64)
        size_r = np.array([len(x) for x in right], dtype=np.int64)
        sim = jaccard_from_counts(inter, size_l[:, None], size_r[None, :])
        return {"similarity": sim, "distance": 1.0 - sim, "intersection": inter}

    def fields(self):
        return {"similarity": "float64", "distance": "float64", "intersection": "int64"}

    def describe(self):
        return {"app": self.name, "k": self.k, "item": self.item, "n_inputs": len(self.urls)}

    def fingerprint(self):
        """What decides the result: a resumed run with a different fingerprint is refused."""
        return {"app": self.name, "k": self.k, "item": self.item,
                "inputs": {u: url_digest(u) for u in self.urls}}


def build(cfg):
    """The app and its sinks from the Hydra config (``app=jaccard``)."""
    from apps.data import expand_inputs
    from engine import DenseMatrix, make_sink
    urls = expand_inputs(cfg.data.inputs)
    app = JaccardApp(urls, k=int(cfg.data.k), item=str(cfg.data.item))
    sink_cfg = dict(cfg.sink)
    if sink_cfg.get("type") == "dense":
        sink_cfg.setdefault("diagonal", {"similarity": 1.0, "distance": 0.0})
        sink = DenseMatrix(**{k: v for k, v in sink_cfg.items() if k != "type"})
    else:
        sink_cfg.setdefault("field", "similarity")
        sink = make_sink(sink_cfg)
    return app, [sink]


def report(result) -> str:
    s = result.summary
    tiers = s["tiers"]
    lines = [f"app=jaccard n={s['n_items']} k={s['app_info']['k']} pairs={s['pairs_total']} "
             f"tiles={s['tiles_total']} leaf={s['leaf_items']}",
             f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s)",
             f"R = {s['R']:.3f} loads/item (model bound {s['bound_R']:.3f}, host tier holds "
             f"{s['host_cache_items']} items)"]
    for tier in ("L1", "L2"):
        t = tiers.get(tier, {})
        lines.append(f"{tier}: hits {t.get('hits', 0)}  misses {t.get('misses', 0)}  "
                     f"bytes in {t.get('bytes_in', 0)}  evictions {t.get('evictions', 0)}")
    lines.append(f"source loads: {tiers['source']['loads']}")
    for name, path in s["outputs"].items():
        lines.append(f"{name}: {path}")
    return "\n".join(lines)
