"""The align app on a local Ray: every score equals Biopython's local PairwiseAligner (globins45
all-vs-all, a DNA allele sample, SwissProt/FASTA queries x globins), top-k lists equal a
brute-force sort under the stated tie rule, every traceback re-scores to its score, capacity-aware
tiles stay under their cell budget, and bad input fails before compute (also from the CLI)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.conftest import need as need_path
from tests.unit.conftest import SHARE

pytestmark = pytest.mark.ray
TUTORIAL = SHARE / "doc" / "hmmer" / "examples" / "tutorial"
WZI = SHARE / "kaptive" / "reference_database" / "wzi_wzc_db.fasta"


def need(path):
    return str(need_path(path))


def read(path, fmt="fasta"):
    from Bio import SeqIO
    return [(r.name, str(r.seq)) for r in SeqIO.parse(path, fmt)]


def biopython_scores(queries, targets, scoring, symmetric=False):
    aligner = scoring.biopython_aligner()
    out = np.full((len(queries), len(targets)), -1, np.int64)
    for i, (_, q) in enumerate(queries):
        for j, (_, t) in enumerate(targets):
            if symmetric and j <= i:
                continue
            out[i, j] = int(aligner.score(q, t))
            if symmetric:
                out[j, i] = out[i, j]
    return out


def brute_top_k(scores, k, targets, exclude_self=False):
    """Per query: targets by score descending, ties: shorter target, then input order."""
    out = []
    for i in range(scores.shape[0]):
        cand = [j for j in range(scores.shape[1]) if not (exclude_self and i == j)]
        cand.sort(key=lambda j: (-scores[i, j], len(targets[j][1]), j))
        out.append(cand[:k])
    return out


def check_hits(res, queries, targets, scores, k, scoring, exclude_self=False):
    """Hits = brute-force top-k; every traceback is consistent and re-scores to its score."""
    from pairflow.kernels.smith_waterman import Alignment, rescore
    hits = res.hits
    qname = [n for n, _ in queries]
    tname = [n for n, _ in targets]
    want = brute_top_k(scores, k, targets, exclude_self)
    qseq, tseq = dict(queries), dict(targets)
    blast = ["qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend",
             "sstart", "send", "evalue", "bitscore"]  # BLAST's -outfmt 6, then score and cigar
    assert list(hits.columns[:14]) == blast + ["score", "cigar"]
    for i, name in enumerate(qname):
        mine = hits[hits.qseqid == name]
        assert list(mine["rank"]) == list(range(1, len(want[i]) + 1))
        assert list(mine.sseqid) == [tname[j] for j in want[i]], name
        assert list(mine.score) == [scores[i, j] for j in want[i]], name
    for row in hits.itertuples():
        q, t = qseq[row.qseqid], tseq[row.sseqid]
        aln = Alignment(row.score, row.qstart, row.qend, row.sstart, row.send, row.cigar,
                        row.query_aligned, row.target_aligned, row.matches, row.length)
        assert rescore(aln, scoring) == row.score
        assert q[row.qstart - 1:row.qend] == row.query_aligned.replace("-", "")
        assert t[row.sstart - 1:row.send] == row.target_aligned.replace("-", "")
        ops = "".join(op * int(n) for n, op in re.findall(r"(\d+)([=XID])", row.cigar))
        assert len(ops) == row.length and ops.count("=") == row.matches
        assert row.pident == pytest.approx(100 * row.matches / row.length, abs=1e-3)
        assert row.mismatch == sum(a != b and "-" not in (a, b)
                                   for a, b in zip(row.query_aligned, row.target_aligned))
        assert row.gapopen == len(re.findall(r"-+", row.query_aligned)) + \
            len(re.findall(r"-+", row.target_aligned))
    tsv = pd.read_csv(res.align["outputs"]["tsv"], sep="\t")
    assert list(tsv.columns) == list(hits.columns[:14]) and len(tsv) == len(hits)
    assert (tsv.score.to_numpy() == hits.score.to_numpy()).all()
    pq = pd.read_parquet(res.align["outputs"]["parquet"])
    assert pq.equals(hits)


@pytest.fixture(scope="module")
def globins():
    path = need(TUTORIAL / "globins45.fa")
    from pairflow.kernels.scoring import Scoring
    sc = Scoring.create("blosum62", 11, 1)
    recs = read(path)
    return path, recs, sc, biopython_scores(recs, recs, sc, symmetric=True)


def test_globins_all_vs_all_scores_topk_and_tracebacks(ray_local, runs, globins):
    """Every one of the 990 scores (dense sink, so tiles on the leaf grid: no weighting) equals
    Biopython's; k = 3 over many small tiles is merged into the brute-force lists."""
    import zarr
    from pairflow.apps.align import align
    from pairflow.engine.pairs.sinks import DenseMatrix
    path, recs, sc, bio = globins
    res = align(path, top_k=3, matrix="blosum62", gap_open=11, gap_extend=1, runs_root=runs,
                progress=False, leaf_items=4, weighted=False, validate=0.2, validate_hits=20,
                extra_sinks=[DenseMatrix(fields=["score"], fill=-1)])
    group = zarr.open_group(res.outputs["dense"], mode="r")
    position = {name: i for i, (name, _) in enumerate(recs)}
    order = [position[k.split("/", 1)[1]] for k in group.attrs["row_keys"]]
    got = np.full((45, 45), -1, np.int64)
    got[np.ix_(order, order)] = group["score"][...]
    off = ~np.eye(45, dtype=bool)
    assert np.array_equal(got[off], bio[off])
    check_hits(res, recs, recs, bio, 3, sc, exclude_self=True)
    s = res.align
    assert s["pairs"] == 990 and s["all_vs_all"] and s["hits"] == 135
    assert s["cells"] == sum(len(a) * len(b) for i, (_, a) in enumerate(recs)
                             for _, b in recs[i + 1:])
    assert s["cells_per_s"] > 0 and s["validated_hits"] == 20
    assert res.summary["validated_tiles"] >= 1
    assert json.load(open(os.path.join(res.run_dir, "result", "align_summary.json")))["hits"] \
        == 135


