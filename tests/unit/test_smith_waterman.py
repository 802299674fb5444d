"""Smith-Waterman kernel: parasail scores against Biopython, a numpy Gotoh reference, and hand sums.

Biopython's ``PairwiseAligner`` is the oracle for scores; ``sw_reference`` is a second, plain-array
opinion used where Biopython would be slow (random sweeps, 16-bit saturation); tracebacks are
checked by re-scoring their aligned strings.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import need as _need, need_module

from pairflow.apps.data import data_root
from pairflow.kernels.scoring import Scoring, detect_alphabet, validate
from pairflow.kernels.smith_waterman import (
    Alignment,
    cells,
    rescore,
    sw_reference,
    sw_reference_batch,
    sw_scores,
    sw_top_k,
    sw_traceback,
    top_k,
)

SHARE = Path(data_root()) / "usr" / "share"
TUTORIAL = SHARE / "doc" / "hmmer" / "examples" / "tutorial"
WZI_WZC = SHARE / "kaptive" / "reference_database" / "wzi_wzc_db.fasta"

AMINO = "ARNDCQEGHILKMFPSTWYV"


def _fasta(path: Path) -> list[tuple[str, str]]:
    from Bio import SeqIO

    return [(r.id, str(r.seq)) for r in SeqIO.parse(str(path), "fasta")]


@pytest.fixture(scope="module")
def globins() -> list[tuple[str, str]]:
    recs = _fasta(_need(TUTORIAL / "globins45.fa"))
    assert len(recs) == 45
    return recs


@pytest.fixture(scope="module")
def hbb_human() -> str:
    ((_, seq),) = _fasta(_need(TUTORIAL / "HBB_HUMAN"))
    return seq


@pytest.fixture(scope="module")
def sevenless() -> str:
    from Bio import SeqIO

    return str(SeqIO.read(str(_need(TUTORIAL / "7LESS_DROME")), "swiss").seq)


@pytest.fixture(scope="module")
def alleles() -> list[tuple[str, str]]:
    recs = _fasta(_need(WZI_WZC))
    assert len(recs) == 604
    return recs


@pytest.fixture(scope="module")
def globin_scores(globins) -> np.ndarray:
    seqs = [s for _, s in globins]
    return sw_scores(seqs, seqs, Scoring.create("blosum62", 11, 1))


def _bio(matrix_name: str, open_score: float, extend_score: float):
    from Bio.Align import PairwiseAligner, substitution_matrices

    return PairwiseAligner(mode="local", substitution_matrix=substitution_matrices.load(matrix_name),
                           open_gap_score=open_score, extend_gap_score=extend_score)


def _check_alignment(aln: Alignment, q: str, t: str, scoring: Scoring) -> None:
    """The traceback re-scores to its score, and CIGAR, strings and coordinates tell one story."""
    assert rescore(aln, scoring) == aln.score
    assert len(aln.query_aligned) == len(aln.target_aligned) == aln.length
    assert q[aln.qstart - 1 : aln.qend] == aln.query_aligned.replace("-", "")
    assert t[aln.sstart - 1 : aln.send] == aln.target_aligned.replace("-", "")
    cols = []
    for n, op in re.findall(r"(\d+)([=XID])", aln.cigar):
        cols.append(op * int(n))
    cols = "".join(cols)
    assert re.fullmatch(r"(\d+[=XID])*", aln.cigar)
    assert len(cols) == aln.length
    for op, a, b in zip(cols, aln.query_aligned, aln.target_aligned):
        expected = "I" if b == "-" else "D" if a == "-" else "=" if a == b else "X"
        assert op == expected
    assert aln.matches == cols.count("=")
    assert 0.0 <= aln.identity <= 1.0


# ----------------------------------------------------------------------------- gap convention

@pytest.mark.parametrize("gap_len", [1, 2, 3, 5])
def test_gap_convention_by_hand(gap_len):
    # 20 identical letters around one forced gap in the query; mismatches cost 100 so no
    # alignment can route around the gap: score = 20*5 - gap cost.
    q = "A" * 10 + "C" * 10
    t = "A" * 10 + "G" * gap_len + "C" * 10
    std = Scoring.create("match:5,mismatch:-100", gap_open=11, gap_extend=1)
    blast = Scoring.create("match:5,mismatch:-100", gap_open=11, gap_extend=1, convention="blast")
    want_std = 100 - (11 + (gap_len - 1) * 1)      # open + (L-1)*extend
    want_blast = 100 - (11 + gap_len * 1)          # open + L*extend
    assert std.gap_cost(gap_len) == 11 + (gap_len - 1)
    assert blast.gap_cost(gap_len) == 11 + gap_len
    for scoring, want in [(std, want_std), (blast, want_blast)]:
        assert sw_scores([q], [t], scoring)[0, 0] == want
        assert sw_scores([t], [q], scoring)[0, 0] == want
        assert sw_reference(q, t, scoring) == want
        aln = sw_traceback(q, t, scoring)
        assert aln.score == want and aln.cigar == f"10={gap_len}D10="
        _check_alignment(aln, q, t, scoring)

    from Bio.Align import PairwiseAligner

    # The mapping the docs state: parasail/standard open=11, extend=1 is Biopython -11/-1
    # (open_gap_score is the score of the first gap position), and BLAST 11/1 is Biopython -12/-1.
    bio = PairwiseAligner(mode="local", match_score=5, mismatch_score=-100,
                          open_gap_score=-11, extend_gap_score=-1)
    assert bio.score(q, t) == want_std
    bio.open_gap_score = -12
    assert bio.score(q, t) == want_blast
    assert std.biopython_aligner().score(q, t) == want_std
    assert blast.biopython_aligner().score(q, t) == want_blast


@pytest.mark.parametrize("matrix", ["blosum62", "pam250"])
def test_blast_convention_is_standard_with_open_plus_extend(globins, matrix):
    seqs = [s for _, s in globins[::3]]
    for o, e in [(11, 1), (10, 2), (0, 3), (5, 0)]:
        blast = sw_scores(seqs, seqs, Scoring.create(matrix, o, e, convention="blast"))
        std = sw_scores(seqs, seqs, Scoring.create(matrix, o + e, e))
        assert np.array_equal(blast, std)


# ----------------------------------------------------------------------------- matrices

@pytest.mark.parametrize("ours,bio", [("blosum62", "BLOSUM62"), ("blosum45", "BLOSUM45"),
                                      ("blosum80", "BLOSUM80"), ("blosum90", "BLOSUM90"),
                                      ("pam30", "PAM30"), ("pam70", "PAM70"), ("pam250", "PAM250"),
                                      ("NUC.4.4", "NUC.4.4"), ("EDNAFULL", "NUC.4.4")])
def test_matrices_equal_biopython(ours, bio):
    from Bio.Align import substitution_matrices

    ref = substitution_matrices.load(bio)
    scoring = Scoring.create(ours)
    assert scoring.letters == set(ref.alphabet)
    for a in ref.alphabet:
        for b in ref.alphabet:
            assert scoring.substitution(a, b) == ref[a][b], (a, b)
            assert scoring.substitution(a.lower(), b) == ref[a][b]


def test_matrix_names_and_alphabets():
    assert Scoring.create("BLOSUM62").matrix == "blosum62"
    assert Scoring.create("blosum62").alphabet == "protein"
    for name in ["nuc44", "NUC.4.4", "ednafull", "dnafull"]:
        s = Scoring.create(name)
        assert s.matrix == "nuc44" and s.alphabet == "dna"
    mm = Scoring.create("match:2, mismatch:-3")
    assert mm.matrix == "match:2,mismatch:-3" and mm.alphabet == "dna"
    assert mm.letters == set("ACGT")
    assert mm.substitution("A", "A") == 2 and mm.substitution("A", "G") == -3
    n = Scoring.create("match:1,mismatch:-2,alphabet:acgtn")
    assert n.letters == set("ACGTN")


def test_scoring_pickles_and_hashes():
    s = Scoring.create("pam250", 10, 2, "blast")
    s2 = pickle.loads(pickle.dumps(s))
    assert s2 == s and hash(s2) == hash(s)
    assert (s2.open, s2.extend) == (12, 2)
    assert s2.parasail_matrix() is s.parasail_matrix()


def test_detect_alphabet():
    assert detect_alphabet(["ACGTACGTNNACGT", "acgtacgtacgtacgtacgr"]) == "dna"
    assert detect_alphabet(["ACGT" * 10, "MKVLAAGIV"]) == "protein"
    assert detect_alphabet(["RYKMSWRYKM"]) == "protein"  # IUPAC letters but hardly any A/C/G/T
    with pytest.raises(ValueError):
        detect_alphabet([])


# ----------------------------------------------------------------------------- acceptance: Biopython

def test_globins45_all_vs_all_equals_biopython(globins, globin_scores):
    seqs = [s for _, s in globins]
    bio = _bio("BLOSUM62", -11, -1)
    want = np.array([[bio.score(a, b) for b in seqs] for a in seqs])
    assert globin_scores.shape == (45, 45) and globin_scores.dtype == np.int32
    assert np.array_equal(globin_scores, want)
    assert np.array_equal(globin_scores, globin_scores.T)
    # every method/width gives the same answer; they differ only in speed
    scoring = Scoring.create("blosum62", 11, 1)
    for method in ["striped", "scan"]:
        for width in [8, 16, 32]:
            assert np.array_equal(sw_scores(seqs, seqs, scoring, method=method, width=width), want)
    # the public-wrapper path (used when parasail's ctypes library is not reachable)
    assert np.array_equal(sw_scores(seqs, seqs, scoring, _direct=False), want)
    # and the numpy reference, one query against all targets at a time
    ref = np.stack([sw_reference_batch(q, seqs, scoring) for q in seqs])
    assert np.array_equal(ref, want)


def test_dna_alleles_sample_equals_biopython(alleles):
    rng = np.random.default_rng(20240607)
    idx = rng.choice(len(alleles), size=(60, 2))
    qs = [alleles[i][1] for i, _ in idx]
    ts = [alleles[j][1] for _, j in idx]
    scoring = Scoring.create("nuc44", 10, 1)
    bio = _bio("NUC.4.4", -10, -1)
    want = np.array([bio.score(q, t) for q, t in zip(qs, ts)])
    got = sw_scores(qs, ts, scoring, mask=np.eye(60, dtype=bool))
    assert np.array_equal(np.diag(got), want)
    assert (got[~np.eye(60, dtype=bool)] == -1).all()  # masked pairs are not computed
    assert want.max() > 127  # the sample includes pairs that overflow 8 bits
    for q, t, w in zip(qs[:20], ts[:20], want[:20]):
        aln = sw_traceback(q, t, scoring)
        assert aln.score == w
        _check_alignment(aln, q, t, scoring)
    assert np.array_equal(
        [sw_reference(q, t, scoring) for q, t in zip(qs[:10], ts[:10])], want[:10])


def test_match_mismatch_dna_equals_biopython(alleles):
    from Bio.Align import PairwiseAligner

    seqs = [s for _, s in alleles[::50]]
    scoring = Scoring.create("match:2,mismatch:-3", 5, 2)
    bio = PairwiseAligner(mode="local", match_score=2, mismatch_score=-3,
                          open_gap_score=-5, extend_gap_score=-2)
    want = np.array([[bio.score(a, b) for b in seqs] for a in seqs])
    assert np.array_equal(sw_scores(seqs, seqs, scoring), want)


def test_linear_gaps_are_exact(globins):
    """open == extend: parasail 1.3.4's striped kernels get these wrong, so scan must be used."""
    seqs = [s for _, s in globins[:12]]
    for o in [0, 1, 2, 5]:
        scoring = Scoring.create("blosum62", o, o)
        want = np.array([[scoring.biopython_aligner().score(a, b) for b in seqs] for a in seqs])
        for method in ["striped", "scan", "auto"]:
            assert np.array_equal(sw_scores(seqs, seqs, scoring, method=method), want), (o, method)
    # BLAST 0/2 is standard 2/2: linear too
    blast = Scoring.create("blosum62", 0, 2, "blast")
    assert blast.open == blast.extend == 2
    assert np.array_equal(sw_scores(seqs, seqs, blast, method="striped"),
                          sw_scores(seqs, seqs, Scoring.create("blosum62", 2, 2)))


