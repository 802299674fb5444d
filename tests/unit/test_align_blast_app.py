"""app=align's BLAST-like pieces without Ray: CIGAR counts against the aligned strings,
reciprocal best hits on hand-made top-k tables, and the options refused before compute."""
import re

import pandas as pd
import pytest

from pairflow.apps.align import AlignApp, cigar_counts, hit_sinks, reciprocal_best_hits
from pairflow.kernels.scoring import Scoring
from pairflow.kernels.smith_waterman import sw_traceback
from tests.conftest import need as _need, need_module
from tests.unit.conftest import SHARE

TUTORIAL = SHARE / "doc" / "hmmer" / "examples" / "tutorial"


def test_cigar_counts_equal_the_aligned_strings():
    from Bio import SeqIO
    recs = [str(r.seq) for r in SeqIO.parse(str(_need(TUTORIAL / "globins45.fa")), "fasta")]
    sc = Scoring.create("blosum62", 5, 1)  # cheap gaps: many gapped alignments
    seen_gaps = 0
    for a, b in zip(recs[:12], recs[12:24]):
        aln = sw_traceback(a, b, sc)
        mismatch, gapopen = cigar_counts(aln.cigar)
        qa, ta = aln.query_aligned, aln.target_aligned
        assert mismatch == sum(x != y and "-" not in (x, y) for x, y in zip(qa, ta))
        assert gapopen == len(re.findall(r"-+", qa)) + len(re.findall(r"-+", ta))
        seen_gaps += gapopen
    assert seen_gaps > 0
    assert cigar_counts("3=2I1X4D2=") == (1, 2)
    assert cigar_counts("12X3=10I1X104D2I") == (13, 3)  # runs of several digits


def _table(rows):
    return pd.DataFrame(rows, columns=["query", "target", "score", "rank"])


def test_reciprocal_best_hits_by_hand():
    rows = _table([("q1", "t1", 50, 1), ("q1", "t2", 40, 2), ("q2", "t1", 45, 1),
                   ("q3", "t3", 0, 1), ("q4", "t2", 30, 1)])
    cols = _table([("t1", "q1", 50, 1), ("t2", "q1", 40, 1), ("t3", "q3", 0, 1)])
    # q1<->t1 mutual; q2's best is t1 but t1's is q1; q3/t3 score 0 (no alignment);
    # q4's best is t2 but t2's best is q1
    assert reciprocal_best_hits(rows, cols) == [("q1", "t1")]


def test_reciprocal_best_hits_all_vs_all_reports_each_pair_once():
    top = _table([("a", "b", 9, 1), ("b", "a", 9, 1), ("c", "b", 5, 1), ("d", "c", 3, 1)])
    order = {"a": 0, "b": 1, "c": 2, "d": 3}
    assert reciprocal_best_hits(top, top, order) == [("a", "b")]


def test_statistics_options_are_checked_before_compute(tmp_path):
    glob = str(_need(TUTORIAL / "globins45.fa"))
    with pytest.raises(ValueError, match="mode must be one of"):
        AlignApp([glob], mode="best")
    with pytest.raises(ValueError, match="evalue must be > 0"):
        AlignApp([glob], evalue=0)
    with pytest.raises(ValueError, match="evalue_method"):
        AlignApp([glob], evalue_method="exact")
    # BLOSUM62 with BLAST 3/3 has no row in BLAST's tables: no E-values, so no cut-off
    with pytest.raises(ValueError, match="align.evalue needs E-values.*BLAST's table has"):
        AlignApp([glob], gap_open=6, gap_extend=3, evalue=1e-3)
    dna = tmp_path / "d.fa"
    dna.write_text(">a\nACGTACGTTGCA\n>b\nACGTTGCAACGT\n")
    app = AlignApp([str(dna)])  # nuc44: hits without E-values, and the summary says why
    assert app.karlin is None and "nuc44" in app.karlin_missing


