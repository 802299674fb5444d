"""The align app without Ray: input checks before compute, the length-sorted item order (the
tie rule), pair filters, cells, and windowed tracebacks of long pairs."""
import numpy as np
import pytest

from pairflow.apps.align import AlignApp, traceback_hit, tracebacks
from pairflow.engine.errors import InputError
from pairflow.engine.pairs.space import PairList, Rectangle, Triangle
from pairflow.kernels.scoring import Scoring
from pairflow.kernels.smith_waterman import cells, rescore, sw_scores, sw_traceback
from tests.conftest import need as _need
from tests.unit.conftest import SHARE

TUTORIAL = SHARE / "doc" / "hmmer" / "examples" / "tutorial"
WZI = SHARE / "kaptive" / "reference_database" / "wzi_wzc_db.fasta"


@pytest.fixture(scope="module")
def globins():
    return str(_need(TUTORIAL / "globins45.fa"))


def fasta(tmp_path, name, records):
    p = tmp_path / name
    p.write_text("".join(f">{n}\n{s}\n" for n, s in records))
    return str(p)


def test_all_vs_all_is_a_length_sorted_triangle(globins):
    app = AlignApp(globins)
    assert isinstance(app.space(), Triangle) and app.space().n == 45
    assert app.all_vs_all and app.alphabet == "protein" and app.scoring.matrix == "blosum62"
    lens = [app.lengths[k] for k in app.row_keys()]
    assert lens == sorted(lens) and app.row_keys() == app.col_keys()
    # equal lengths keep input order (the documented tie rule relies on it)
    for a, b in zip(app.row_keys(), app.row_keys()[1:]):
        if app.lengths[a] == app.lengths[b]:
            assert app.query_order[a] < app.query_order[b]
    assert all(k.startswith("globins45/") for k in app.keys())
    rw, cw = app.pair_weights()
    assert app.cells() == sum(rw[i] * cw[j] for i in range(45) for j in range(i + 1, 45))


def test_queries_x_targets_with_swissprot_query(globins):
    hbb, sev = str(_need(TUTORIAL / "HBB_HUMAN")), str(_need(TUTORIAL / "7LESS_DROME"))
    app = AlignApp([sev, hbb], globins)
    assert isinstance(app.space(), Rectangle) and (app.space().n_rows, app.space().n_cols) == (2, 45)
    assert app.row_keys() == ["HBB_HUMAN/HBB_HUMAN", "7LESS_DROME/7LESS_DROME"]
    assert app.lengths["7LESS_DROME/7LESS_DROME"] == 2554
    assert AlignApp(globins, [globins]).all_vs_all  # the same inputs: all-vs-all


def test_compare_scores_the_masked_pairs(globins):
    app = AlignApp(globins)
    seqs = app.sequences(app.row_keys()[:6])
    items = [seqs[k] for k in app.row_keys()[:6]]
    mask = np.triu(np.ones((6, 6), bool), 1)
    got = app.compare(items, items, mask, "cpu")["score"]
    want = sw_scores(items, items, app.scoring)
    assert np.array_equal(got[mask], want[mask]) and (got[~mask] == -1).all()