def test_weighted_tiles_refuse_the_dense_sink(ray_local, runs, globins):
    from pairflow.apps.align import align
    from pairflow.engine.errors import PairflowError
    from pairflow.engine.pairs.sinks import DenseMatrix
    with pytest.raises(PairflowError, match="dense sink needs tiles on its chunk grid"):
        align(globins[0], runs_root=runs, progress=False, extra_sinks=[DenseMatrix()])


def test_dna_allele_sample_all_vs_all(ray_local, runs, tmp_path):
    """40 wzi/wzc alleles (115-447 bp), nuc44 10/1, capacity-aware tiles: k = 39 lists every
    other allele, so all 780 scores (both directions) are checked against Biopython."""
    from pairflow.apps.align import align
    from pairflow.kernels.scoring import Scoring
    recs = read(need(WZI))
    rng = np.random.default_rng(11)
    sample = [recs[i] for i in sorted(rng.choice(len(recs), 40, replace=False))]
    path = tmp_path / "alleles.fa"
    path.write_text("".join(f">{n}\n{s}\n" for n, s in sample))
    sc = Scoring.create("nuc44", 10, 1)
    bio = biopython_scores(sample, sample, sc, symmetric=True)
    res = align(str(path), top_k=39, matrix="nuc44", gap_open=10, gap_extend=1, runs_root=runs,
                progress=False)
    assert res.align["alphabet"] == "dna" and len(res.hits) == 40 * 39
    check_hits(res, sample, sample, bio, 39, sc, exclude_self=True)