def test_rbh_adds_a_per_column_sink_only_for_two_sets(tmp_path):
    glob = str(_need(TUTORIAL / "globins45.fa"))
    hbb = str(_need(TUTORIAL / "HBB_HUMAN"))
    assert [s.name for s in hit_sinks(AlignApp([hbb], [glob], mode="rbh"))] == \
        ["topk", "topk_cols"]
    assert [s.name for s in hit_sinks(AlignApp([glob], mode="rbh"))] == ["topk"]
    assert [s.name for s in hit_sinks(AlignApp([hbb], [glob]))] == ["topk"]


def _proteome_sample(tmp_path):
    import os
    from Bio import SeqIO
    from tests.oracles import PROTEOMES as root
    q = [(f"q{i}", str(r.seq)) for i, r in zip(range(30), SeqIO.parse(
        str(_need(os.path.join(root, "S.Aureus", "N315.faa"))), "fasta"))]
    t = [(f"t{i}", str(r.seq)) for i, r in zip(range(60), SeqIO.parse(
        str(_need(os.path.join(root, "E.Coli", "MG1655-K12.faa"))), "fasta"))]
    paths = []
    for name, recs in (("q.fa", q), ("t.fa", t)):
        (tmp_path / name).write_text("".join(f">{n}\n{s}\n" for n, s in recs))
        paths.append(str(tmp_path / name))
    return paths, q, t


def test_every_kernel_gives_parasails_scores(tmp_path):
    """compare() with Opal, parasail and the automatic choice against parasail called directly
    (the oracle), on real proteins, with a full tile and a masked one."""
    import numpy as np
    parasail = need_module("parasail")
    (qf, tf), q, t = _proteome_sample(tmp_path)
    want = np.array([[parasail.sw_striped_32(a, b, 12, 1, parasail.blosum62).score
                      for _, b in t] for _, a in q])
    mask = np.random.default_rng(3).random(want.shape) < 0.6
    left, right = [s for _, s in q], [s for _, s in t]
    for kernel in ("opal", "parasail", "auto"):
        app = AlignApp([qf], [tf], gap_open=12, gap_extend=1, kernel=kernel)
        full = app.compare(left, right, np.ones(want.shape, bool), "cpu")["score"]
        np.testing.assert_array_equal(full, want)
        part = app.compare(left, right, mask, "cpu")["score"]
        np.testing.assert_array_equal(part[mask], want[mask])


def test_auto_kernel_rule(tmp_path):
    import numpy as np
    (qf, tf), _, _ = _proteome_sample(tmp_path)
    app = AlignApp([qf], [tf], kernel="auto")
    short, long_ = ["A" * 150] * 4, ["A" * 900] * 4
    full, part = np.ones((4, 4), bool), np.eye(4, dtype=bool)
    assert app.use_opal(short, short, full)            # short targets: Opal
    assert not app.use_opal(short, short, part)        # Opal scores whole rows only
    assert not app.use_opal(short, long_, full)        # long targets: parasail
    mid, q330, q700 = ["A" * 700] * 4, ["A" * 330] * 4, ["A" * 700] * 4
    assert app.use_opal(q330, mid, full)               # up to 2.5x queries that are not long
    assert not app.use_opal(q700, mid, full)           # long queries: parasail's profile
    assert not app.use_opal(q330, ["A" * 1100] * 4, full)  # past OPAL_MAX_TARGET_LEN
    assert not AlignApp([qf], [tf], kernel="parasail").use_opal(short, short, full)
    assert AlignApp([qf], [tf], kernel="opal").use_opal(short, long_, part)
    dna = tmp_path / "d.fa"
    dna.write_text(">a\nACGTACGTTGCA\n>b\nACGTTGCAACGT\n")
    assert not AlignApp([str(dna)]).use_opal(["ACGT"], ["ACGT"], np.ones((1, 1), bool))
    with pytest.raises(ValueError, match="kernel=opal needs pyopal and a protein matrix"):
        AlignApp([str(dna)], kernel="opal")
    with pytest.raises(ValueError, match="kernel must be one of"):
        AlignApp([qf], kernel="gpu")
