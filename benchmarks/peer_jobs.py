"""The all-pairs peers' four jobs, and each peer as the script a user would run for them.

    .venv/bin/python benchmarks/peer_jobs.py CASE PEER OUT.npz   # one peer, one case, timed
                                                                  # from outside (peers.py)
    .venv/bin/python benchmarks/peer_jobs.py --warm RUNS_ROOT     # a pairflow session serving
                                                                  # runs (one case a stdin line)

Why a module of its own: ``benchmarks/peers.py`` times every contender as a fresh process, end
to end (interpreter start and imports included), as a user's script or ``pairflow`` command
would run; this is what those processes run, and what ``peers.py`` reads their answers with.

The cases (``CASES``) are the CLI's defaults for each job, and every peer calls the same stages
of the same app (parse, preprocess, compare), on 2 cores:

* ``genomes``: ``pairflow`` (the 16 ragout genomes, exact k-mer Jaccard, k = 21, dense matrix);
* ``loci``: ``pairflow data.inputs=<Klebsiella_k_locus_primary_reference.gbk> data.item=record``
  (the 162 Klebsiella capsule loci as records of one GenBank file, k = 21, dense matrix);
* ``reads``: ``pairflow data.inputs=<reads_1.fq.gz> data.item=record data.k=7
  jaccard.kernel=bitset sink=topk sink.k=10`` (bowtie2's 10,000 lambda reads, benchmarks/
  many_small.py's setup: each read's 10 most similar reads);
* ``proteomes``: ``pairflow app=phylogeny`` (the 16 proteomes' composition vectors, k = 5,
  dense distance matrix, then the neighbour-joining tree, which every peer builds too).

The peers (``PEERS``), each as a user would write it with the app's stages:

* ``multiprocessing``: every item in memory. A file per item is parsed by a spawned pool of 2;
  records (one file) are parsed once in the script. Then a forked pool of 2 compares the upper
  triangle in blocks (top-k: the app's fused top-k kernel per block, merged per item);
* ``dask.array``: an index array in 4 chunks (reads: 10), ``da.blockwise`` over (i, j) blocks,
  each loading its rows' and columns' items and comparing them (blocks below the diagonal
  skipped); the threaded scheduler (dask.array's default), 2 workers; top-k from the matrix;
* ``dask.bag``: ``from_sequence`` of items (reads: of blocks of 1,000 reads) mapped to their
  loaded items, ``product`` with itself, the pairs i <= j compared; the processes scheduler
  (dask.bag's default), 2 workers.

Every answer is an ``.npz``: ``keys`` and either ``matrix`` (upper triangle of the dense field)
or ``top`` (each item's 10 best scores, best first), which ``peers.py`` compares across
contenders (top-k by scores: ties may name different reads).
"""
from __future__ import annotations

import glob
import json
import os
import sys
import time

import numpy as np

TOP_K = 10
WORKERS = 2


def _data(rel: str) -> str:
    from pairflow.apps.data import data_path
    return data_path(rel)


CASES = {
    "genomes": {"what": "16 genomes, k = 21, dense", "args": []},
    "loci": {"what": "162 Klebsiella loci as records, k = 21, dense",
             "args": ["data.inputs=${pairflow_data:usr/share/kaptive/reference_database/"
                      "Klebsiella_k_locus_primary_reference.gbk}", "data.item=record"]},
    "reads": {"what": "10,000 reads, k = 7, bitset, top 10",
              "args": ["data.inputs=${pairflow_data:usr/share/doc/bowtie2/examples/reads/"
                       "reads_1.fq.gz}", "data.item=record", "data.k=7",
                       "jaccard.kernel=bitset", "sink=topk", f"sink.k={TOP_K}"]},
    "proteomes": {"what": "16 proteomes, composition vectors k = 5, dense + NJ tree",
                  "args": ["app=phylogeny"]},
}
FIELD = {"genomes": "similarity", "loci": "similarity", "reads": "similarity",
         "proteomes": "distance"}
GROUP = {"reads": 1000}          # items per dask.bag element (else 1)
CHUNKS = {"reads": 10}           # dask.array chunks per side (else 4)
BLOCKS = {"reads": 1024}         # multiprocessing: items per block side (else n / 8)

_APPS: dict = {}


def build_app(case: str):
    """The app ``pairflow`` builds for the case's command (one per process)."""
    if case in _APPS:
        return _APPS[case]
    from pairflow.apps.data import data_dir
    if case == "proteomes":
        from pairflow.apps.phylogeny import PhylogenyApp
        app = PhylogenyApp(sorted(glob.glob(os.path.join(data_dir(), "proteomes", "*",
                                                         "*.faa"))), k=5)
    else:
        from pairflow.apps.jaccard import JaccardApp
        if case == "genomes":
            app = JaccardApp(sorted(glob.glob(_data("usr/share/doc/ragout/examples") +
                                              "/*/references/*.fasta.gz")), k=21)
        elif case == "loci":
            app = JaccardApp([_data("usr/share/kaptive/reference_database/"
                                    "Klebsiella_k_locus_primary_reference.gbk")],
                             k=21, item="record")
        else:
            app = JaccardApp([_data("usr/share/doc/bowtie2/examples/reads/reads_1.fq.gz")],
                             k=7, item="record", kernel="bitset")
    _APPS[case] = app
    return app


