"""Records kept as columns (operators/sequences/columns.py) read back as the records they were
made from, and the catalog over them finds, keys and refuses duplicates as a dict of the
records does (the oracle here: plain lists and dicts, built from what was written)."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.operators.sequences import SequenceCatalog
from pairflow.operators.sequences.columns import RecordColumns
from pairflow.operators.sequences.records import InputError, SequenceRecord

_names = st.text("abcXY_/.:0123456789", min_size=1, max_size=6)
_seqs = st.binary(min_size=0, max_size=30).map(lambda b: bytes(b"ACGTN"[x % 5] for x in b))


@st.composite
def _records(draw, fastq=None):
    n = draw(st.integers(0, 40))
    fastq = draw(st.booleans()) if fastq is None else fastq
    out = []
    for _ in range(n):
        seq = draw(_seqs)
        qual = bytes(b"I" * len(seq)) if fastq else None
        desc = draw(st.sampled_from(["", "", "len=3 x", "é"]))
        out.append(SequenceRecord(draw(_names), seq, qual, desc))
    return out


@settings(max_examples=150, deadline=None)
@given(_records())
def test_columns_read_back_as_the_records(records):
    cols = RecordColumns(records)
    assert len(cols) == len(records)
    assert list(cols) == records
    assert cols[1:5] == records[1:5]
    if records:
        assert cols[-1] == records[-1]
        assert cols.has_quality == (records[0].quality is not None)
    seqs = cols.sequences()
    assert list(seqs) == [r.sequence for r in records]
    assert seqs.lengths().tolist() == [len(r.sequence) for r in records]
    pick = np.arange(len(records))[::-1][: len(records) // 2]
    buf, starts, ends = seqs[pick].joined()
    assert [buf[a:b].tobytes() for a, b in zip(starts, ends)] == \
        [records[i].sequence for i in pick]
    first = {}
    for i, r in enumerate(records):
        first.setdefault(r.name, i)
    for name, i in first.items():
        assert cols.find(name) == i
    assert cols.find("not-a-name!") is None
    # the earliest record whose name an earlier one has, with that earlier one
    dup = next(((first[r.name], i) for i, r in enumerate(records) if first[r.name] != i), None)
    assert cols.index.first_duplicate() == dup


def _write_fastq(path, names, seqs):
    with open(path, "w") as fh:
        for n, s in zip(names, seqs):
            fh.write(f"@{n}\n{s}\n+\n{'I' * len(s)}\n")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text("abcdefgh0123/", min_size=1, max_size=5), min_size=1, max_size=25),
       st.integers(0, 2 ** 31))
def test_catalog_of_records_keys_locations_and_duplicates(names, seed):
    import tempfile
    rng = np.random.default_rng(seed)
    seqs = ["".join(rng.choice(list("ACGT"), 12)) for _ in names]
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/reads-{seed}.fq"
        _write_fastq(path, names, seqs)
        seen = {}
        dup = None
        for i, n in enumerate(names):
            if n in seen and dup is None:
                dup = (seen[n], i, n)
            seen.setdefault(n, i)
        if dup is not None:
            with pytest.raises(InputError) as err:
                SequenceCatalog([path], "record")
            assert err.value.index == dup[1] and err.value.record == dup[2]
            assert f"(#{dup[0] + 1})" in str(err.value)
            return
        cat = SequenceCatalog([path], "record")
        stem = f"reads-{seed}"
        keys = [f"{stem}/{n}" for n in names]
        assert cat.keys() == keys and cat.keys_of(path) == keys
        slim = pickle.loads(pickle.dumps(cat))
        for i, key in enumerate(keys):
            assert cat.location(key) == (path, i, names[i])
            assert cat.index_of(key) == (path, i) == slim.index_of(key)
            rec = slim.records(key)[0]
            assert (rec.name, rec.sequence) == (names[i], seqs[i].encode())
        with pytest.raises(RuntimeError):
            slim.keys()


def test_jaccard_parse_builds_a_block_not_the_file(tmp_path):
    """A record item parsed alone (the probe's) is its read's bitset row, built from its block
    of ``FILE_BLOCK`` records, not the whole file's."""
    from pairflow.apps import jaccard as jac
    from pairflow.kernels.bitset import kmer_bitsets
    rng = np.random.default_rng(3)
    n = jac.FILE_BLOCK + 5
    seqs = ["".join(rng.choice(list("ACGT"), 40)) for _ in range(n)]
    names = [f"r{i}" for i in range(n)]
    path = str(tmp_path / "many.fq")
    _write_fastq(path, names, seqs)
    app = jac.JaccardApp([path], k=5, item="record", kernel="bitset")
    for i in (0, jac.FILE_BLOCK - 1, jac.FILE_BLOCK + 3):
        got = app.parse(f"many/r{i}", None)
        assert np.array_equal(got, kmer_bitsets([seqs[i].encode()], 5)[0])
    built = [v for t, v in jac._FILES.items() if t[0] == path]
    assert built and max(len(v.bits) for v in built) <= jac.FILE_BLOCK
    pack = app.parse_pack([f"many/r{i}" for i in (7, 2, n - 1)])
    assert np.array_equal(pack, kmer_bitsets([seqs[i].encode() for i in (7, 2, n - 1)], 5))
