"""Many-to-many Smith-Waterman: every query against every target, the k best hits per query,
tracebacks only for those hits.

    pairflow app=align data.queries=q.fa data.targets=db.fa align.top_k=5 \\
        align.matrix=blosum62 align.gap_open=11 align.gap_extend=1

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
  there as measured), ``kernel=parasail|opal`` forces one.
* **Top-k**: the engine's ``TopK(k)`` sink on ``score``, merged across tiles. Ties: the shorter
  target first, then the target that comes first in the input (columns are sorted by length,
  stably, and the sink breaks ties by the lower column index). Equal-score ties are the only
  order a brute-force sort has to reproduce: ``(-score, len(target), input position)``.
* **Tracebacks** (coordinates, CIGAR, aligned strings, identity) run after the run, only for the
  reported hits (Ray tasks when there are many cells to trace), each checked to re-score to the
  reported score; very long pairs are traced in a window bounded from the score.
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

Outputs (``result/`` of the run directory): ``hits.tsv`` (a header row, then BLAST's tabular
columns ``qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue bitscore``
plus ``score cigar``), ``hits.parquet`` (the same plus keys, ranks, lengths and aligned
strings), ``orthologs.tsv`` for ``mode=rbh``, ``align_summary.json``, and the engine's
``topk.parquet`` (and ``topk_cols.parquet``).
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import threading
import time
from typing import Sequence

import numpy as np

from pairflow.engine import (BasePairApp, Filter, InputError, PairflowError, PairWeights, Rectangle,
                    Triangle, map_chunks, prefilter, read_json, url_digest, write_json)
from pairflow.kernels import karlin, opal
from pairflow.kernels.scoring import Scoring, detect_alphabet, validate
from pairflow.kernels.smith_waterman import Alignment, rescore, sw_scores, sw_traceback
from pairflow.operators.sequences import SequenceCatalog

ALPHABETS = ("auto", "protein", "dna")
MODES = ("topk", "rbh")
KERNELS = ("auto", "parasail", "opal")
DEFAULT_MATRIX = {"protein": "blosum62", "dna": "nuc44"}
TIE_RULE = ("score descending; ties: shorter target first, then the target listed first in the "
            "input")
# BLAST's tabular columns (-outfmt 6's default twelve), then the raw score and the CIGAR
TSV_COLUMNS = ["qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend",
               "sstart", "send", "evalue", "bitscore", "score", "cigar"]
ORTHOLOG_COLUMNS = ["qseqid", "sseqid", "score", "evalue", "bitscore", "pident", "length",
                    "qstart", "qend", "sstart", "send", "cigar"]

# Tracebacks keep a direction per cell: pairs above this many cells are traced in a window around
# the best cell (bounded from the score), and a window above the second bound is refused.
TRACE_DIRECT_CELLS = 20_000_000
TRACE_MAX_CELLS = 400_000_000
# Above this many traceback cells in all, tracebacks fan out as Ray tasks.
TRACE_FANOUT_CELLS = 200_000_000
# Work per tile the engine aims at (configs/app/align.yaml sets the same): each tile also writes
# a top-k part (a few ms), and the engine's two-item probe overstates what a pair costs in a tile.
TARGET_TILE_S = 0.5
# Pairs per batch of the pair prefilter: enough batches for its measurements to reorder the
# filters, few enough that per-batch overhead stays small beside the filters' own work.
PAIR_BATCH = 16_384


def _as_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------- pair filters

class PairFilter:
    """A cheap test on candidate pairs, run before any Smith-Waterman cell.

    ``prepare(row_seqs, col_seqs)`` sees the sequences once; ``keep(rows, cols)`` gets arrays of
    row and column indices (the app's length-sorted order) and returns a boolean mask.
    ``operator`` makes it a pipeline ``Filter`` over the pair columns ``i`` and ``j``: the app
    runs its filters through the engine's pair prefilter, which measures each one's cost and
    pass rate and runs them in the order that does the least work.
    """

    name = "filter"

    def prepare(self, row_seqs: list[str], col_seqs: list[str]) -> None:
        pass

    def keep(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def operator(self) -> Filter:
        return Filter(self.name, lambda b: self.keep(b["i"], b["j"]))

    def release(self) -> None:
        """Drop what ``prepare`` built (the app is pickled for every worker)."""

    def describe(self) -> dict:
        return {"name": self.name}


class LengthRatioFilter(PairFilter):
    """Keep pairs whose shorter sequence is at least ``ratio`` times the longer one."""

    name = "min_length_ratio"

    def __init__(self, ratio: float):
        ratio = float(ratio)
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"min_length_ratio must be in (0, 1], got {ratio}")
        self.ratio = ratio

    def prepare(self, row_seqs, col_seqs):
        self.rl = np.array([len(s) for s in row_seqs], dtype=np.float64)
        self.cl = np.array([len(s) for s in col_seqs], dtype=np.float64)

    def keep(self, rows, cols):
        a, b = self.rl[rows], self.cl[cols]
        return np.minimum(a, b) >= self.ratio * np.maximum(a, b)

    def release(self):
        del self.rl, self.cl

    def describe(self):
        return {"name": self.name, "ratio": self.ratio}


class SharedKmerFilter(PairFilter):
    """Keep pairs sharing at least ``min_shared`` distinct k-mers (exact words of k letters)."""

    name = "min_shared_kmers"

    def __init__(self, min_shared: int, k: int):
        self.min_shared = _as_int(min_shared, "min_shared_kmers")
        self.k = _as_int(k, "kmer")
        if self.min_shared < 1:
            raise ValueError(f"min_shared_kmers must be >= 1, got {self.min_shared}")
        if not 1 <= self.k <= 12:
            raise ValueError(f"kmer must be from 1 to 12, got {self.k}")

    def _matrix(self, seqs: list[str], vocab: dict):
        indptr, indices = [0], []
        for s in seqs:
            words = {s[i:i + self.k] for i in range(len(s) - self.k + 1)}
            for w in words:
                indices.append(vocab.setdefault(w, len(vocab)))
            indptr.append(len(indices))
        return indptr, indices

    def prepare(self, row_seqs, col_seqs):
        from scipy.sparse import csr_matrix
        vocab: dict = {}
        rp, ri = self._matrix(row_seqs, vocab)
        cp, ci = self._matrix(col_seqs, vocab)
        n = max(1, len(vocab))
        a = csr_matrix((np.ones(len(ri), np.int32), ri, rp), shape=(len(row_seqs), n))
        b = csr_matrix((np.ones(len(ci), np.int32), ci, cp), shape=(len(col_seqs), n))
        self.shared = (a @ b.T).tocsr()  # shared distinct k-mers of every pair that shares any

    def keep(self, rows, cols):
        return np.asarray(self.shared[rows, cols]).ravel() >= self.min_shared

    def release(self):
        del self.shared

    def describe(self):
        return {"name": self.name, "min_shared": self.min_shared, "k": self.k}


# ------------------------------------------------------------------------------------- the app

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
        self.top_k = _as_int(top_k, "top_k")
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
        seqs: dict[str, str] = {}
        for key in self.catalog.keys():
            seqs[key] = self.catalog.records(key)[0].sequence.decode("latin-1")
        q_in = [k for u in self.query_urls for k in self.catalog.keys_of(u)]
        t_in = q_in if self.all_vs_all else \
            [k for u in self.target_urls for k in self.catalog.keys_of(u)]
        if not t_in:
            raise InputError("targets", "no target records")

        self.scoring, self.alphabet, self._detected = self._scoring(
            matrix, gap_open, gap_extend, convention, alphabet, [seqs[k] for k in
                                                                  dict.fromkeys(q_in + t_in)])
        for key in dict.fromkeys(q_in + t_in):
            seqs[key] = self._validate(key, seqs[key])

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

    # Ray unpickles the app for every item-load task: what workers get is a slim copy (the
    # scoring, the file of each key prefix, the options), not the per-key tables of the driver,
    # which for 8,000 targets took longer to unpickle than a sequence takes to load.
    _DRIVER_ONLY = ("lengths", "query_order", "target_order", "_rows", "_cols",
                    "_keys", "_space", "filter_report", "filter_orders")

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
        scoring = Scoring.create(str(matrix), _as_int(gap_open, "gap_open"),
                                 _as_int(gap_extend, "gap_extend"), str(convention))
        if alphabet != "auto" and scoring.alphabet != alphabet:
            raise ValueError(f"alphabet={alphabet} was declared but {scoring.matrix} is a "
                             f"{scoring.alphabet} matrix; use a {alphabet} matrix (e.g. "
                             f"{DEFAULT_MATRIX[alphabet]}) or alphabet=auto")
        return scoring, scoring.alphabet, detected

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

    def check(self, key, raw):
        self._validate(key, self._record(key, raw))

    def parse(self, key, raw):
        return self._record(key, raw).upper()

    def warmup(self, device):
        sw_scores(["ACDE"], ["ACDE"], self.scoring, validate=False)
        if self._opal:
            opal.opal_scores(["ACDE"], ["ACDE"], self.scoring)

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


# ------------------------------------------------------------------------------- tracebacks

def traceback_hit(q: str, t: str, scoring: Scoring, score: int) -> Alignment:
    """The alignment behind a reported score, checked to re-score to it.

    Pairs above ``TRACE_DIRECT_CELLS`` are traced in a window ending at the best cell: an
    alignment of score S ending at (qe, te) has at most m = min(qe, te) aligned letter pairs and
    at most (m * max_substitution - S) / extend gap letters, so neither of its spans is longer
    than their sum. (With extend = 0 there is no such bound and the whole pair is traced.)
    """
    if len(q) * len(t) <= TRACE_DIRECT_CELLS:
        aln = sw_traceback(q, t, scoring, validate=False)
    else:
        aln = _windowed_traceback(q, t, scoring, score)
    if aln.score != score or rescore(aln, scoring) != score:
        raise PairflowError(f"traceback of a {len(q)} x {len(t)} pair scores {aln.score} "
                            f"(re-scored {rescore(aln, scoring)}) but the search reported {score}")
    return aln


def _windowed_traceback(q: str, t: str, scoring: Scoring, score: int) -> Alignment:
    import parasail
    matrix = scoring.parasail_matrix()
    for w in (16, 32, 64):
        r = getattr(parasail, f"sw_scan_{w}")(q, t, scoring.open, scoring.extend, matrix)
        if not r.saturated:
            break
    if int(r.score) != score:
        raise PairflowError(f"re-scoring a {len(q)} x {len(t)} pair gave {r.score}, "
                            f"the search reported {score}")
    if score <= 0:
        return Alignment(0, 0, 0, 0, 0, "", "", "", 0, 0)
    qe, te = int(r.end_query) + 1, int(r.end_ref) + 1
    m = min(qe, te)
    if scoring.extend > 0:
        span = m + max(0, m * scoring.max_score - score) // scoring.extend
    else:
        span = max(qe, te)
    q0, t0 = max(0, qe - span), max(0, te - span)
    if (qe - q0) * (te - t0) > TRACE_MAX_CELLS:
        raise PairflowError(f"the traceback of a {len(q)} x {len(t)} pair needs "
                            f"{(qe - q0) * (te - t0):,} cells even in its window (limit "
                            f"{TRACE_MAX_CELLS:,}); lower top_k or split the long sequence")
    sub = sw_traceback(q[q0:qe], t[t0:te], scoring, validate=False)
    return dataclasses.replace(sub, qstart=sub.qstart + q0, qend=sub.qend + q0,
                               sstart=sub.sstart + t0, send=sub.send + t0)


def _trace_many(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    return [dataclasses.asdict(traceback_hit(q, t, scoring, s)) for q, t, s in jobs]


def trace_hits(jobs: list[tuple[str, str, int]], scoring: Scoring) -> list[dict]:
    """Tracebacks of ``(query, target, score)`` jobs: here, or as Ray tasks when there is a lot
    to trace and Ray is up (the run just used it)."""
    cost = [min(len(q) * len(t), TRACE_DIRECT_CELLS) for q, t, _ in jobs]
    if sum(cost) <= TRACE_FANOUT_CELLS:
        return _trace_many(jobs, scoring)
    return map_chunks(_trace_many, jobs, scoring, weights=cost)


# ------------------------------------------------------------------------------- finishing

def finish(app: AlignApp, result, validate_hits: int = 0, seed: int = 0):
    """E-values, the cut-off, tracebacks for the hits kept, reciprocal best hits, then hits.tsv,
    hits.parquet (orthologs.tsv) and align_summary.json in the run's ``result/`` directory.
    Returns the hits as a DataFrame (also ``result.hits``)."""
    # One straight pass (trace, validate, tabulate, write, summarise): each step feeds the next
    # and none is used alone, so splitting it would only pass the same dozen values around.
    import pandas as pd
    t0 = time.time()
    top_all = pd.read_parquet(result.outputs["topk"])
    # statistics need only scores and lengths: the cut-off comes before any traceback
    evalues, bits = statistics(app, top_all["score"].to_numpy(np.int64),
                               np.array([app.lengths[k] for k in top_all["query"]], np.int64),
                               np.array([app.lengths[k] for k in top_all["target"]], np.int64))
    keep = evalues <= app.evalue if app.evalue is not None else np.ones(len(top_all), bool)
    top = top_all[keep].reset_index(drop=True)
    evalues, bits = evalues[keep], bits[keep]
    keys = set(top["query"]) | set(top["target"])
    seqs = app.sequences(sorted(keys))
    jobs = [(seqs[q], seqs[t], int(s)) for q, t, s in zip(top["query"], top["target"],
                                                          top["score"])]
    alns = trace_hits(jobs, app.scoring)
    trace_s = time.time() - t0
    checked = 0
    if validate_hits and len(jobs):
        from pairflow.kernels.smith_waterman import sw_reference
        rng = np.random.default_rng(seed)
        for i in rng.choice(len(jobs), min(int(validate_hits), len(jobs)), replace=False):
            q, t, s = jobs[int(i)]
            ref = sw_reference(q, t, app.scoring, validate=False)
            if ref != s:
                raise PairflowError(f"validation failed: {top['query'].iloc[i]} x "
                                    f"{top['target'].iloc[i]} scored {s} in the run but {ref} "
                                    f"by the numpy reference")
            checked += 1
    a = pd.DataFrame(alns, columns=[f.name for f in dataclasses.fields(Alignment)])
    scores = top["score"].to_numpy(np.int64)
    qlen = np.array([app.lengths[k] for k in top["query"]], dtype=np.int64)
    slen = np.array([app.lengths[k] for k in top["target"]], dtype=np.int64)
    counts = [cigar_counts(c) for c in a["cigar"].astype(str)]
    hits = pd.DataFrame({
        "qseqid": [app.record_name(k) for k in top["query"]],
        "sseqid": [app.record_name(k) for k in top["target"]],
        "pident": np.round(100.0 * a["identity"].to_numpy(np.float64), 3),
        "length": a["length"].to_numpy(np.int64),
        "mismatch": np.array([c[0] for c in counts], dtype=np.int64),
        "gapopen": np.array([c[1] for c in counts], dtype=np.int64),
        "qstart": a["qstart"].to_numpy(np.int64), "qend": a["qend"].to_numpy(np.int64),
        "sstart": a["sstart"].to_numpy(np.int64), "send": a["send"].to_numpy(np.int64),
        "evalue": evalues, "bitscore": bits,
        "score": scores,
        "cigar": a["cigar"].astype(str),
        "rank": top["rank"].to_numpy(np.int64),
        "query": top["query"].astype(str), "target": top["target"].astype(str),
        "qlen": qlen, "slen": slen,
        "matches": a["matches"].to_numpy(np.int64),
        "query_aligned": a["query_aligned"].astype(str),
        "target_aligned": a["target_aligned"].astype(str),
    })
    order = app.query_order
    hits["_q"] = [order.get(k, len(order)) for k in hits["query"]]
    hits = hits.sort_values(["_q", "rank"], kind="mergesort").drop(columns="_q")
    hits = hits.reset_index(drop=True)

    out_dir = os.path.dirname(result.outputs["topk"])
    outputs = {}
    orthologs = None
    if app.mode == "rbh":
        # best hits from the whole top-k (the cut-off does not change who is best); the merge
        # with the hits kept applies the cut-off to the pairs
        cols = top_all if app.all_vs_all else pd.read_parquet(result.outputs["topk_cols"])
        pairs = reciprocal_best_hits(top_all, cols,
                                     app.query_order if app.all_vs_all else None)
        key = pd.DataFrame(pairs, columns=["query", "target"])
        orthologs = hits[hits["rank"] == 1].merge(key, on=["query", "target"])
        orthologs = orthologs.reset_index(drop=True)
        path = os.path.join(out_dir, "orthologs.tsv")
        _write_tsv(orthologs[ORTHOLOG_COLUMNS], path)
        outputs["orthologs"] = path
        outputs["topk_cols"] = result.outputs.get("topk_cols")
    hits_before_evalue = len(top_all)

    tsv, parquet = os.path.join(out_dir, "hits.tsv"), os.path.join(out_dir, "hits.parquet")
    _write_tsv(hits[TSV_COLUMNS], tsv)
    hits.to_parquet(parquet + ".tmp", index=False)
    os.replace(parquet + ".tmp", parquet)

    s = result.summary
    cells = app.cells()
    compute_s = float(s.get("compute_s") or s["wall_s"])
    stats = ({"method": app.evalue_method, **app.karlin.describe(),
              "db_length": app.db_length, "db_sequences": app.db_sequences}
             if app.karlin is not None else {"method": None, "why": app.karlin_missing})
    summary = {
        "queries": len(app.row_keys()), "targets": len(app.col_keys()),
        "all_vs_all": app.all_vs_all, "pairs": int(app.space().total),
        "pairs_before_filters": int(getattr(app, "pairs_before_filters", app.space().total)),
        "filters": app.filter_report, "filter_orders": app.filter_orders,
        "cells": cells, "compute_s": compute_s,
        "cells_per_s": cells / compute_s if compute_s > 0 else None,
        "wall_s": float(s["wall_s"]), "tiles": s["tiles_total"], "leaf_items": s["leaf_items"],
        "max_tile_cells": s.get("measured", {}).get("max_weight"),
        "probe_cells_per_s": s.get("measured", {}).get("weight_per_s"),
        "top_k": app.top_k, "hits": len(hits), "tie_rule": TIE_RULE,
        "kernel": app.kernel, "mode": app.mode, "evalue_cutoff": app.evalue,
        "hits_before_evalue": hits_before_evalue,
        "statistics": stats,
        "orthologs": None if orthologs is None else len(orthologs),
        "scoring": {"matrix": app.scoring.matrix, "gap_open": app.scoring.gap_open,
                    "gap_extend": app.scoring.gap_extend,
                    "convention": app.scoring.convention},
        "alphabet": app.alphabet, "traceback_s": trace_s, "validated_hits": checked,
        "outputs": {"tsv": tsv, "parquet": parquet, "topk": result.outputs["topk"], **outputs},
    }
    write_json(os.path.join(out_dir, "align_summary.json"), summary)
    result.hits, result.align, result.orthologs = hits, summary, orthologs
    return hits


def statistics(app: AlignApp, scores, qlen, slen) -> tuple[np.ndarray, np.ndarray]:
    """E-values and bit scores of hits (NaN when BLAST has no parameters for the scoring).

    The database is the target set (the queries themselves when all-vs-all): its residues and
    sequence count, as blastp would see them after makeblastdb of the targets."""
    if app.karlin is None:
        nan = np.full(len(scores), np.nan)
        return nan, nan.copy()
    if app.evalue_method == "spouge":
        ev = karlin.evalues_spouge(scores, qlen, slen, app.db_length, app.karlin)
    else:
        ev = karlin.evalues_karlin(scores, qlen, app.db_length, app.db_sequences, app.karlin)
    return ev, karlin.bit_scores(scores, app.karlin)


def cigar_counts(cigar: str) -> tuple[int, int]:
    """(mismatches, gap openings) of an extended CIGAR: the letters of its ``X`` runs, and its
    ``I``/``D`` runs (BLAST counts a gap in one sequence followed by one in the other as two)."""
    mismatch = gapopen = 0
    for n, op in re.findall(r"(\d+)([=XID])", cigar):
        if op == "X":
            mismatch += int(n)
        elif op in "ID":
            gapopen += 1
    return mismatch, gapopen


def reciprocal_best_hits(rows, cols, order: dict | None = None) -> list[tuple[str, str]]:
    """Pairs (query, target) where each is the other's best hit: rank 1 of ``rows`` (per query)
    and rank 1 of ``cols`` (per target, its ``query`` column the target), scores above zero.

    Ranks carry the tie rule (score, then the shorter partner, then input order), so each
    sequence has exactly one best hit. With one table for both sides (all-vs-all, ``order`` the
    input order) each mutual pair is reported once, the query first in input order."""
    best_row = {q: t for q, t, s, r in zip(rows["query"], rows["target"], rows["score"],
                                            rows["rank"]) if r == 1 and s > 0}
    best_col = {c: q for c, q, s, r in zip(cols["query"], cols["target"], cols["score"],
                                            cols["rank"]) if r == 1 and s > 0}
    pairs = [(q, t) for q, t in best_row.items() if best_col.get(t) == q]
    if order is not None:
        pairs = [(q, t) for q, t in pairs if order[q] < order[t]]
    return pairs


def _write_tsv(table, path: str) -> None:
    """A header row, then BLAST's formats: E-values with three significant digits, bit scores
    with one decimal."""
    out = table.copy()
    if "evalue" in out:
        out["evalue"] = [("" if np.isnan(e) else f"{e:.3g}") for e in out["evalue"]]
    if "bitscore" in out:
        out["bitscore"] = [("" if np.isnan(b) else f"{b:.1f}") for b in out["bitscore"]]
    out.to_csv(path + ".tmp", sep="\t", index=False)
    os.replace(path + ".tmp", path)


def align(queries, targets=None, *, top_k: int = 5, matrix: str | None = None,
          gap_open: int = 11, gap_extend: int = 1, convention: str = "standard",
          alphabet: str = "auto", min_length_ratio: float | None = None,
          min_shared_kmers: int | None = None, kmer: int | None = None, weighted: bool = True,
          evalue: float | None = None, evalue_method: str = "spouge", mode: str = "topk",
          kernel: str = "auto", extra_sinks: Sequence = (), validate_hits: int = 0, **options):
    """The Python form of ``pairflow app=align``: run, trace the hits, write the outputs.

    ``evalue`` keeps hits with E-value at most this; ``evalue_method`` is ``spouge`` (what blastp
    prints) or ``karlin``; ``mode="rbh"`` also finds reciprocal best hits (``.orthologs``);
    ``kernel`` is ``auto``, ``parasail`` or ``opal``. ``options`` are ``pairflow.allpairs``
    options (``run_dir``, ``runs_root``, ``leaf_items``, ``validate``, ``progress`` ...;
    ``target_tile_s`` defaults to 0.5 here). Returns the engine's result with ``.hits`` (a
    DataFrame), ``.align`` (the summary) and ``.orthologs`` (a DataFrame for ``mode="rbh"``,
    else None) attached.
    """
    from pairflow.engine import allpairs
    options.setdefault("target_tile_s", TARGET_TILE_S)
    app = AlignApp(queries, targets, top_k=top_k, matrix=matrix, gap_open=gap_open,
                   gap_extend=gap_extend, convention=convention, alphabet=alphabet,
                   min_length_ratio=min_length_ratio, min_shared_kmers=min_shared_kmers,
                   kmer=kmer, weighted=weighted, evalue=evalue, evalue_method=evalue_method,
                   mode=mode, kernel=kernel,
                   prefilter_options={"runs_root": options.get("runs_root", "runs")})
    sinks = hit_sinks(app) + list(extra_sinks)
    show = options.pop("progress", True)  # the cells/s display replaces the engine's bar
    handle = allpairs(app=app, sinks=sinks, progress=False, **options)
    stop = watch(handle.run_dir, app) if show else None
    try:
        result = handle.result()
    finally:
        if stop is not None:
            stop()
    finish(app, result, validate_hits=validate_hits)
    return result


def hit_sinks(app: AlignApp) -> list:
    """The k best targets per query; for ``mode=rbh`` of two sets also the best query per
    target (all-vs-all's top-k already has both directions)."""
    from pairflow.engine import TopK
    sinks = [TopK(app.top_k, field="score")]
    if app.mode == "rbh" and not app.all_vs_all:
        sinks.append(TopK(1, field="score", per="col"))
    return sinks


# ------------------------------------------------------------------------------- progress

class _Watch:
    """A progress bar in cells and cells/s, read from the run directory (tiles.json for the
    planned tiles, tiles.jsonl for the finished ones), like any other watcher of a run."""

    def __init__(self, run_dir: str, app: AlignApp, interval: float = 0.5):
        self.run_dir, self.interval = run_dir, interval
        self.stop_event = threading.Event()
        space = app.space()
        w = PairWeights([app.lengths[k] for k in app.row_keys()],
                        [app.lengths[k] for k in app.col_keys()])
        tiles = read_json(os.path.join(run_dir, "tiles.json"), []) or []
        self.cells = {t["id"]: space.weight(t["r0"], t["r1"], t["c0"], t["c1"], w) for t in tiles}
        self.total = sum(self.cells.values()) or float(app.cells())
        self.n_tiles = len(tiles)
        self.done: set = set()
        self.done_cells = 0.0
        self.offset = 0
        self.t0 = time.time()
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.bar = None
        if self.tty:
            from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Progress(TextColumn("[bold]align"), BarColumn(),
                                TextColumn("{task.fields[cells]} cells"),
                                TextColumn("{task.fields[rate]}"),
                                TextColumn("tiles {task.fields[tiles]}"),
                                TimeElapsedColumn(), TimeRemainingColumn(), transient=False)
            self.task = self.bar.add_task("align", total=self.total, cells="0", rate="",
                                          tiles=f"0/{self.n_tiles}")
            self.bar.start()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        import json
        path = os.path.join(self.run_dir, "tiles.jsonl")
        try:
            with open(path) as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind("\n") + 1  # a partial last line waits for the next read
        for line in data[:end].splitlines():
            try:
                t = json.loads(line)["id"]
            except (ValueError, KeyError):
                continue
            if t not in self.done:
                self.done.add(t)
                self.done_cells += self.cells.get(t, 0.0)
        self.offset += len(data[:end].encode())

    def _show(self, final: bool = False) -> None:
        elapsed = max(1e-9, time.time() - self.t0)
        rate = self.done_cells / elapsed
        text = f"{_si(self.done_cells)}/{_si(self.total)}"
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done_cells, cells=text,
                            rate=f"{_si(rate)}cells/s", tiles=f"{len(self.done)}/{self.n_tiles}")
        elif final or time.time() - self.last_line > 5:
            self.last_line = time.time()
            pct = 100.0 * self.done_cells / self.total if self.total else 100.0
            print(f"[pairflow align] {pct:5.1f}%  cells {text}  {_si(rate)}cells/s  "
                  f"tiles {len(self.done)}/{self.n_tiles}", file=sys.stderr, flush=True)

    def _loop(self) -> None:
        while not self.stop_event.wait(self.interval):
            self._read()
            self._show()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)
        self._read()
        self._show(final=True)
        if self.bar is not None:
            self.bar.stop()


