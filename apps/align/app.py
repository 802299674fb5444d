"""``AlignApp``: Smith-Waterman of queries x targets (or all-vs-all of one set) as an all-pairs
app of the engine.

Why here: this is the part the engine calls (keys, space, parse, compare, weights, store hooks);
reading and validating every record happens in its constructor, so bad input stops the run before
Ray starts. What runs after the engine (tracebacks, statistics, outputs) lives in ``results``.

How it maps onto the engine (docs/align.md has the whole story):

* **Items** are sequences, one per FASTA/FASTQ/GenBank/SwissProt record (``operators.sequences``,
  pysam for FASTA/FASTQ), keyed ``"file_stem/record_name"``. Every record is read and validated
  in the constructor (empty record, a letter outside the matrix's alphabet, DNA against a protein
  matrix or the reverse, k < 1), so bad input stops the run before Ray starts; the engine's
  pre-flight ``check`` re-validates what the workers will read.
* **Space**: queries x targets is a ``Rectangle``; with no targets (or the same inputs) it is
  all-vs-all of one set, a ``Triangle`` (each unordered pair once, no self hits) whose ``TopK``
  sink reports both directions. Rows and columns are sorted by length (stable), so a quadtree
  node's cells are easy to bound and heavy pairs sit together.
* **Capacity-aware tiles**: ``pair_weights()`` gives the sequence lengths; the driver cuts the
  quadtree until no tile holds more than ``max_weight`` cells, from the probe's measured cells/s
  and ``target_tile_s`` (``engine.quadtree``, weighted). One 5 Mb target therefore gets
  tiles of its own instead of sitting in a tile with a thousand 300 aa sequences.
* **Kernel**: ``compare`` runs ``kernels.smith_waterman.sw_scores`` (parasail SIMD) on the tile's
  wanted pairs (the mask) and returns the int32 field ``score``; with ``kernel=auto`` (default)
  a whole tile of short targets goes to Opal instead (``kernels.opal``, identical scores, faster
  there; measured: benchmarks/RESULTS.md, "Many small sequences: proteomes"; Opal's layout in
  AVX-512 lanes where the CPU has them, ``kernels.sw_simd``),
  ``kernel=parasail|opal`` forces one.
* **Top-k**: the engine's ``TopK(k)`` sink on ``score``, merged across tiles. Ties: the shorter
  target first, then the target that comes first in the input (columns are sorted by length,
  stably, and the sink breaks ties by the lower column index). Equal-score ties are the only
  order a brute-force sort has to reproduce: ``(-score, len(target), input position)``.
* **Tracebacks** (coordinates, CIGAR, aligned strings, identity) run after the run, only for the
  reported hits (Ray tasks when there are many cells to trace), each checked to re-score to the
  reported score; a long pair is traced only in the window its alignment occupies, found by
  two score-only passes (``tracebacks``).
* **Pair filters**: ``min_length_ratio`` (min/max length) and ``min_shared_kmers`` (shared k-mer
  prefilter) turn the space into a ``PairList`` of the pairs that pass, before any
  Smith-Waterman cell is computed. They are pipeline filters run through the engine's pair
  prefilter (``engine.prefilter``, as ``apps/jaccard_filtered.py`` does), which measures each
  one's cost and pass rate and reorders them while it runs; both are reported.
* **Statistics**: bit scores and E-values from BLAST's Karlin-Altschul tables
  (``kernels.karlin``), the database being the target set; ``evalue`` keeps the top-k hits with
  E <= the cut-off (hits are ranked by exact score, as Smith-Waterman finds them).
* **Reciprocal best hits** (``mode=rbh``): a second ``TopK(1, per="col")`` sink keeps each
  target's best query in the same pass; pairs that are each other's rank-1 hit are orthologs.
"""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from pairflow.engine import (BasePairApp, InputError, PairWeights, Rectangle, Triangle, prefilter,
                             url_digest)
from pairflow.kernels import karlin, opal
from pairflow.kernels.scoring import Scoring, detect_alphabet, validate
from pairflow.kernels.smith_waterman import sw_scores
from pairflow.operators.sequences import SequenceCatalog

from .filters import LengthRatioFilter, PairFilter, SharedKmerFilter
from .settings import ALPHABETS, DEFAULT_MATRIX, KERNELS, MODES, PAIR_BATCH, as_int


