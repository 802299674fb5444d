"""Exact Jaccard similarity of k-mer sets, all pairs: genomes, and reads by the thousand.

An item is a genome (one file, all its records; ``item=file``) or one record (``item=record``).
Two kernels give the same |A∩B|, the app picks by k and the sets' size (``kernel=auto``):

* ``merge``: an item is its sorted unique k-mers (compiled scan + radix sort, shared zero-copy by
  the object store) and ``compare`` merges every pair of a tile in one compiled loop (or runs
  ``searchsorted`` on a torch device). Any k up to 31; the kernel for genomes.
* ``bitset`` (k <= 8): an item is a row of bits, one per possible k-mer, and a pair is the
  popcount of an AND (``kernels/bitset.py``); short reads at k = 5 or 7 run at memory speed.

Record items are built a block of a file's records at a time, once per process (``_FileItems``):
a read's k-mer set takes microseconds, so building it alone, a Python call per read, would cost
more than comparing it. Records without a valid k-mer (all windows hold an N, or short) are
skipped and listed in the run directory (``skipped_records.tsv``) or, with ``on_bad_record=fail``,
stop the run in the pre-flight naming each one; ``auto`` skips them in FASTQ files (read sets
always hold a few) and fails on them elsewhere.
``postprocess`` gives similarity J = |A∩B| / |A∪B|, distance 1 - J and the intersection size.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import threading
from collections.abc import Mapping

import numpy as np

from pairflow.engine import (BasePairApp, InputError, ThresholdReduction, TileCandidates, TopKReduction,
                    url_digest)
from pairflow.kernels.jaccard import intersection_counts, jaccard_from_counts
from pairflow.kernels.kmers import MAX_BITSET_K, canonical_kmers, record_kmer_sets
from pairflow.operators.sequences import SequenceCatalog

class _OnFirstUse:
    """A module imported on its first attribute: ``kernels.bitset`` loads numba at import, which
    a small run of the merge kernel (numpy until its kernels compile) must not pay."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        import importlib
        return getattr(importlib.import_module(self._name), attr)


_bits = _OnFirstUse("pairflow.kernels.bitset")

_ACGT = np.zeros(256, bool)
_ACGT[list(b"ACGTacgt")] = True

KERNELS = ("auto", "bitset", "merge")
ON_BAD_RECORD = ("auto", "skip", "fail")
SKIPPED_FILE = "skipped_records.tsv"  # in the run directory: one line per skipped record


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


class _FileItems:
    """The items of records (every record of one file, or a pack's), built in one compiled
    pass: bitset rows (an (n, words) array) or k-mer sets (values and offsets), and each
    record's set size."""

    def __init__(self, seqs: list, k: int, canonical: bool, kernel: str):
        self.kernel = kernel
        self.used = 0  # when the process last asked for this file (_FILE_USES)
        if kernel == "bitset":
            self.bits = _bits.kmer_bitsets(seqs, k, canonical)
            self.sizes = _bits.bitset_sizes(self.bits)
        else:
            self.values, self.offsets = record_kmer_sets(seqs, k, canonical)
            self.sizes = np.diff(self.offsets)

    def item(self, i: int) -> np.ndarray:
        if self.kernel == "bitset":
            return self.bits[i].copy()  # a row of its own: a view would pin the whole file
        return self.values[self.offsets[i]:self.offsets[i + 1]].copy()

    def items(self, index: np.ndarray):
        """The items of records ``index``: bitset rows as one array, or a list of k-mer
        arrays (copies: a view would pin the whole file)."""
        if self.kernel == "bitset":
            return self.bits[index]
        return [self.values[self.offsets[i]:self.offsets[i + 1]].copy() for i in index]

    @property
    def nbytes(self) -> int:
        return int(self.bits.nbytes if self.kernel == "bitset" else self.values.nbytes)


_FILES: "dict[tuple, _FileItems]" = {}  # per process, a few files, by (url, k, ...)
_FILE_USES = itertools.count()  # stamps each file's last use: the least recent goes first
_FILES_KEPT = 4
FILE_BLOCK = 8192  # records whose items are built together (``_file_items``)
_FILES_LOCK = threading.Lock()


def _set_sizes(seqs: list, k: int, canonical: bool, block: int = 65_536) -> np.ndarray:
    """Each sequence's count of distinct k-mers, a block of sequences at a time: the k-mer
    arrays of 10^6 reads at once are 1.2 GB."""
    out = [np.diff(record_kmer_sets(seqs[b:b + block], k, canonical)[1])
           for b in range(0, len(seqs), block)]
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def _bad_record_problem(k: int) -> str:
    return (f"no valid {k}-mer (every window of {k} letters holds a letter other than A/C/G/T, "
            f"or the sequence is shorter than k)")


