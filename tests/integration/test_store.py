"""The L4 item store across runs (``store=PATH``): a second run over overlapping inputs parses
only the items it has not seen, its results equal a run without the store, and a corrupt entry
is parsed again.

Parse calls are counted apart from the engine: ``tests/parse_count.py``'s apps append every
parsed key to a file from whichever process parsed it (the driver's probe, a loader thread or a
Ray load task), and the store's own files are checked too (an entry of the first run is never
rewritten by the second).

A store is shared, so an entry may be planted: one whose payload would run code if unpickled,
under a sound header and SHA-256 (the documented ``>5sQ32s`` layout, written out here), is
counted corrupt and parsed again, the result is exact, and the code never runs: in a local
directory and in ``s3://`` on a moto server on 127.0.0.1.
"""
from __future__ import annotations

import glob
import hashlib
import os
import pickle
import struct

import numpy as np
import pytest

from tests.moto_s3 import s3_bucket
from tests.conftest import need
from tests.parse_count import CountedAlign, CountedJaccard, parsed
from tests.unit.conftest import RAGOUT, SHARE

pytestmark = pytest.mark.slow
GLOBINS = SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"


def _entries(store: str) -> dict:
    """Every complete entry with its identity (inode, mtime): a rewrite changes it."""
    out = {}
    for path in glob.glob(os.path.join(store, "*", "*.item")):
        st = os.stat(path)
        out[path] = (st.st_ino, st.st_mtime_ns)
    return out


def _jaccard(paths, runs, count, store=None, **opts):
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    app = CountedJaccard([str(p) for p in paths], k=21, count_path=count)
    sink = DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0})
    return allpairs(app=app, sink=sink, runs_root=runs, wait=True, progress=False,
                    store=store, **opts)


def _stem(path) -> str:
    return os.path.basename(str(path)).split(".")[0]