# ----------------------------------------------------------------------------- tracebacks

def test_globin_tracebacks_rescore(globins, globin_scores):
    seqs = [s for _, s in globins]
    scoring = Scoring.create("blosum62", 11, 1)
    for i, q in enumerate(seqs):
        for j, t in enumerate(seqs):
            aln = sw_traceback(q, t, scoring)
            assert aln.score == globin_scores[i, j]
            _check_alignment(aln, q, t, scoring)
    self_aln = sw_traceback(seqs[0], seqs[0], scoring)
    assert self_aln.identity == 1.0 and self_aln.cigar == f"{len(seqs[0])}="
    # parasail's own CIGAR prepends bogus insertions when the alignment starts in the first
    # target column (GYDLA x A gave "4I1="); ours is rebuilt from the aligned strings
    edge = sw_traceback("GYDLA", "A", scoring)
    assert (edge.cigar, edge.qstart, edge.qend, edge.sstart, edge.send) == ("1=", 5, 5, 1, 1)
    assert (self_aln.qstart, self_aln.qend, self_aln.sstart, self_aln.send) == (1, len(seqs[0]), 1,
                                                                                len(seqs[0]))


def test_traceback_methods_agree_and_nothing_to_align():
    scoring = Scoring.create("match:1,mismatch:-1", 12, 3)
    for method in ["striped", "scan"]:
        empty = sw_traceback("AAAA", "CCCC", scoring, method=method)
        assert empty.score == 0 and empty.length == 0 and empty.cigar == ""
        assert rescore(empty, scoring) == 0