class JaccardApp(BasePairApp):
    name = "jaccard"

    def __init__(self, urls: list[str], k: int = 21, item: str = "file", kernel: str = "auto",
                 canonical: bool = True, on_bad_record: str = "auto"):
        if not isinstance(k, int) or not 1 <= k <= 31:
            raise ValueError(f"k must be an integer from 1 to 31 (k-mers are 2-bit packed "
                             f"in 64 bits), got {k!r}")
        if item not in ("file", "record"):
            raise ValueError(f"item must be 'file' or 'record', got {item!r}")
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
        if kernel == "bitset" and k > MAX_BITSET_K:
            raise ValueError(f"kernel=bitset takes k up to {MAX_BITSET_K} (a set is a "
                             f"row of 4^k bits), got k={k}; use kernel=merge or auto")
        if on_bad_record not in ON_BAD_RECORD:
            raise ValueError(f"on_bad_record must be one of {', '.join(ON_BAD_RECORD)}, "
                             f"got {on_bad_record!r}")
        if not urls:
            raise InputError("inputs", "no input files")
        self.k, self.item, self.canonical = k, item, bool(canonical)
        self.on_bad_record = on_bad_record
        self.urls = list(urls)
        # a record without sequence is one more record without a valid k-mer (skipped or named)
        self.catalog = SequenceCatalog(self.urls, item, allow_empty=item == "record")
        self.skipped: list[tuple[str, int, str, int]] = []  # file, index, name, length
        self.kernel = "merge" if kernel == "auto" else kernel
        if item == "record":
            self._keys = self._record_keys(kernel)
        else:
            self._keys = self.catalog.keys()

    def _record_keys(self, kernel: str) -> list[str]:
        """Every record's key, less the records skipped for having no valid k-mer; on the way
        the kernel ``auto`` stands for, from k and the sets' mean size."""
        keys, sizes, skip = [], [], {}
        for url in self.urls:
            records = self.catalog.file_records(url)
            lengths = records.sequences().lengths()  # (columns: no bytes object a record)
            n = _set_sizes(records.sequences(), self.k, self.canonical)
            sizes.append(n)
            fastq = bool(records) and records[0].quality is not None
            skip[url] = self.on_bad_record == "skip" or (self.on_bad_record == "auto" and fastq)
            for key, i in zip(self.catalog.keys_of(url), range(len(records))):
                if n[i] > 0 or not skip[url]:
                    keys.append(key)
                else:
                    self.skipped.append((url, i, records[i].name, int(lengths[i])))
        self._record_sizes = dict(zip(self.urls, sizes))  # by file: check() reads them
        sizes = np.concatenate(sizes) if sizes else np.zeros(0)
        if kernel == "auto":
            mean = float(sizes[sizes > 0].mean()) if (sizes > 0).any() else 1.0
            # (a k past the bitset's rules it out without importing it: it loads numba)
            self.kernel = "bitset" if self.k <= MAX_BITSET_K and \
                _bits.prefer_bitset(self.k, mean, self.canonical) else "merge"
        if not keys:
            raise InputError(self.urls[0], f"no record has a valid {self.k}-mer "
                             f"({len(self.skipped)} records skipped)")
        return keys

    def __getstate__(self):
        # workers get the slim copy: they are handed keys, never ask for them, and a million
        # read names would be unpickled in every worker
        state = dict(self.__dict__)
        state.update(_keys=None, skipped=None, _n_skipped=self._skipped_count(), _record_sizes=None)
        return state

    def keys(self):
        if self._keys is None:
            raise RuntimeError("JaccardApp.keys() is driver-side; this is the slim copy "
                               "workers get")
        return self._keys

    def _skipped_count(self) -> int:
        return len(self.skipped) if self.skipped is not None else self._n_skipped

    def url(self, key):
        return self.catalog.fetch_url(key)

    def inputs(self):
        """Every file read (records are read through the catalog, not by ``url``)."""
        return list(self.catalog.urls)

    def _sequences(self, key: str, raw: bytes | None) -> list:
        return [r.sequence for r in self.catalog.records(key, raw)]

    def _file_items(self, url: str, raw: bytes | None = None, block: int = 0) -> _FileItems:
        """The items of block ``block`` of a file's records (``FILE_BLOCK`` records), built once
        per process while it stays among the last few used: not the whole file's, which at
        10^6 reads is 1 GB of bitset rows (the probe parses two reads)."""
        tag = (url, self.k, self.canonical, self.kernel, block)
        # every record's parse comes here: the hit takes no lock (a dict read is atomic), as
        # loader threads queueing for one behind the GIL would serialise every record's parse
        hit = _FILES.get(tag)
        if hit is not None:
            hit.used = next(_FILE_USES)
            return hit
        seqs = self.catalog.file_records(url, raw).sequences()
        built = _FileItems(seqs[block * FILE_BLOCK:(block + 1) * FILE_BLOCK], self.k,
                           self.canonical, self.kernel)
        built.used = next(_FILE_USES)
        with _FILES_LOCK:
            _FILES[tag] = built
            while len(_FILES) > _FILES_KEPT:
                del _FILES[min(_FILES, key=lambda t: _FILES[t].used)]
        return built

    def check(self, key, raw):
        if self.item == "record":  # (one record's windows: not its file's items)
            url, i = self.catalog.index_of(key, raw)
            # built here: its set size, > 0 exactly when a window of k A/C/G/T letters exists
            sizes = (getattr(self, "_record_sizes", None) or {}).get(url) if raw is None else None
            ok = bool(sizes[i] > 0) if sizes is not None else \
                _has_valid_kmer([self.catalog.file_records(url, raw)[i].sequence], self.k)
        else:
            ok = _has_valid_kmer(self._sequences(key, raw), self.k)
        if not ok:
            url, _, record = self.catalog.location(key)
            raise InputError(url, _bad_record_problem(self.k), record=record)

    def warmup(self, device):
        """Load the compiled kernels before the first tile, unless every input is a small local
        file: then every item parses and compares on the kernels' numpy path (no numba)."""
        host = device == "host"
        device = "cpu" if host else device
        if not self._small_inputs():
            from pairflow.kernels.lazyjit import compile_now
            compile_now("pairflow.kernels.kmers", "pairflow.kernels.jaccard")
        seq = [b"ACGTACGTAC" * 4]
        if self.kernel == "bitset":
            one = _bits.kmer_bitsets(seq, self.k, self.canonical)[0]
        else:
            one = canonical_kmers(seq, self.k, canonical=self.canonical).hashes
            record_kmer_sets(seq, self.k, self.canonical)
        item = one if self.item == "record" else \
            {"bits" if self.kernel == "bitset" else "kmers": one}
        one = self.preprocess("warmup", item, device)
        self.compare([one], [one], np.ones((1, 1), bool), device)
        # and the kernels that keep only a top-k or a threshold (compare_reduced)
        self.compare_reduced([one], [one], np.ones((1, 1), bool), device,
                             [TopKReduction("similarity", 1, True, True, True),
                              ThresholdReduction("similarity", 0.5, True)])
        if host and self.item == "record":
            # a loader parses a file on its first record: before the clock starts, and
            # before the stage measurement times a parse
            for url in self.urls[:_FILES_KEPT]:
                self.catalog.file_records(url)

    @property
    def warm_token(self):
        """What ``warmup`` prepares besides the kernels: the record items of these files."""
        if self.item != "record":
            return None
        return (tuple(self.urls[:_FILES_KEPT]), self.k, self.canonical, self.kernel)

    def _small_inputs(self) -> bool:
        """Every input an uncompressed local file, all of them together at most ``SMALL_BASES``
        bytes (so no item has more bases than the numpy path takes)."""
        import os
        from pairflow.kernels.kmers import SMALL_BASES
        if any("://" in u or not os.path.isfile(u) or u.endswith((".gz", ".bz2", ".xz"))
               for u in self.urls):
            return False
        return sum(os.path.getsize(u) for u in self.urls) <= SMALL_BASES

    def parse(self, key, raw):
        if self.item == "record":
            url, i = self.catalog.index_of(key, raw)
            items = self._file_items(url, raw, i // FILE_BLOCK)
            if items.sizes[i % FILE_BLOCK] == 0:
                self.check(key, raw)
            return items.item(i % FILE_BLOCK)
        seqs = self._sequences(key, raw)
        if self.kernel == "bitset":
            bits = np.bitwise_or.reduce(_bits.kmer_bitsets(seqs, self.k, self.canonical), axis=0)
            if not bits.any():
                self.check(key, raw)
            return {"bits": bits}
        kset = canonical_kmers(seqs, self.k, canonical=self.canonical)
        if len(kset.hashes) == 0:
            self.check(key, raw)
        return {"kmers": kset.hashes, "skipped": int(kset.skipped_windows),
                "windows": int(kset.n_windows)}

    def packs(self):
        """Record items come a tile side at a time (``parse_pack``): a read's k-mer set is
        microseconds of work, its bookkeeping as an item of its own more."""
        return self.item == "record"

    def parse_pack(self, keys):
        """The items of records ``keys``: an (n, words) array of bitset rows, or a list of
        k-mer arrays, built from these records only (their file parsed once per process):
        never a whole file's items, which at 10^6 reads are 1 GB of bitset rows a process."""
        where = [self.catalog.index_of(key) for key in keys]
        parts, start = [], 0
        for end in range(1, len(where) + 1):  # runs of one file
            if end == len(where) or where[end][0] != where[start][0]:
                seqs = self.catalog.file_records(where[start][0]).sequences()
                items = _FileItems(seqs[np.array([i for _, i in where[start:end]], np.int64)],
                                   self.k, self.canonical, self.kernel)
                bad = np.flatnonzero(items.sizes == 0)
                if len(bad):  # a record without a k-mer that was not skipped: named
                    self.check(keys[start + int(bad[0])], None)
                parts.append(items.bits if self.kernel == "bitset" else
                             items.items(np.arange(end - start)))
                start = end
        if self.kernel == "bitset":
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        return [row for part in parts for row in part]

    def item_nbytes(self, item):
        if isinstance(item, dict):
            return int(item["bits" if "bits" in item else "kmers"].nbytes)
        return super().item_nbytes(item)

    def preprocess(self, key, item, device):
        if isinstance(item, dict):
            item = item["bits" if "bits" in item else "kmers"]
        if device == "cpu":
            return item
        from pairflow.kernels.backend import namespace_for, to_device
        xp = namespace_for(device)
        if isinstance(item, list):  # a pack of k-mer arrays
            return [to_device(xp, x.view(np.int64), device) for x in item]
        return to_device(xp, item.view(np.int64), device)

    def compare(self, left, right, mask, device):
        xp = None
        if device != "cpu":
            from pairflow.kernels.backend import namespace_for
            xp = namespace_for(device)
        if self.kernel == "bitset" and xp is None:
            inter, sim = _bits.bitset_jaccard(left, right, mask)
            return {"similarity": sim, "intersection": inter}
        if self.kernel == "bitset":
            inter = _bits.bitset_intersections(left, right, mask=mask, xp=xp)
            size_l, size_r = _bitset_sizes(left), _bitset_sizes(right)
        else:
            inter = intersection_counts(left, right, mask=mask, xp=xp)
            size_l = np.array([len(x) for x in left], dtype=np.int64)
            size_r = np.array([len(x) for x in right], dtype=np.int64)
        sim = jaccard_from_counts(inter, size_l[:, None], size_r[None, :])
        return {"similarity": sim, "intersection": inter}

    def compare_reduced(self, left, right, mask, device, reductions):
        """A tile of the bitset kernel on the CPU straight to what its sinks keep of the
        similarity (a top-k or a threshold of J): the kernel keeps each row's and column's
        best as it goes and never writes the tile's matrices, which on short reads cost
        several times the popcounts. Anything else (merge, a GPU, another field) declines."""
        if self.kernel != "bitset" or device != "cpu" or \
                any(r.field != "similarity" for r in reductions):
            return None
        out = []
        for r in reductions:
            if isinstance(r, TopKReduction):
                i, j, v, col = _bits.bitset_jaccard_topk(left, right, mask, r.k, r.largest,
                                                         r.rows, r.cols, row_floor=r.row_floor,
                                                         col_floor=r.col_floor)
                out.append(TileCandidates(i, j, v, col))
            elif isinstance(r, ThresholdReduction):
                i, j, v = _bits.bitset_jaccard_threshold(left, right, r.t, mask, r.above)
                out.append(TileCandidates(i, j, v))
            else:
                return None
        return out

    def postprocess(self, block, tile, mask):
        """The fields, ``distance`` computed only when a sink asks for it (a top-k of
        similarities never does; a tile of reads holds millions of pairs)."""
        return _Fields(block, distance=lambda f: 1.0 - f["similarity"])

    def fields(self):
        return {"similarity": "float64", "distance": "float64", "intersection": "int64"}

    def describe(self):
        return {"app": self.name, "k": self.k, "item": self.item, "n_inputs": len(self.urls),
                "kernel": self.kernel, "canonical": self.canonical,
                "on_bad_record": self.on_bad_record, "skipped_records": self._skipped_count()}

    def store_source(self, key):
        """A record's file (L4 store: the record is digested by its file's bytes)."""
        return self.catalog.url(key)

    def parse_params(self):
        """What an item's k-mer set depends on beside its bytes (the L4 store's key)."""
        return {"k": self.k, "item": self.item, "canonical": self.canonical,
                "kernel": self.kernel}

    def fingerprint(self):
        """What decides the result: a resumed run with a different fingerprint is refused.
        The kernel does not (both give the same counts); which records were skipped does."""
        keys = hashlib.sha256("\n".join(self._keys).encode()).hexdigest()
        return {"app": self.name, "k": self.k, "item": self.item, "canonical": self.canonical,
                "keys_sha256": keys, "inputs": {u: url_digest(u) for u in self.urls}}

    def write_run_files(self, run_dir: str) -> None:
        """The skipped records, one per line (file, 1-based index, name, length, problem), in
        the run directory before any compute (written for every run, empty when none was)."""
        problem = _bad_record_problem(self.k)
        lines = ["file\tindex\trecord\tlength\tproblem"]
        lines += [f"{u}\t{i + 1}\t{name}\t{n}\t{problem}" for u, i, name, n in self.skipped]
        with open(os.path.join(run_dir, SKIPPED_FILE), "w") as fh:
            fh.write("\n".join(lines) + "\n")


class _Fields(Mapping):
    """A tile's result fields, some computed on first use."""

    def __init__(self, computed: dict, **derived):
        self._values, self._derived = dict(computed), derived

    def __getitem__(self, name):
        if name not in self._values:
            if name not in self._derived:
                raise KeyError(name)
            self._values[name] = self._derived[name](self)
        return self._values[name]

    def __iter__(self):
        return iter([*self._values, *(n for n in self._derived if n not in self._values)])

    def __len__(self):
        return len(set(self._values) | set(self._derived))


def _bitset_sizes(rows) -> np.ndarray:
    if isinstance(rows, np.ndarray):
        return _bits.bitset_sizes(rows)
    from pairflow.kernels.backend import to_numpy
    return _bits.bitset_sizes(np.stack([to_numpy(r) for r in rows]) if isinstance(rows, list)
                        else to_numpy(rows))


def build(cfg):
    """The app and its sinks from the Hydra config (``app=jaccard``)."""
    from pairflow.apps.data import expand_inputs
    from pairflow.engine import DenseMatrix, make_sink
    urls = expand_inputs(cfg.data.inputs)
    opts = cfg.get("jaccard") or {}
    app = JaccardApp(urls, k=int(cfg.data.k), item=str(cfg.data.item),
                     kernel=str(opts.get("kernel", "auto")),
                     canonical=bool(opts.get("canonical", True)),
                     on_bad_record=str(cfg.data.get("on_bad_record", "auto")))
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
    info = s["app_info"]
    rate = s["pairs_total"] / max(s["compute_s"], 1e-9)
    lines = [f"app=jaccard n={s['n_items']} k={info['k']} pairs={s['pairs_total']} "
             f"tiles={s['tiles_total']} leaf={s['leaf_items']} kernel={info.get('kernel')}"
             f"{'' if info.get('canonical', True) else ' strand-specific'}",
             f"wall time {s['wall_s']:.2f} s (compute {s['compute_s']:.2f} s, "
             f"{rate:,.0f} pairs/s)",
             f"R = {s['R']:.3f} loads/item (model bound {s['bound_R']:.3f}, host tier holds "
             f"{s['host_cache_items']} items)" if not s.get("packs") else
             f"R = {s['R']:.3f} loads/pack ({s['packs']} packs of up to {s['leaf_items']} "
             f"records, loaded and cached as one; model bound {s['bound_R']:.3f})"]
    for tier in ("L1", "L2"):
        t = tiers.get(tier, {})
        lines.append(f"{tier}: hits {t.get('hits', 0)}  misses {t.get('misses', 0)}  "
                     f"bytes in {t.get('bytes_in', 0)}  evictions {t.get('evictions', 0)}")
    lines.append(f"source loads: {tiers['source']['loads']}")
    if info.get("skipped_records"):
        lines.append(f"skipped {info['skipped_records']} records without a valid "
                     f"{info['k']}-mer: {os.path.join(result.run_dir, SKIPPED_FILE)}")
    for name, path in s["outputs"].items():
        lines.append(f"{name}: {path}")
    return "\n".join(lines)