def test_bad_input_is_refused_before_compute(tmp_path, globins):
    empty = fasta(tmp_path, "empty.fa", [("a", "MKVLA"), ("b", "")])
    with pytest.raises(InputError, match=r"empty.fa: record 'b' \(#2\): empty sequence"):
        AlignApp(empty)
    bad = fasta(tmp_path, "bad.fa", [("ok", "MKVLAHW"), ("odd", "MKVJLA")])
    with pytest.raises(InputError, match=r"bad.fa: record 'odd' \(#2\): letter 'J' at position 4 "
                                         r"is not in the blosum62 alphabet"):
        AlignApp(bad)
    dna = str(_need(WZI))
    with pytest.raises(InputError, match=r"looks like DNA .* blosum62 is a protein matrix"):
        AlignApp(dna, alphabet="protein")
    with pytest.raises(InputError, match=r"globins45.fa: record .* not in the nuc44 alphabet"):
        AlignApp(globins, alphabet="dna")
    mixed = fasta(tmp_path, "mixed.fa", [("p", "MKVLAHWQERTYIPASDFGHKL"),
                                         ("d", "ACGTACGTTGCAACGTACGTAACCGGTT")])
    with pytest.raises(InputError, match=r"record 'd'.*looks like DNA.*mix protein and DNA"):
        AlignApp(mixed)
    with pytest.raises(ValueError, match=r"alphabet=dna was declared but blosum62 is a protein"):
        AlignApp(globins, matrix="blosum62", alphabet="dna")
    for k in (0, -3):
        with pytest.raises(ValueError, match="top_k must be >= 1"):
            AlignApp(globins, top_k=k)
    with pytest.raises(ValueError, match="top_k must be an integer"):
        AlignApp(globins, top_k=2.5)
    dup = fasta(tmp_path, "dup.fa", [("x", "MKVLA"), ("x", "MKVLW")])
    with pytest.raises(InputError, match="duplicate record name 'x'"):
        AlignApp(dup)
    with pytest.raises(InputError, match="file not found"):
        AlignApp(str(tmp_path / "nope.fa"))


def test_dna_gets_nuc44_by_detection():
    app = AlignApp(str(_need(WZI)), gap_open=10, gap_extend=1)
    assert app.alphabet == "dna" and app.scoring.matrix == "nuc44"
    assert len(app.keys()) == 604


def test_length_ratio_filter_builds_a_pairlist(tmp_path, globins):
    hbb, sev = str(_need(TUTORIAL / "HBB_HUMAN")), str(_need(TUTORIAL / "7LESS_DROME"))
    pre = {"runs_root": str(tmp_path)}
    app = AlignApp([hbb, sev], globins, min_length_ratio=0.5, prefilter_options=pre)
    space = app.space()
    assert isinstance(space, PairList) and space.total == 45   # 7LESS_DROME keeps no pair
    assert set(space.pairs[:, 0]) == {0}
    (st,) = app.filter_report
    assert st["name"] == "min_length_ratio" and st["pairs_in"] == 90 and st["pairs_out"] == 45
    assert st["pass_rate"] == 0.5 and st["s_per_pair"] == pytest.approx(st["seconds"] / 90)
    sym = AlignApp(globins, min_length_ratio=0.99, prefilter_options=pre)
    assert sym.space().symmetric
    lens = np.array([sym.lengths[k] for k in sym.row_keys()])
    want = {(i, j) for i in range(45) for j in range(i + 1, 45)
            if min(lens[i], lens[j]) >= 0.99 * max(lens[i], lens[j])}
    assert {tuple(p) for p in sym.space().pairs.tolist()} == want
    with pytest.raises(ValueError, match=r"min_length_ratio must be in \(0, 1\]"):
        AlignApp(globins, min_length_ratio=0, prefilter_options=pre)


def test_shared_kmer_filter_counts_distinct_words(tmp_path):
    recs = [("a", "MKVLAHWQERTY"), ("b", "MKVLAPPPPPPP"), ("c", "WWWWWWWWWWWW"),
            ("d", "QERTYMKVLAHW")]
    app = AlignApp(fasta(tmp_path, "k.fa", recs), min_shared_kmers=3, kmer=3,
                   prefilter_options={"runs_root": str(tmp_path)})
    names = [app.record_name(k) for k in app.row_keys()]
    got = {tuple(sorted((names[i], names[j]))) for i, j in app.space().pairs.tolist()}

    def words(s):
        return {s[i:i + 3] for i in range(len(s) - 2)}
    d = dict(recs)
    want = {tuple(sorted((x, y))) for x in d for y in d if x < y
            and len(words(d[x]) & words(d[y])) >= 3}
    assert got == want and ("a", "d") in got and ("a", "c") not in got
    assert [f["name"] for f in app.filter_report] == ["min_shared_kmers"]