def test_rescore_counts_each_gap_run_once():
    scoring = Scoring.create("match:5,mismatch:-4", 10, 1)
    aln = Alignment(score=0, qstart=1, qend=8, sstart=1, send=7, cigar="",
                    query_aligned="AC--GTAC", target_aligned="ACTTGT-C", matches=0, length=8)
    # 5 matches (25) - gap of 2 in the query row (11) - gap of 1 in the target row (10)
    assert rescore(aln, scoring) == 25 - 11 - 10
    # adjacent gaps on opposite rows are two gaps
    adj = Alignment(0, 1, 3, 1, 3, "", "AC-T", "A-GT", 0, 4)
    assert rescore(adj, scoring) == 10 - 10 - 10
    with pytest.raises(ValueError):
        rescore(Alignment(0, 1, 1, 1, 1, "", "A-", "A-", 0, 2), scoring)


# ----------------------------------------------------------------------------- reference vs parasail

_MATRICES = ["blosum62", "pam30", "blosum45", "nuc44", "match:2,mismatch:-3", "match:1,mismatch:-1"]


@st.composite
def _case(draw):
    """A scoring scheme, and queries/targets some of which are edited copies of each other.

    Letters come from a numpy generator seeded by hypothesis: hypothesis's own text strategies
    stay short, and related, repeated sequences are what push scores past 8 bits.
    """
    matrix = draw(st.sampled_from(_MATRICES))
    convention = draw(st.sampled_from(["standard", "blast"]))
    ge = draw(st.integers(0, 6))
    go = draw(st.integers(ge if convention == "standard" else 0, 16))
    scoring = Scoring.create(matrix, go, ge, convention)
    letters = np.array(list("ACGT" if scoring.alphabet == "dna" else AMINO))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def rand(n):
        return "".join(rng.choice(letters, size=n))

    base = rand(draw(st.integers(1, 160)))
    rel = list(base)
    for _ in range(draw(st.integers(0, 8))):  # substitutions, deletions, insertions
        op, pos = rng.integers(3), int(rng.integers(len(rel)))
        if op == 0:
            rel[pos] = str(rng.choice(letters))
        elif op == 1 and len(rel) > 1:
            del rel[pos]
        else:
            rel.insert(pos, str(rng.choice(letters)))
    reps = draw(st.integers(1, 4))
    queries = [base * reps, rand(draw(st.integers(1, 60)))]
    targets = ["".join(rel) * reps, rand(draw(st.integers(1, 200))), base[: max(1, len(base) // 3)]]
    return scoring, queries, targets


@settings(derandomize=True, max_examples=120, deadline=None)
@given(case=_case())
def test_reference_equals_parasail(case):
    scoring, queries, targets = case
    ref = np.stack([sw_reference_batch(q, targets, scoring, validate=False) for q in queries])
    for method in ["auto", "striped", "scan"]:
        for width in ["auto", 8, 16]:
            got = sw_scores(queries, targets, scoring, method=method, width=width)
            assert np.array_equal(got, ref), (method, width)
    for q, row in zip(queries, ref):
        for t, want in zip(targets, row):
            aln = sw_traceback(q, t, scoring)
            assert aln.score == want
            if aln.length:
                _check_alignment(aln, q, t, scoring)


@pytest.mark.parametrize("matrix,letters", [("blosum62", AMINO), ("nuc44", "ACGT")])
def test_sixteen_bit_saturation_widens(matrix, letters):
    import parasail

    rng = np.random.default_rng(7)
    a = "".join(rng.choice(list(letters), size=7000))
    b = a[:3000] + letters[:3] + a[3000:5000] + a[5010:]  # an insertion and a deletion
    scoring = Scoring.create(matrix, 11, 1)
    # the path under test: 16 bits really does saturate on these pairs
    assert parasail.sw_scan_16(a, b, 11, 1, scoring.parasail_matrix()).saturated
    got = sw_scores([a], [a, b], scoring)
    self_score = sum(scoring.substitution(c, c) for c in a)  # identical: the whole diagonal
    assert got[0, 0] == self_score > 32767
    assert got[0, 1] == sw_reference(a, b, scoring) > 32767
    for width in [8, 16]:
        for method in ["striped", "scan"]:
            assert np.array_equal(sw_scores([a], [a, b], scoring, width=width, method=method), got)
    aln = sw_traceback(a, b, scoring)
    assert aln.score == got[0, 1]
    # b = a with 3 letters inserted (target letters against query gaps: D) and 10 deleted (I)
    ops = re.findall(r"(\d+)([=XID])", aln.cigar)
    assert sum(int(n) for n, op in ops if op == "D") == 3
    assert sum(int(n) for n, op in ops if op == "I") == 10
    _check_alignment(aln, a, b, scoring)


def test_reference_on_another_array_namespace(globins, globin_scores):
    torch_ns = need_module("array_api_compat.torch")
    seqs = [s for _, s in globins[:8]]
    scoring = Scoring.create("blosum62", 11, 1)
    got = sw_reference_batch(seqs[0], seqs, scoring, xp=torch_ns)
    assert got.cpu().numpy().tolist() == globin_scores[0, :8].tolist()


def test_reference_without_precomputed_profile(globins, globin_scores, monkeypatch):
    """Big batches gather substitution scores row by row instead of holding a 24x profile."""
    import pairflow.kernels.sw_reference as sw

    monkeypatch.setattr(sw, "_PROFILE_BYTES", 0)
    seqs = [s for _, s in globins]
    scoring = Scoring.create("blosum62", 11, 1)
    assert sw_reference_batch(seqs[3], seqs, scoring).tolist() == globin_scores[3].tolist()
    torch_ns = need_module("array_api_compat.torch")
    got = sw_reference_batch(seqs[4], seqs[:6], scoring, xp=torch_ns)
    assert got.cpu().numpy().tolist() == globin_scores[4, :6].tolist()


def test_case_is_ignored(globins):
    seqs = [s for _, s in globins[:5]]
    scoring = Scoring.create("blosum62", 11, 1)
    assert np.array_equal(sw_scores([s.lower() for s in seqs], seqs, scoring),
                          sw_scores(seqs, seqs, scoring))


def test_length_skewed_block(globins, sevenless, hbb_human):
    """Long and short sequences mixed: the longer one becomes the profile, results unchanged."""
    seqs = [sevenless, hbb_human, sevenless[:30], sevenless[1000:1400]] + [s for _, s in globins[:6]]
    scoring = Scoring.create("blosum62", 11, 1)
    got = sw_scores(seqs, seqs, scoring)
    assert np.array_equal(got, got.T)
    bio = _bio("BLOSUM62", -11, -1)
    for i in range(len(seqs)):
        for j in range(len(seqs)):
            if len(seqs[i]) * len(seqs[j]) <= 2554 * 400:
                assert got[i, j] == bio.score(seqs[i], seqs[j])


# ----------------------------------------------------------------------------- top-k

def test_top_k_order_ties_and_mask():
    scores = np.array([[5, 9, 9, 1], [0, 0, 0, 0]], dtype=np.int32)
    idx, vals = top_k(scores, 3)
    assert idx.tolist() == [[1, 2, 0], [0, 1, 2]]
    assert vals.tolist() == [[9, 9, 5], [0, 0, 0]]
    mask = np.array([[True, False, True, False], [False, False, False, True]])
    idx, vals = top_k(scores, 3, mask)
    assert idx.tolist() == [[2, 0, -1], [3, -1, -1]]
    assert vals.tolist() == [[9, 5, -1], [0, -1, -1]]
    idx, vals = top_k(scores, 10)
    assert idx.shape == (2, 4)


def test_sw_top_k_hbb_human(globins, hbb_human):
    names = [n for n, _ in globins]
    seqs = [s for _, s in globins]
    scoring = Scoring.create("blosum62", 11, 1)
    (hits,) = sw_top_k([hbb_human], seqs, scoring, k=5)
    assert len(hits) == 5
    scores = [aln.score for _, aln in hits]
    assert scores == sorted(scores, reverse=True)
    all_scores = sw_scores([hbb_human], seqs, scoring)[0]
    assert scores == sorted(all_scores.tolist(), reverse=True)[:5]
    best_j, best = hits[0]
    assert names[best_j].startswith("HBB_") and best.identity > 0.8
    for j, aln in hits:
        _check_alignment(aln, hbb_human, seqs[j], scoring)


# ----------------------------------------------------------------------------- cells

def test_cells():
    assert cells(150, 200) == 30000
    assert cells([10, 20], [1, 2, 3]) == 30 * 6
    assert cells([10, 20], [1, 2, 3], mask=[[True, False, False], [False, False, True]]) == 10 + 60
    with pytest.raises(ValueError):
        cells([1, 2], [3], mask=[[True, True]])


# ----------------------------------------------------------------------------- errors

@pytest.fixture
def no_compute(monkeypatch):
    """Fail the test if any parasail kernel is reached: errors must come before compute."""
    import pairflow.kernels.smith_waterman as sw
    import pairflow.kernels.sw_trace as sw_trace

    def boom(*a, **k):
        raise AssertionError("compute started before the input was rejected")

    monkeypatch.setattr(sw, "_kernels", boom)
    monkeypatch.setattr(sw_trace, "_trace_fns", boom)


def test_empty_sequence_is_named(no_compute):
    scoring = Scoring.create()
    with pytest.raises(ValueError, match=r"target #2 is empty"):
        sw_scores(["MKV"], ["MKV", "AAA", ""], scoring)
    with pytest.raises(ValueError, match=r"sequence 'rec2' is empty"):
        validate(["MKV", ""], scoring, names=["rec1", "rec2"])


def test_letter_outside_alphabet_is_named(no_compute):
    scoring = Scoring.create()
    with pytest.raises(ValueError, match=r"query #1: letter 'U' at position 4 is not in the blosum62"):
        sw_scores(["MKVL", "MKVU"], ["MKV"], scoring)
    with pytest.raises(ValueError, match=r"sequence 'sp\|X': letter '-' at position 2"):
        validate(["M-KV"], scoring, names=["sp|X"])
    dna = Scoring.create("match:2,mismatch:-3")
    with pytest.raises(ValueError, match=r"letter 'N' at position 3 .*use 'nuc44'"):
        sw_scores(["ACNT"], ["ACGT"], dna)
    with pytest.raises(ValueError, match=r"letter 'U'"):
        sw_scores(["ACGU"], ["ACGT"], Scoring.create("nuc44"))
    with pytest.raises(ValueError, match=r"letter 'U'"):
        sw_traceback("ACGU", "ACGT", Scoring.create("nuc44"))


def test_protein_dna_mix_is_rejected(no_compute, globins, alleles):
    protein = Scoring.create("blosum62")
    with pytest.raises(ValueError, match=r"target '1__wzi__1__1' looks like DNA .*blosum62 is a protein"):
        validate([globins[0][1], alleles[0][1]], protein, names=[globins[0][0], alleles[0][0]],
                 what="target")
    with pytest.raises(ValueError, match=r"looks like DNA"):
        sw_scores([globins[0][1]], [alleles[0][1]], protein)
    # short peptides spelled with A/C/G/T are legitimate proteins
    assert validate(["GAGA", "acgtacgt"], protein) == ["GAGA", "ACGTACGT"]
    # an explicit opt-out for the rare real protein that looks like DNA
    assert validate(["G" * 30], protein, check_alphabet=False) == ["G" * 30]
    nuc = Scoring.create("nuc44")
    with pytest.raises(ValueError, match=r"looks like protein .*nuc44 is a nucleotide"):
        validate(["MKVHDSRWYKMBVHDS"], nuc, names=["pep"])  # only IUPAC letters, hardly any ACGT
    with pytest.raises(ValueError, match=r"target #0: letter 'L' at position 2 .*nuc44.*'EFILPQ'"):
        sw_scores([alleles[0][1]], [globins[0][1]], nuc)


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3", None])
def test_bad_k(no_compute, k):
    with pytest.raises(ValueError, match="k must be"):
        sw_top_k(["MKV"], ["MKV"], Scoring.create(), k=k)
    with pytest.raises(ValueError, match="k must be"):
        top_k(np.zeros((1, 1), dtype=np.int32), k)


@pytest.mark.parametrize("kwargs,pattern", [
    (dict(matrix="blosum63"), "unknown substitution matrix"),
    (dict(matrix=""), "matrix must be"),
    (dict(convention="ncbi"), "convention must be"),
    (dict(gap_open=-1), "gap_open is a cost"),
    (dict(gap_extend=1.5), "gap_extend must be an integer"),
    (dict(gap_open=1, gap_extend=2), r"gap_open \(1\) < gap_extend \(2\)"),
    (dict(matrix="match:0,mismatch:-1"), "match score must be > 0"),
    (dict(matrix="match:2,mismatch:3"), "mismatch"),
])
def test_bad_scoring(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        Scoring.create(**kwargs)


def test_bad_calls(no_compute):
    scoring = Scoring.create()
    with pytest.raises(ValueError, match="mask shape"):
        sw_scores(["MKV"], ["MKV", "MKV"], scoring, mask=np.ones((2, 1), dtype=bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        sw_scores(["MKV"], ["MKV"], scoring, mask=np.ones((1, 1)))
    with pytest.raises(ValueError, match="method must be"):
        sw_scores(["MKV"], ["MKV"], scoring, method="diagonal")
    with pytest.raises(ValueError, match="width must be"):
        sw_scores(["MKV"], ["MKV"], scoring, width=12)
    with pytest.raises(TypeError, match="single str"):
        sw_scores("MKV", ["MKV"], scoring)
    with pytest.raises(TypeError, match="Scoring"):
        sw_scores(["MKV"], ["MKV"], "blosum62")


def test_empty_blocks():
    scoring = Scoring.create()
    assert sw_scores([], ["MKV"], scoring).shape == (0, 1)
    assert sw_scores(["MKV"], [], scoring).shape == (1, 0)


def test_compiled_pair_loop_equals_the_python_loop(globins, alleles):
    """kernels/parasail_loop.py moves the per-pair loop into nogil compiled code: same parasail
    calls, same width and method choices, so every score equals the Python loop's (and both
    equal Biopython, above). Covers 8-bit saturation retries (related globins, DNA alleles
    above 127), masks, forced widths and methods, and linear gaps (scan only)."""
    from pairflow.kernels.parasail_loop import available
    assert available()
    rng = np.random.default_rng(11)
    prot = [s for _, s in globins] + ["".join(rng.choice(list(AMINO), int(n)))
                                      for n in rng.integers(1, 700, 25)]
    dna = [alleles[i][1] for i in rng.choice(len(alleles), 20, replace=False)]
    cases = [(prot, Scoring.create("blosum62", 11, 1)), (prot, Scoring.create("blosum62", 2, 2)),
             (dna, Scoring.create("nuc44", 10, 1))]
    for seqs, scoring in cases:
        mask = rng.random((len(seqs), len(seqs))) < 0.6
        for kwargs in [{}, {"mask": mask}, {"width": 8}, {"width": 16, "method": "scan"},
                       {"method": "striped", "mask": mask}]:
            fast = sw_scores(seqs, seqs, scoring, **kwargs)
            slow = sw_scores(seqs, seqs, scoring, _direct=False, **kwargs)
            assert fast.dtype == slow.dtype == np.int32
            assert np.array_equal(fast, slow), (scoring, kwargs)