def is_topk(case: str) -> bool:
    return case == "reads"


def load(case: str, keys) -> list | np.ndarray:
    """Items ``keys`` ready to compare: a pack for records, else one item each."""
    from pairflow.engine import fetch
    app = build_app(case)
    if app.packs() if hasattr(app, "packs") else False:
        return app.parse_pack(list(keys))
    return [app.preprocess(k, app.parse(k, fetch(app.url(k))), "cpu") for k in keys]


def _take(items, idx):
    return items[idx] if isinstance(items, np.ndarray) else [items[i] for i in idx]


def compare(case: str, left, right, mask):
    """The dense field of a block, or (top-k) the fused kernel's candidates (i, j, v)."""
    app = build_app(case)
    if is_topk(case):
        from pairflow.engine.pairs.sinks.base import TopKReduction
        (c,) = app.compare_reduced(left, right, mask, "cpu",
                                   [TopKReduction("similarity", TOP_K, True, True, True)])
        return c.i, c.j, c.values
    return np.asarray(app.compare(left, right, mask, "cpu")[FIELD[case]], float)


def _tri_mask(r0, r1, c0, c1):
    if r0 != c0:
        return np.ones((r1 - r0, c1 - c0), bool)
    return np.triu(np.ones((r1 - r0, c1 - c0), bool), 1)


class Answer:
    """What every contender hands back: the upper triangle of the dense field, or each item's
    best scores (from candidates, merged)."""

    def __init__(self, case: str, n: int):
        self.case, self.n = case, n
        self.matrix = None if is_topk(case) else np.zeros((n, n))
        self.cand = [] if is_topk(case) else None

    def add(self, r0, c0, got):
        if self.cand is None:
            self.matrix[r0:r0 + got.shape[0], c0:c0 + got.shape[1]] = got
        else:
            i, j, v = got
            self.cand.append((np.asarray(i) + r0, np.asarray(j) + c0, np.asarray(v)))

    def top(self) -> np.ndarray:
        """Each item's ``TOP_K`` best scores over both sides of the triangle, best first."""
        i = np.concatenate([c[0] for c in self.cand])
        j = np.concatenate([c[1] for c in self.cand])
        v = np.concatenate([c[2] for c in self.cand])
        keep = i != j
        i, j, v = i[keep], j[keep], v[keep]
        # every pair once, seen from both items
        pair = np.unique(np.stack([np.minimum(i, j), np.maximum(i, j), v], 1), axis=0)
        who = np.concatenate([pair[:, 0], pair[:, 1]]).astype(np.int64)
        val = np.concatenate([pair[:, 2], pair[:, 2]])
        order = np.lexsort((-val, who))
        who, val = who[order], val[order]
        out = np.full((self.n, TOP_K), np.nan)
        starts = np.searchsorted(who, np.arange(self.n))
        ends = np.searchsorted(who, np.arange(self.n), side="right")
        for x in range(self.n):
            s = val[starts[x]:min(ends[x], starts[x] + TOP_K)]
            out[x, :len(s)] = s
        return out

    def save(self, path: str, keys) -> None:
        if self.cand is None:
            np.savez(path, keys=np.asarray(keys, dtype=object), matrix=np.triu(self.matrix, 1))
        else:
            np.savez(path, keys=np.asarray(keys, dtype=object), top=self.top())
        if self.case == "proteomes":  # the job's end, as pairflow app=phylogeny's
            from pairflow.apps.phylogeny import nj_newick
            m = np.triu(self.matrix, 1)
            with open(path + ".nwk", "w") as fh:
                fh.write(nj_newick(m + m.T, [str(k) for k in keys]))


def _edges(n: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(n, a + size)) for a in range(0, n, size)]


# ---- multiprocessing, every item in memory ------------------------------------------------

ITEMS = None  # inherited by the forked compare workers


def _load_one(args):
    case, key = args
    return load(case, [key])[0]


def _block(args):
    case, r0, r1, c0, c1 = args
    return r0, c0, compare(case, _take(ITEMS, range(r0, r1)), _take(ITEMS, range(c0, c1)),
                           _tri_mask(r0, r1, c0, c1))