def test_both_filters_run_through_the_prefilter_and_keep_the_same_pairs(tmp_path, globins):
    """Length ratio and shared k-mers as pipeline filters: whatever order the prefilter's
    measurements choose, the surviving pairs are those passing both tests (brute force here)."""
    app = AlignApp(globins, min_length_ratio=0.8, min_shared_kmers=4, kmer=3,
                   prefilter_options={"runs_root": str(tmp_path)})
    seqs = app.sequences(app.row_keys())
    rows = [seqs[k] for k in app.row_keys()]

    def words(s):
        return {s[i:i + 3] for i in range(len(s) - 2)}
    want = {(i, j) for i in range(45) for j in range(i + 1, 45)
            if min(len(rows[i]), len(rows[j])) >= 0.8 * max(len(rows[i]), len(rows[j]))
            and len(words(rows[i]) & words(rows[j])) >= 4}
    assert {tuple(p) for p in app.space().pairs.tolist()} == want and app.space().symmetric
    report = {f["name"]: f for f in app.filter_report}
    assert set(report) == {"min_length_ratio", "min_shared_kmers"}
    assert sum(f["pairs_in"] for f in app.filter_report) >= 45 * 44 // 2
    assert app.filter_orders and all(sorted(o) == sorted(report) for o in app.filter_orders)
    assert len(list(tmp_path.glob("prefilter/*/summary.json"))) == 1  # the prefilter's run


def test_windowed_traceback_of_a_long_pair(monkeypatch):
    rng = np.random.default_rng(7)
    aa = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    core = "".join(rng.choice(aa, 120))
    q = "".join(rng.choice(aa, 40)) + core + "".join(rng.choice(aa, 30))
    mutated = "".join(c if rng.random() > 0.15 else rng.choice(aa) for c in core)
    t = "".join(rng.choice(aa, 3000)) + mutated[:60] + "GGG" + mutated[60:] + \
        "".join(rng.choice(aa, 2000))
    sc = Scoring.create("blosum62", 11, 1)
    score = int(sw_scores([q], [t], sc)[0, 0])
    direct = sw_traceback(q, t, sc)
    monkeypatch.setattr(tracebacks, "TRACE_DIRECT_CELLS", 1000)  # the bound traceback_hit reads
    win = traceback_hit(q, t, sc, score)
    assert win.score == direct.score == score == rescore(win, sc)
    assert q[win.qstart - 1:win.qend] == win.query_aligned.replace("-", "")
    assert t[win.sstart - 1:win.send] == win.target_aligned.replace("-", "")
    assert win.sstart > 2500 and win.send < 3300  # the window was placed right
    with pytest.raises(Exception, match="search reported"):
        traceback_hit(q, t, sc, score + 1)


def test_cells_helper_agrees_with_kernel(globins):
    app = AlignApp(globins)
    lens = [app.lengths[k] for k in app.row_keys()]
    mask = np.triu(np.ones((45, 45), bool), 1)
    assert app.cells() == cells(lens, lens, mask)


def test_workers_get_a_slim_copy(globins, tmp_path):
    """Ray unpickles the app for every item load: the copy holds no per-key tables, and still
    parses and checks any key (two files with the same stem stay apart)."""
    import pickle
    other = tmp_path / "sub"
    other.mkdir()
    same_stem = fasta(other, "globins45.fa", [("X1", "MKVLAHWQERTYIPASDFGHKLW")])
    app = AlignApp(globins, [same_stem, globins])
    assert "globins45~2/X1" in app.keys()
    blob = pickle.dumps(app)
    assert len(blob) < 5000
    slim = pickle.loads(blob)
    for key in ("globins45~2/X1", app.row_keys()[0], app.row_keys()[-1]):
        assert slim.parse(key, None) == app.parse(key, None)
        slim.check(key, None)
    assert slim.describe() == app.describe()
    with pytest.raises(RuntimeError, match="driver-side"):
        slim.keys()