def _si(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f} {unit}"
    return f"{x:.0f} "


def watch(run_dir: str, app: AlignApp):
    """Start the cells/s progress display for a run under way; returns its ``stop``."""
    return _Watch(run_dir, app).stop


# ------------------------------------------------------------------------------- Hydra

def _urls(value) -> list[str] | None:
    from pairflow.apps.data import expand_inputs
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        value = [str(v) for v in value]
    return expand_inputs(value)


def build(cfg):
    """The app and its sinks from the Hydra config (``app=align``)."""
    from pairflow.engine import DenseMatrix, Threshold
    a, d = cfg.align, cfg.data
    sink_cfg = dict(cfg.sink)
    kind = sink_cfg.pop("type", "topk")
    if kind not in ("topk", "dense", "threshold"):
        raise ValueError(f"unknown sink {kind!r} for app=align: choose topk, dense or threshold")
    weighted = bool(a.get("capacity_tiles", True)) and kind != "dense"
    # the hits are the top-k sink: sink.k (align.top_k unless set on its own) is their k
    top_k = sink_cfg["k"] if kind == "topk" and sink_cfg.get("k") is not None else a.top_k
    app = AlignApp(_urls(d.queries) or [], _urls(d.get("targets")), top_k=top_k,
                   matrix=a.get("matrix"), gap_open=a.gap_open, gap_extend=a.gap_extend,
                   convention=str(a.get("convention", "standard")),
                   alphabet=str(a.get("alphabet", "auto")),
                   min_length_ratio=a.get("min_length_ratio"),
                   min_shared_kmers=a.get("min_shared_kmers"), kmer=a.get("kmer"),
                   weighted=weighted, fmt=str(a.get("format", "auto")),
                   evalue=a.get("evalue"), evalue_method=str(a.get("evalue_method", "spouge")),
                   mode=str(a.get("mode", "topk")), kernel=str(a.get("kernel", "auto")),
                   prefilter_options={"runs_root": str(cfg.runs_root)})
    sinks = hit_sinks(app)
    if kind == "dense":  # every score as a matrix (tiles on the chunk grid: no weighting)
        sinks.append(DenseMatrix(fields=["score"], fill=-1))
    elif kind == "threshold":
        sinks.append(Threshold(float(sink_cfg.get("t", 0)), field="score"))
    return app, sinks