class AlignApp(BasePairApp):
    """Smith-Waterman of queries x targets (or all-vs-all of the queries) with top-k hits."""

    name = "align"

    def __init__(self, queries: Sequence[str], targets: Sequence[str] | None = None, *,
                 top_k: int = 5, matrix: str | None = None, gap_open: int = 11,
                 gap_extend: int = 1, convention: str = "standard", alphabet: str = "auto",
                 min_length_ratio: float | None = None, min_shared_kmers: int | None = None,
                 kmer: int | None = None, weighted: bool = True, fmt: str = "auto",
                 evalue: float | None = None, evalue_method: str = "spouge",
                 mode: str = "topk", kernel: str = "auto",
                 prefilter_options: dict | None = None):
        self._worker = False
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if evalue_method not in karlin.EVALUE_METHODS:
            raise ValueError(f"evalue_method must be one of {karlin.EVALUE_METHODS}, got "
                             f"{evalue_method!r}")
        if evalue is not None:
            evalue = float(evalue)
            if not evalue > 0:
                raise ValueError(f"evalue must be > 0 (hits with E <= evalue are kept), got "
                                 f"{evalue}")
        self.mode, self.evalue, self.evalue_method = mode, evalue, evalue_method
        self.prefilter_options = dict(prefilter_options or {})
        self.top_k = as_int(top_k, "top_k")
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 (hits reported per query), got {top_k}")
        if alphabet not in ALPHABETS:
            raise ValueError(f"alphabet must be one of {ALPHABETS}, got {alphabet!r}")
        queries = [str(u) for u in ([queries] if isinstance(queries, str) else queries)]
        if not queries:
            raise InputError("queries", "no query files")
        if isinstance(targets, str):
            targets = [targets]
        targets = [str(u) for u in targets] if targets else None
        self.all_vs_all = targets is None or sorted(set(targets)) == sorted(set(queries))
        self.query_urls = list(dict.fromkeys(queries))
        self.target_urls = self.query_urls if self.all_vs_all else list(dict.fromkeys(targets))
        self.fmt, self.weighted = fmt, bool(weighted)

        # read every record once, here, so that bad input fails before Ray starts
        self.catalog = SequenceCatalog(dict.fromkeys(self.query_urls + self.target_urls),
                                       item="record", fmt=fmt)
        seqs = self._read_all()
        q_in = [k for u in self.query_urls for k in self.catalog.keys_of(u)]
        t_in = q_in if self.all_vs_all else \
            [k for u in self.target_urls for k in self.catalog.keys_of(u)]
        if not t_in:
            raise InputError("targets", "no target records")

        self.scoring, self.alphabet, self._detected = self._scoring(
            matrix, gap_open, gap_extend, convention, alphabet, [seqs[k] for k in
                                                                  dict.fromkeys(q_in + t_in)])
        self._validate_all(seqs, list(dict.fromkeys(q_in + t_in)))
        # the items as parse() gives them, validated here from the same read: an in-process
        # run's loads and pre-flight checks take them from here (no file signature, no second
        # validation per record); Ray workers get the slim copy and read the files
        self._items = {k: seqs[k] for k in dict.fromkeys(q_in + t_in)}

        self.lengths = {k: len(seqs[k]) for k in seqs}
        self.kernel = kernel
        self._opal = kernel != "parasail" and opal.available(self.scoring)
        if kernel == "opal" and not self._opal:
            raise ValueError(f"kernel=opal needs pyopal and a protein matrix; "
                             f"{self.scoring.matrix} is a {self.alphabet} matrix")
        # E-values: BLAST's parameters for this matrix and gap pair, and the database (the
        # target set) they are measured against; none for a scheme BLAST has no table for
        try:
            self.karlin = karlin.for_scoring(self.scoring)
            self.karlin_missing = None
        except ValueError as exc:
            self.karlin, self.karlin_missing = None, str(exc)
            if self.evalue is not None:
                raise ValueError(f"align.evalue needs E-values: {exc}") from None
        self.db_length = int(sum(self.lengths[k] for k in dict.fromkeys(t_in)))
        self.db_sequences = len(dict.fromkeys(t_in))
        self.query_order = {k: i for i, k in enumerate(q_in)}   # input order, for the report
        self.target_order = {k: i for i, k in enumerate(t_in)}
        self._rows = sorted(q_in, key=lambda k: (self.lengths[k], self.query_order[k]))
        self._cols = self._rows if self.all_vs_all else \
            sorted(t_in, key=lambda k: (self.lengths[k], self.target_order[k]))
        self._keys = list(dict.fromkeys(self._rows + self._cols))

        self.filters = self._pair_filters(min_length_ratio, min_shared_kmers, kmer)
        self.filter_report: list[dict] = []
        self.filter_orders: list[list[str]] = []
        self._space = self._make_space(seqs)
        self.n_queries, self.n_targets = len(self._rows), len(self._cols)
        self._parasail_tiles = self._parasail_may_run()  # (kept in the workers' slim copy)

    # Ray unpickles the app for every item-load task: what workers get is a slim copy (the
    # scoring, the file of each key prefix, the options), not the per-key tables of the driver,
    # which for thousands of targets take longer to unpickle than a sequence takes to load.
    _DRIVER_ONLY = ("lengths", "query_order", "target_order", "_rows", "_cols",
                    "_keys", "_space", "filter_report", "filter_orders", "_items")

    def __getstate__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in self._DRIVER_ONLY}
        state["_worker"] = True
        return state

    def _driver(self, what: str) -> None:
        if self._worker:
            raise RuntimeError(f"AlignApp.{what} is driver-side; this is the slim copy workers get")

    # -- set-up ------------------------------------------------------------------------------
    def _scoring(self, matrix, gap_open, gap_extend, convention, alphabet, all_seqs):
        detected = None
        if alphabet == "auto":
            if matrix is None:
                detected = detect_alphabet(all_seqs)
                alphabet = detected
        if matrix is None:
            matrix = DEFAULT_MATRIX[alphabet]
        scoring = Scoring.create(str(matrix), as_int(gap_open, "gap_open"),
                                 as_int(gap_extend, "gap_extend"), str(convention))
        if alphabet != "auto" and scoring.alphabet != alphabet:
            raise ValueError(f"alphabet={alphabet} was declared but {scoring.matrix} is a "
                             f"{scoring.alphabet} matrix; use a {alphabet} matrix (e.g. "
                             f"{DEFAULT_MATRIX[alphabet]}) or alphabet=auto")
        return scoring, scoring.alphabet, detected

    def _read_all(self) -> dict[str, str]:
        """Every record's sequence by key, a file's records read from its columns in one pass
        (not looked up by name one by one: for 20,000 targets that took a second)."""
        seqs: dict[str, str] = {}
        for url in self.catalog.urls:
            keys = self.catalog.keys_of(url)
            cols = self.catalog.file_records(url)
            if len(keys) != len(cols) or len(set(keys)) != len(keys):
                for key in keys:  # repeated names: each key's record as records() finds it
                    seqs[key] = self.catalog.records(key)[0].sequence.decode("latin-1")
                continue
            blob, off = cols.seq, cols.off
            text = blob.tobytes().decode("latin-1")
            for i, key in enumerate(keys):
                seqs[key] = text[off[i]:off[i + 1]]
        return seqs

    def _validate_all(self, seqs: dict[str, str], keys: list[str]) -> None:
        """Every record validated and upper-cased in ``seqs``, in one call; when one fails, the
        first to fail is found one by one, for an error that names its file and record."""
        try:
            out = validate([seqs[k] for k in keys], self.scoring)
        except ValueError:
            for key in keys:
                self._validate(key, seqs[key])
            raise  # pragma: no cover - one of them failed above
        for key, seq in zip(keys, out):
            seqs[key] = seq

    def _validate(self, key: str, seq: str) -> str:
        url, index, name = self.catalog.location(key)
        try:
            (out,) = validate([seq], self.scoring, names=[name])
        except ValueError as exc:
            problem = str(exc)
            prefix = f"sequence {name!r}"
            if problem.startswith(prefix):
                problem = problem[len(prefix):].lstrip(": ")
            if self._detected and "looks like" in problem:
                problem += (f" (the alphabet was detected as {self._detected} from all inputs: "
                            f"they mix protein and DNA; set align.alphabet and align.matrix, or "
                            f"align each kind separately)")
            raise InputError(url, problem, record=name, index=index) from None
        return out

    def _pair_filters(self, min_length_ratio, min_shared_kmers, kmer) -> list[PairFilter]:
        filters: list[PairFilter] = []
        if min_length_ratio is not None:
            filters.append(LengthRatioFilter(min_length_ratio))
        if min_shared_kmers is not None:
            k = kmer if kmer is not None else (3 if self.alphabet == "protein" else 11)
            filters.append(SharedKmerFilter(min_shared_kmers, k))
        elif kmer is not None:
            raise ValueError("kmer is the word size of min_shared_kmers; set min_shared_kmers too")
        return filters

    def _make_space(self, seqs: dict):
        nq, nt = len(self._rows), len(self._cols)
        base = Triangle(nq) if self.all_vs_all else Rectangle(nq, nt)
        if not self.filters:
            return base
        row_seqs = [seqs[k] for k in self._rows]
        col_seqs = [seqs[k] for k in self._cols]
        prepare_s = {}
        for f in self.filters:
            t0 = time.perf_counter()
            f.prepare(row_seqs, col_seqs)
            prepare_s[f.name] = time.perf_counter() - t0
        options = {"runs_root": "runs", **self.prefilter_options}
        pairs, pre = prefilter(base, [f.operator() for f in self.filters], PAIR_BATCH,
                               **options)
        for f in self.filters:
            f.release()
        described = {f.name: f.describe() for f in self.filters}
        cut = pre.cutflow.set_index("op")
        stats = []
        for name in pre.summary["final_order"]:
            n_in, n_out = int(cut.loc[name, "records_in"]), int(cut.loc[name, "passed"])
            seconds = float(cut.loc[name, "seconds"])
            stats.append({**described[name], "prepare_s": prepare_s[name], "seconds": seconds,
                          "pairs_in": n_in, "pairs_out": n_out,
                          "pass_rate": n_out / n_in if n_in else None,
                          "s_per_pair": seconds / n_in if n_in else None})
        self.filter_report = stats
        self.filter_orders = pre.orders
        self.pairs_before_filters = base.total
        return pairs

    # -- the PairApp protocol ----------------------------------------------------------------
    def keys(self):
        self._driver("keys()")
        return self._keys

    def row_keys(self):
        self._driver("row_keys()")
        return self._rows

    def col_keys(self):
        self._driver("col_keys()")
        return self._cols

    def space(self):
        self._driver("space()")
        return self._space

    def url(self, key):
        return self.catalog.fetch_url(key)  # None: parse reads through the catalog's cache

    def inputs(self):
        """Every file read (records are read through the catalog, not by ``url``)."""
        return list(self.catalog.urls)

    def source(self, key) -> str:
        """The file a key's record comes from."""
        return self.catalog.url(key)

    def _record(self, key: str, raw=None) -> str:
        return self.catalog.records(key, raw)[0].sequence.decode("latin-1")

    def _held(self, key, raw) -> str | None:
        """The item validated by the constructor, when this copy holds it and the caller has
        no bytes of its own (the driver's copy: an in-process run)."""
        items = self.__dict__.get("_items")
        return items.get(key) if raw is None and items is not None else None

    def check(self, key, raw):
        if self._held(key, raw) is None:
            self._validate(key, self._record(key, raw))

    def parse(self, key, raw):
        held = self._held(key, raw)
        return held if held is not None else self._record(key, raw).upper()

    def warmup(self, device):
        # only the kernels the run's tiles will call: loading parasail's compiled pair loop
        # (numba's cache) costs ~0.5 CPU s a run of Opal tiles never gets back; and when the
        # probe's tile goes to Opal, the first tile that goes to parasail loads it (then the
        # other cores compute, where here, before any tile, they would wait)
        if self._parasail_tiles and not self._probe_opal():
            sw_scores(["ACDE"], ["ACDE"], self.scoring, validate=False)
        if self._opal:
            opal.opal_scores(["ACDE"], ["ACDE"], self.scoring)

    def _parasail_may_run(self) -> bool:
        """Can a tile of this run go to parasail? Not when every tile goes to Opal: kernel=opal,
        or kernel=auto on a rectangle without pair filters (no partial tile) whose every
        (query, target) mean length Opal is preferred for (checked on a grid of the range of
        lengths, its corners and Opal's thresholds included), and every (query, query) one (the
        probe's tile). A tile that goes to parasail all
        the same only loads the kernel on its first call."""
        if not self._opal:
            return True
        if self.kernel == "opal":
            return False
        if self.all_vs_all or self.filters:
            return True
        q = [self.lengths[k] for k in self._rows]
        t = [self.lengths[k] for k in self._cols]
        qs, ts = _grid(min(q), max(q)), _grid(min(t), max(t))
        # (queries against queries too: the engine's probe times a tile of the first keys)
        return not all(opal.prefer_opal([a], [b]) for a in qs for b in ts + qs)

    def _probe_opal(self) -> bool:
        """Does the engine's probe tile go to Opal? Its sample, compared with itself as a 2 x 2
        tile: the median-length query and target of a weighted run
        (``plan.sizing.weighted_probe``), else the first row and the last column. Not known
        here (a worker's slim copy): False."""
        rows, cols = self.__dict__.get("_rows"), self.__dict__.get("_cols")
        if not (self._opal and rows and cols):
            return False
        if self.kernel == "opal":
            return True
        q = sorted(self.lengths[k] for k in rows)
        t = sorted(self.lengths[k] for k in cols)
        a, b = (q[len(q) // 2], t[len(t) // 2]) if self.weighted else (q[0], t[-1])
        return opal.prefer_opal([a, b], [a, b])

    def imports_after(self):
        """Spouge's E-values (``results.finish``) take the normal CDF from scipy.special."""
        return ("scipy.special",) if self.evalue_method == "spouge" else ()

    def row_calls(self) -> bool:
        """Every tile goes to Opal (no tile can go to parasail), which makes a call per query
        against the tile's targets: the engine cuts the run into strips of queries against
        every target (one Opal call per query: on 400 x 2,000 proteins ~12 % less kernel CPU
        than 200 x 200 tiles and their quarters, measured)."""
        return bool(self._opal and not self._parasail_tiles)

    def use_opal(self, left, right, mask) -> bool:
        """Opal for this tile? ``kernel=auto``: when its lengths fall where Opal measured
        faster (``kernels.opal.prefer_opal``) and every pair of the tile is wanted (Opal scores
        whole rows; a tile on a triangle's diagonal or a filtered tile stays with parasail)."""
        if not self._opal:
            return False
        if self.kernel == "opal":
            return True
        return (mask is None or bool(np.asarray(mask).all())) and \
            opal.prefer_opal([len(s) for s in left], [len(s) for s in right])

    def compare(self, left, right, mask, device):
        # both kernels are CPU SIMD: the same kernels whatever device the actor was given
        if self.use_opal(left, right, mask):
            return {"score": opal.opal_scores(left, right, self.scoring, mask)}
        return {"score": sw_scores(left, right, self.scoring, mask, validate=False)}

    def fields(self):
        return {"score": "int32"}

    def item_nbytes(self, item):
        return len(item) + 64

    def pair_weights(self):
        """Sequence lengths: a pair costs |q| * |t| cells (capacity-aware tiles)."""
        self._driver("pair_weights()")
        if not self.weighted:
            return None
        return (np.array([self.lengths[k] for k in self._rows], dtype=np.float64),
                np.array([self.lengths[k] for k in self._cols], dtype=np.float64))

    def cells(self) -> int:
        """Dynamic-programming cells of every wanted pair."""
        self._driver("cells()")
        w = PairWeights([self.lengths[k] for k in self._rows],
                        [self.lengths[k] for k in self._cols])
        return int(round(w.total(self._space)))

    def describe(self):
        return {"app": self.name, "top_k": self.top_k, "matrix": self.scoring.matrix,
                "gap_open": self.scoring.gap_open, "gap_extend": self.scoring.gap_extend,
                "convention": self.scoring.convention, "alphabet": self.alphabet,
                "all_vs_all": self.all_vs_all, "n_queries": self.n_queries,
                "n_targets": self.n_targets, "weighted": self.weighted,
                "filters": [f.describe() for f in self.filters], "mode": self.mode,
                "evalue": self.evalue, "evalue_method": self.evalue_method}

    def store_source(self, key):
        """A record's file (L4 store: the record is digested by its file's bytes)."""
        return self.catalog.url(key)

    def parse_params(self):
        """A sequence depends only on its record's bytes and the input format (L4 store)."""
        return {"fmt": self.fmt}

    def fingerprint(self):
        return {**self.describe(),
                "inputs": {u: url_digest(u) for u in dict.fromkeys(self.query_urls +
                                                                   self.target_urls)}}

    # -- driver side -------------------------------------------------------------------------
    def sequences(self, keys) -> dict[str, str]:
        """The sequences of ``keys`` (each file read once)."""
        return {key: self.parse(key, None) for key in keys}

    def record_name(self, key: str) -> str:
        return self.catalog.location(key)[2]


def _grid(lo: float, hi: float, n: int = 17) -> list[float]:
    """``n`` points from ``lo`` to ``hi``, and Opal's length thresholds that fall between, each
    just below and above (``prefer_opal`` is piecewise in them)."""
    cuts = (opal.OPAL_SHORT_TARGET_LEN, opal.OPAL_MAX_TARGET_LEN, opal.OPAL_MAX_QUERY_LEN)
    pts = list(np.linspace(lo, hi, n))
    pts += [c + d for c in cuts for d in (-0.5, 0.5) if lo <= c + d <= hi]
    return pts