def multiprocessing_peer(case: str) -> tuple[list, Answer]:
    import multiprocessing
    global ITEMS
    app = build_app(case)
    keys = list(app.keys())
    n = len(keys)
    if getattr(app, "packs", lambda: False)():
        ITEMS = load(case, keys)  # one file: parsed once
    else:
        with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
            ITEMS = pool.map(_load_one, [(case, k) for k in keys], chunksize=1)
    edges = _edges(n, BLOCKS.get(case, -(-n // 8)))
    blocks = [(case, *a, *b) for i, a in enumerate(edges) for b in edges[i:]]
    blocks.sort(key=lambda b: -(b[2] - b[1]) * (b[4] - b[3]))  # big blocks first
    ans = Answer(case, n)
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        for r0, c0, got in pool.imap_unordered(_block, blocks):
            ans.add(r0, c0, got)
    return keys, ans


# ---- dask ---------------------------------------------------------------------------------

def dask_array_peer(case: str) -> tuple[list, Answer]:
    import dask
    import dask.array as da
    app = build_app(case)
    keys = list(app.keys())
    n = len(keys)
    size = -(-n // CHUNKS.get(case, 4))
    topk = is_topk(case)

    def block(rows, cols):
        if rows[0] > cols[-1]:  # below the diagonal: the matrix is symmetric
            return np.full((len(rows), len(cols)), np.nan)
        left, right = load(case, [keys[i] for i in rows]), load(case, [keys[j] for j in cols])
        mask = _tri_mask(rows[0], rows[-1] + 1, cols[0], cols[-1] + 1)
        if topk:  # the plain kernel's J (the top-k is taken from the matrix)
            return np.asarray(app.compare(left, right, mask, "cpu")["similarity"], float)
        return compare(case, left, right, mask)

    index = da.arange(n, chunks=size)
    m = da.blockwise(block, "ij", index, "i", index, "j", dtype=float)
    with dask.config.set(scheduler="threads", num_workers=WORKERS):
        m = m.compute()
    ans = Answer(case, n)
    if topk:
        # each row's k best, from the symmetric matrix
        full = np.triu(np.nan_to_num(m, nan=0.0), 1)
        del m
        full += full.T
        np.fill_diagonal(full, -np.inf)
        part = np.argpartition(-full, TOP_K, axis=1)[:, :TOP_K].ravel()
        rows = np.repeat(np.arange(n), TOP_K)
        ans.add(0, 0, (rows, part, full[rows, part]))
    else:
        ans.add(0, 0, np.triu(np.nan_to_num(m), 1))
    return keys, ans


def _bag_load(case, keys, group):
    return group, load(case, [keys[i] for i in group])


def _bag_compare(case, ab):
    (ga, a), (gb, b) = ab
    mask = _tri_mask(ga[0], ga[-1] + 1, gb[0], gb[-1] + 1)
    return ga[0], gb[0], compare(case, a, b, mask)


def dask_bag_peer(case: str) -> tuple[list, Answer]:
    import functools

    import dask.bag as db
    app = build_app(case)
    keys = list(app.keys())
    n = len(keys)
    groups = [list(range(a, b)) for a, b in _edges(n, GROUP.get(case, 1))]
    items = db.from_sequence(groups, npartitions=min(4, len(groups))).map(
        functools.partial(_bag_load, case, keys))
    pairs = items.product(items).filter(lambda ab: ab[0][0][0] <= ab[1][0][0])
    got = pairs.map(functools.partial(_bag_compare, case)).compute(scheduler="processes",
                                                                  num_workers=WORKERS)
    ans = Answer(case, n)
    for r0, c0, block in got:
        ans.add(r0, c0, block)
    return keys, ans


PEERS = {"multiprocessing": multiprocessing_peer, "dask.array": dask_array_peer,
         "dask.bag": dask_bag_peer}


# ---- pairflow, warm: a session that serves runs -------------------------------------------

def serve_warm(runs_root: str) -> None:
    """A pairflow session (Ray up, actors kept warm between runs); each stdin line names a
    case, each answer (stdout, one JSON line) is the run's wall seconds from building the app
    to its outputs written, and its run directory."""
    import pairflow
    from pairflow.engine import DenseMatrix, TopK
    sess = pairflow.session(num_cpus=WORKERS)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = line.strip()
        if not case:
            continue
        _APPS.pop(case, None)
        t0 = time.perf_counter()
        app = build_app(case)
        if is_topk(case):
            sinks = [TopK(TOP_K, field="similarity")]
        elif case == "proteomes":
            sinks = [DenseMatrix(fields=["distance"], diagonal={"distance": 0.0})]
        else:
            sinks = [DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0})]
        res = sess.allpairs(app=app, sinks=sinks, runs_root=runs_root, progress=False,
                            wait=True)
        if case == "proteomes":
            from pairflow.apps.phylogeny import write_tree
            write_tree(res)
        t = time.perf_counter() - t0
        print(json.dumps({"case": case, "wall_s": t, "outputs": dict(res.outputs),
                          "executor": res.summary.get("executor"),
                          "compute_s": res.summary.get("compute_s")}), flush=True)
    sess.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--warm"]:
        serve_warm(argv[1])
        return 0
    case, peer, out = argv
    keys, ans = PEERS[peer](case)
    ans.save(out, keys)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