def after(app: AlignApp, result, cfg) -> None:
    """After the run: tracebacks for the hits and the output files."""
    finish(app, result, validate_hits=int(cfg.align.get("validate_hits", 0) or 0))


def report(result) -> str:
    s = result.summary
    al = getattr(result, "align", None) or read_json(
        os.path.join(result.run_dir, "result", "align_summary.json"), {})
    sc = al.get("scoring", {})
    kind = "all-vs-all" if al.get("all_vs_all") else "queries x targets"
    lines = [f"app=align {kind}: {al.get('queries')} queries x {al.get('targets')} targets, "
             f"pairs={al.get('pairs')} tiles={s['tiles_total']}",
             f"scoring {sc.get('matrix')} {sc.get('gap_open')}/{sc.get('gap_extend')} "
             f"({sc.get('convention')}), alphabet {al.get('alphabet')}, top_k={al.get('top_k')}",
             f"cells {al.get('cells', 0):,} in {al.get('compute_s', 0):.2f} s of compute: "
             f"{_si(al.get('cells_per_s') or 0)}cells/s (wall {s['wall_s']:.2f} s, "
             f"tracebacks {al.get('traceback_s', 0):.2f} s)"]
    if al.get("filters"):
        lines.append("pair filters, in the order the measurements chose: "
                     + " > ".join(f["name"] for f in al["filters"]))
    for f in al.get("filters") or []:
        lines.append(f"filter {f['name']}: {f['pairs_out']}/{f['pairs_in']} pairs pass "
                     f"({f['seconds']:.3f} s)")
    st = al.get("statistics") or {}
    if st.get("method"):
        lines.append(f"E-values ({st['method']}): lambda={st['lambda']} K={st['K']} against "
                     f"{st['db_sequences']} targets, {st['db_length']:,} residues"
                     + (f"; cut-off E <= {al['evalue_cutoff']:g} kept {al.get('hits')} of "
                        f"{al.get('hits_before_evalue')}" if al.get("evalue_cutoff") else ""))
    elif st.get("why"):
        lines.append(f"no E-values: {st['why']}")
    lines.append(f"hits: {al.get('hits')}")
    if al.get("orthologs") is not None:
        lines.append(f"reciprocal best hits (ortholog pairs): {al['orthologs']}")
    for name, path in (al.get("outputs") or {}).items():
        lines.append(f"{name}: {path}")
    for name, path in s["outputs"].items():
        if name not in (al.get("outputs") or {}):
            lines.append(f"{name}: {path}")
    return "\n".join(lines)
