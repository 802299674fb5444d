"""The Jaccard app on reads, without Ray: which records are skipped and listed, which kernel
``auto`` picks, canonical and strand-specific sets, and the app's tile results against Python
sets."""
from __future__ import annotations

import os
import random
import re

import numpy as np
import pytest

from pairflow.apps.jaccard import SKIPPED_FILE, JaccardApp
from pairflow.engine import InputError
from tests.conftest import need
from tests.oracles import READS, jaccard, kmer_set, read_fastq


def _reads(name="reads_1"):
    return str(need(os.path.join(READS, f"{name}.fq.gz")))


def _bad(seqs, k):
    """Records with no window of k A/C/G/T letters (independent of the app: a regex)."""
    window = re.compile(f"[ACGT]{{{k}}}")
    return [n for n, s in seqs if not window.search(s.upper())]


@pytest.fixture(scope="module")
def oracle_reads():
    return read_fastq(_reads())


@pytest.mark.parametrize("k", [5, 7])
def test_reads_skip_and_list_the_bad_records(oracle_reads, k, tmp_path):
    app = JaccardApp([_reads()], k=k, item="record")
    bad = _bad(oracle_reads, k)
    assert len(bad) > 0  # the real file holds such reads
    assert len(app.skipped) == len(bad) and app.describe()["skipped_records"] == len(bad)
    assert len(app.keys()) == len(oracle_reads) - len(bad)
    assert [k_.split("/", 1)[1] for k_ in app.keys()] == \
        [n for n, _ in oracle_reads if n not in set(bad)]
    assert app.kernel == "bitset" and app.on_bad_record == "auto"
    app.write_run_files(str(tmp_path))
    lines = (tmp_path / SKIPPED_FILE).read_text().splitlines()
    assert lines[0].split("\t") == ["file", "index", "record", "length", "problem"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[2] for r in rows] == bad
    names = [n for n, _ in oracle_reads]
    for r in rows:
        assert r[0] == _reads() and names[int(r[1]) - 1] == r[2]
        assert int(r[3]) == len(dict(oracle_reads)[r[2]]) and f"no valid {k}-mer" in r[4]


def test_fail_keeps_the_bad_records_and_names_each(oracle_reads):
    app = JaccardApp([_reads()], k=7, item="record", on_bad_record="fail")
    assert len(app.keys()) == len(oracle_reads) and not app.skipped
    bad = set(_bad(oracle_reads, 7))
    checked = 0
    for key in app.keys()[:800]:
        name = key.split("/", 1)[1]
        if name in bad:
            with pytest.raises(InputError) as e:
                app.check(key, None)
            assert e.value.record == name and "no valid 7-mer" in str(e.value)
            checked += 1
        else:
            app.check(key, None)
    assert checked > 0


def test_fasta_fails_by_default_and_skip_is_a_choice(tmp_path):
    fa = tmp_path / "r.fa"
    fa.write_text(">a\nACGTACGTAA\n>n\nNNNNNNNNNN\n>b\nACGTTTGCAA\n")
    app = JaccardApp([str(fa)], k=5, item="record")
    assert len(app.keys()) == 3
    with pytest.raises(InputError, match=r"record 'n'.*no valid 5-mer"):
        app.check(app.keys()[1], None)
    app = JaccardApp([str(fa)], k=5, item="record", on_bad_record="skip")
    assert [k.split("/")[1] for k in app.keys()] == ["a", "b"]
    assert [s[2] for s in app.skipped] == ["n"]
    with pytest.raises(InputError, match="no record has a valid"):
        JaccardApp([str(fa)], k=11, item="record", on_bad_record="skip")


def test_kernel_choice_and_bad_options(tmp_path):
    assert JaccardApp([_reads()], k=21, item="record").kernel == "merge"
    assert JaccardApp([_reads()], k=5, item="record", kernel="merge").kernel == "merge"
    with pytest.raises(ValueError, match="up to 8"):
        JaccardApp([_reads()], k=9, item="record", kernel="bitset")
    with pytest.raises(ValueError, match="kernel must be"):
        JaccardApp([_reads()], k=5, item="record", kernel="fast")
    with pytest.raises(ValueError, match="on_bad_record"):
        JaccardApp([_reads()], k=5, item="record", on_bad_record="drop")


def _tile(app, keys):
    items = [app.preprocess(k, app.parse(k, None), "cpu") for k in keys]
    mask = np.ones((len(keys), len(keys)), bool)
    return app.postprocess(app.compare(items, items, mask, "cpu"), None, mask)