def test_jaccard_genomes_second_run_parses_only_the_new_ones(runs, tmp_path):
    genomes = sorted(glob.glob(str(need(RAGOUT / "H.Pylori" / "references") / "*.fasta.gz")))
    assert len(genomes) == 5
    store, count = str(tmp_path / "store"), str(tmp_path / "parsed.txt")
    first = _jaccard(genomes[:3], runs, count, store, executor="inprocess")
    assert set(parsed(count)) == {_stem(p) for p in genomes[:3]}
    s = first.summary["store"]
    # the probe's two items (the first row's and the last column's) count too: it parses and
    # stores them, and the load tasks then find them in the store (with a store the probe's
    # items are not handed over)
    assert (s["misses"], s["parses"], s["corrupt"], s["hits"]) == (3, 3, 0, 2)
    assert s["bytes_written"] > 0 and s["url"] == store
    kept = _entries(store)

    second = _jaccard(genomes[1:], runs, count, store, executor="inprocess")
    got = parsed(count)
    assert set(got) == {_stem(p) for p in genomes[3:]}, got  # nothing it already had
    s = second.summary["store"]
    assert (s["misses"], s["parses"]) == (2, 2) and s["hits"] >= 2
    assert s["bytes_read"] > 0 and sum(n.get("hits", 0) for n in s["nodes"].values()) == s["hits"]
    now = _entries(store)
    assert all(now[p] == ident for p, ident in kept.items())  # the first run's, untouched
    assert len(now) > len(kept)

    plain = _jaccard(genomes[1:], runs, count, None, executor="inprocess")
    assert plain.summary["store"] is None
    assert len(parsed(count)) >= 4
    for field in ("similarity", "intersection"):
        assert np.array_equal(second.matrix(field), plain.matrix(field))

    # a damaged entry is detected, parsed again and replaced; the result does not change
    victim = max(kept, key=os.path.getsize)
    with open(victim, "r+b") as fh:
        fh.truncate(os.path.getsize(victim) // 2)
    third = _jaccard(genomes[1:], runs, count, store, executor="inprocess")
    s = third.summary["store"]
    assert s["corrupt"] == 1 and s["parses"] == 1, s
    assert len(parsed(count)) == 1
    assert np.array_equal(third.matrix("similarity"), plain.matrix("similarity"))
    assert os.path.getsize(victim) > 0 and _entries(store)[victim] != kept[victim]


@pytest.mark.ray
def test_align_on_ray_second_run_parses_only_the_new_records(ray_local, runs, tmp_path):
    """Load tasks in Ray worker processes read and write the same store."""
    from Bio import SeqIO

    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    records = list(SeqIO.parse(str(need(GLOBINS)), "fasta"))
    assert len(records) == 45
    part_a, part_b = tmp_path / "globins_a.fa", tmp_path / "globins_b.fa"
    SeqIO.write(records[:30], str(part_a), "fasta")
    SeqIO.write(records[30:], str(part_b), "fasta")
    store, count = str(tmp_path / "store"), str(tmp_path / "parsed.txt")

    def run(queries, store):
        app = CountedAlign([str(q) for q in queries], weighted=False, count_path=count)
        res = allpairs(app=app, sinks=[DenseMatrix()], runs_root=runs, wait=True,
                       progress=False, store=store, executor="ray", leaf_items=8)
        return app, res

    run([part_a], store)
    assert len(set(parsed(count))) == 30
    kept = _entries(store)
    app, second = run([part_a, part_b], store)
    new_keys = set(app.catalog.keys_of(str(part_b)))
    assert len(new_keys) == 15
    got = parsed(count)
    assert set(got) == new_keys, sorted(set(got) ^ new_keys)
    s = second.summary["store"]
    assert (s["parses"], s["misses"], s["corrupt"]) == (15, 15, 0) and s["hits"] >= 30, s
    assert all(_entries(store)[p] == ident for p, ident in kept.items())
    _, plain = run([part_a, part_b], None)
    assert np.array_equal(second.matrix("score"), plain.matrix("score"))


class _Plant:
    """Unpickled, it creates ``path`` (any code would run the same way)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _planted(marker: str) -> bytes:
    payload = pickle.dumps({"kmers": _Plant(marker)}, protocol=5)
    return struct.pack(">5sQ32s", b"PFL4\x02", len(payload),
                       hashlib.sha256(payload).digest()) + payload


@pytest.fixture
def s3(monkeypatch):
    """A moto S3 server on 127.0.0.1 with a bucket ``pairflow``; its file system."""
    with s3_bucket(monkeypatch, "pairflow") as fs:
        yield fs


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_planted_entry_that_would_run_code_is_parsed_again(where, runs, tmp_path, request):
    from tests.conformance.test_item_codec_apps import LAMBDA, O_LOCUS, OC_LOCUS
    paths = [need(LAMBDA), need(O_LOCUS), need(OC_LOCUS)]
    count, marker = str(tmp_path / "parsed.txt"), str(tmp_path / "marker")
    if where == "s3":
        fs, store = request.getfixturevalue("s3"), "s3://pairflow/store"
        entries = lambda: sorted(p for p in fs.find("pairflow/store") if p.endswith(".item"))
        write = fs.pipe_file
    else:
        store = str(tmp_path / "store")
        entries = lambda: sorted(glob.glob(os.path.join(store, "*", "*.item")))

        def write(path, blob):
            with open(path, "wb") as fh:
                fh.write(blob)

    _jaccard(paths, runs, count, store, executor="inprocess")
    assert len(parsed(count)) == 3
    found = entries()
    assert len(found) == 3
    write(found[1], _planted(marker))

    second = _jaccard(paths, runs, count, store, executor="inprocess")
    s = second.summary["store"]
    assert s["corrupt"] == 1 and s["parses"] == 1, s
    assert len(parsed(count)) == 1 and not os.path.exists(marker)
    plain = _jaccard(paths, runs, count, None, executor="inprocess")
    parsed(count)
    for field in ("similarity", "intersection"):
        assert np.array_equal(second.matrix(field), plain.matrix(field))
    # the planted entry was replaced by a sound one: a third run parses nothing
    third = _jaccard(paths, runs, count, store, executor="inprocess")
    assert third.summary["store"]["parses"] == 0 and parsed(count) == []
    assert np.array_equal(third.matrix("similarity"), plain.matrix("similarity"))
    assert not os.path.exists(marker)
    pickle.loads(_planted(marker)[45:])  # the control: unpickled, the planted entry does run
    assert os.path.exists(marker)


def test_items_the_codec_cannot_write_are_parsed_each_run_and_counted(runs, tmp_path):
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    from tests.counted_apps import CountedTagged
    paths = []
    for i in range(5):
        paths.append(tmp_path / f"f{i}.bin")
        paths[-1].write_bytes(bytes(range(i, i + 40)))
    store, count = str(tmp_path / "store"), str(tmp_path / "parsed.txt")
    want = np.array([[np.dot(np.arange(i, i + 40), np.arange(j, j + 40)) for j in range(5)]
                     for i in range(5)])
    for _ in range(2):
        app = CountedTagged([str(p) for p in paths], count_path=count)
        res = allpairs(app=app, sink=DenseMatrix(), runs_root=runs, wait=True, progress=False,
                       store=store, executor="inprocess")
        s = res.summary["store"]
        assert sorted(set(parsed(count))) == [f"f{i}" for i in range(5)]
        assert s["unstorable"] >= 5 and s["hits"] == 0 and s["bytes_written"] == 0, s
        got = res.matrix("dot")
        i, j = np.triu_indices(5, 1)
        assert np.array_equal(got[i, j], want[i, j])
    assert not glob.glob(os.path.join(store, "**", "*.item"), recursive=True)