def test_queries_x_targets_skewed_lengths(ray_local, runs, globins):
    """HBB_HUMAN (FASTA) and 7LESS_DROME (SwissProt, 2554 aa) x the 45 globins: a Rectangle whose
    tiles are cut by cells, each within the cell budget unless it is a single pair."""
    from pairflow.apps.align import align
    from pairflow.engine.run.rundir import read_json
    from pairflow.engine.pairs.space import PairWeights, Rectangle, leaves
    path, targets, sc, _ = globins
    hbb, sev = need(TUTORIAL / "HBB_HUMAN"), need(TUTORIAL / "7LESS_DROME")
    queries = read(hbb) + read(sev, "swiss")
    bio = biopython_scores(queries, targets, sc)
    # leaf 8 and a budget of ~0.1 ms of work (<= 0.4 M cells; no per-tile overhead, so the
    # cost model does not enlarge it): 7LESS_DROME pairs (2554 x ~150 cells) go alone
    res = align([hbb, sev], path, top_k=5, runs_root=runs, progress=False, leaf_items=8,
                target_tile_s=0.0001, tile_overhead_s=0.0)
    check_hits(res, queries, targets, bio, 5, sc)
    assert res.hits.qseqid.tolist()[:1] == ["HBB_HUMAN"]  # input order of the queries
    meta = read_json(os.path.join(res.run_dir, "meta.json"))
    budget = meta["measured"]["max_weight"]
    rows = sorted([len(s) for _, s in queries])
    cols = [len(s) for _, s in sorted(enumerate(targets), key=lambda x: (len(x[1][1]), x[0]))]
    w = PairWeights(rows, [c for c in cols])
    space = Rectangle(2, 45)
    tiles = read_json(os.path.join(res.run_dir, "tiles.json"))
    assert sum(t["pairs"] for t in tiles) == 90
    for t in tiles:
        cells = space.weight(t["r0"], t["r1"], t["c0"], t["c1"], w)
        assert cells <= budget * (1 + 1e-9) or t["pairs"] == 1, (t, cells, budget)
    assert len(tiles) > len(leaves(space, meta["leaf_items"]))  # the budget did cut tiles
    assert any(t["r1"] - t["r0"] == 1 and t["r0"] == 1 for t in tiles)  # 7LESS_DROME alone


def test_bad_input_fails_before_compute(ray_local, runs, tmp_path, globins):
    from pairflow.apps.align import align
    from pairflow.engine.errors import InputError
    bad = tmp_path / "bad.fa"
    bad.write_text(">ok\nMKVLAHWQ\n>odd\nMKVJLA\n")
    for kwargs, pattern in [
        (dict(queries=str(bad)),
         r"record 'odd' \(#2\): letter 'J' at position 4 is not in the blosum62"),
        (dict(queries=need(WZI), alphabet="protein"), r"looks like DNA"),
        (dict(queries=globins[0], top_k=0), r"top_k must be >= 1"),
    ]:
        with pytest.raises((InputError, ValueError), match=pattern):
            align(runs_root=runs, progress=False, **kwargs)
    assert not os.path.exists(runs) or not os.listdir(runs)  # no run was even started


def test_cli_align_run_and_bad_input(tmp_path):
    """The real console script: queries x targets with the issue's options, then k < 1."""
    hbb, glob = need(TUTORIAL / "HBB_HUMAN"), need(TUTORIAL / "globins45.fa")
    exe = os.path.join(os.path.dirname(sys.executable), "pairflow")
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = subprocess.run([exe, "app=align", f"data.queries={hbb}", f"data.targets={glob}",
                          "align.top_k=5", "align.matrix=blosum62", "align.gap_open=11",
                          "align.gap_extend=1", f"runs_root={tmp_path}/runs",
                          "cluster.num_cpus=2", "cluster.object_store_mb=512"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "1 queries x 45 targets" in out.stdout and "cells/s" in out.stdout
    assert "cells/s" in out.stderr  # the progress display
    tsv = [l.split(": ", 1)[1] for l in out.stdout.splitlines() if l.startswith("tsv: ")][0]
    hits = pd.read_csv(tsv, sep="\t")
    assert len(hits) == 5 and (hits.qseqid == "HBB_HUMAN").all()
    assert hits.sseqid.iloc[0].startswith("HBB_") and (np.diff(hits.score) <= 0).all()
    assert ((hits.pident > 50) & (hits.pident <= 100)).all()
    bad = subprocess.run([exe, "app=align", f"data.queries={hbb}", "align.top_k=0",
                          f"runs_root={tmp_path}/r2"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "top_k must be >= 1" in bad.stderr