@pytest.mark.parametrize("kernel", ["bitset", "merge"])
@pytest.mark.parametrize("canonical", [True, False])
def test_app_tile_equals_sets(oracle_reads, kernel, canonical):
    app = JaccardApp([_reads()], k=7, item="record", kernel=kernel, canonical=canonical)
    keys = random.Random(1).sample(app.keys(), 150)
    fields = _tile(app, keys)
    seqs = dict(oracle_reads)
    sets = [kmer_set(seqs[k.split("/", 1)[1]], 7, canonical) for k in keys]
    want = np.array([[jaccard(a, b) for b in sets] for a in sets])
    np.testing.assert_allclose(fields["similarity"], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fields["distance"], 1 - want, rtol=0, atol=1e-12)
    assert np.array_equal(fields["intersection"],
                          np.array([[len(a & b) for b in sets] for a in sets]))
    assert set(fields) == {"similarity", "distance", "intersection"}


def test_strand_specific_tells_a_read_from_its_reverse_complement(tmp_path):
    seq = "ACGGTCATTGACCTAGGCATTAC"
    rc = seq.translate(str.maketrans("ACGT", "TGCA"))[::-1]
    fa = tmp_path / "two.fa"
    fa.write_text(f">f\n{seq}\n>r\n{rc}\n")
    for canonical in (True, False):
        for kernel in ("bitset", "merge"):
            app = JaccardApp([str(fa)], k=5, item="record", kernel=kernel, canonical=canonical)
            got = _tile(app, app.keys())["similarity"][0, 1]
            assert got == pytest.approx(jaccard(kmer_set(seq, 5, canonical),
                                                 kmer_set(rc, 5, canonical)), abs=1e-12)
            assert (got == 1.0) == canonical


def test_workers_get_a_slim_copy_that_pickles_again(tmp_path):
    """Workers are handed keys; the app they get drops its key list, and pickles again (a
    worker-side process hands it on)."""
    import pickle
    app = JaccardApp([_reads()], k=5, item="record")
    slim = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(app))))
    assert slim.describe() == app.describe()
    key = app.keys()[7]
    assert np.array_equal(slim.parse(key, None), app.parse(key, None))
    with pytest.raises(RuntimeError, match="driver-side"):
        slim.keys()


@pytest.mark.parametrize("kernel", ["bitset", "merge"])
def test_torch_device_equals_cpu(kernel):
    from tests.conftest import need_module
    need_module("torch")
    app = JaccardApp([_reads()], k=5, item="record", kernel=kernel)
    keys = app.keys()[:40]
    mask = np.triu(np.ones((20, 20), bool), 1)
    out = {}
    for device in ("cpu", "torch-cpu"):
        items = [app.preprocess(k, app.parse(k, None), device) for k in keys]
        block = app.compare(items[:20], items[20:], mask, device)
        out[device] = app.postprocess(block, None, mask)
    for name in ("similarity", "intersection", "distance"):
        got = np.where(mask, out["torch-cpu"][name], 0)
        np.testing.assert_allclose(got, np.where(mask, out["cpu"][name], 0), atol=1e-12)


def test_whole_file_items_with_the_bitset_kernel(tmp_path):
    """item=file with kernel=bitset: a file's set is the union of its records' (a k-mer
    spanning two records is in neither), as the merge kernel and Python sets have it."""
    rng = random.Random(5)
    files, sets = [], []
    for f in range(4):
        recs = ["".join(rng.choice("ACGTN") for _ in range(rng.randrange(20, 200)))
                for _ in range(3)]
        path = tmp_path / f"g{f}.fa"
        path.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(recs)))
        files.append(str(path))
        sets.append(set().union(*(kmer_set(s, 6) for s in recs)))
    want = np.array([[jaccard(a, b) for b in sets] for a in sets])
    for kernel in ("bitset", "merge"):
        app = JaccardApp(files, k=6, kernel=kernel)
        app.warmup("host")
        items = [app.preprocess(k, app.parse(k, open(u, "rb").read()), "cpu")
                 for k, u in zip(app.keys(), files)]
        mask = np.ones((4, 4), bool)
        got = app.postprocess(app.compare(items, items, mask, "cpu"), None, mask)
        np.testing.assert_allclose(got["similarity"], want, rtol=0, atol=1e-12)
