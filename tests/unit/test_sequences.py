"""read_records / SequenceCatalog on real files, on files made here, and on every kind of bad input."""

from __future__ import annotations

import gzip
import os
import pickle
import re
import tempfile
from pathlib import Path

import pytest

from pairflow.operators.sequences import (InputError, SequenceCatalog, SequenceRecord, file_stem,
                                 read_records)


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def temp_leftovers() -> set[str]:
    found = set()
    for d in ("/dev/shm", tempfile.gettempdir()):
        if os.path.isdir(d):
            found |= {os.path.join(d, f) for f in os.listdir(d) if f.startswith("pairflow-")}
    return found


# ---------------------------------------------------------------------------------------- real data


def test_ragout_gz_fasta(ragout_path):
    path = ragout_path("V.Cholerae", "H1")
    recs = read_records(path)
    assert len(recs) == 2  # two chromosomes, one item
    assert all(isinstance(r, SequenceRecord) and isinstance(r.sequence, bytes) for r in recs)
    assert sum(len(r) for r in recs) > 3_500_000
    assert recs[0].name.startswith("gi|") and "cholerae" in recs[0].description
    # same result from bytes already fetched, with the format forced
    assert read_records(str(path), raw=path.read_bytes(), fmt="fasta") == recs


def test_lambda(lambda_path):
    (rec,) = read_records(lambda_path)
    assert len(rec.sequence) == 48502 and set(rec.sequence) <= set(b"ACGT")


def test_klebsiella_genbank(klebsiella_path):
    recs = read_records(klebsiella_path)
    assert len(recs) == 162
    assert len({r.name for r in recs}) == 162
    assert recs[0].name == "AB924547" and len(recs[0].sequence) == 24985
    locus = re.findall(r"^LOCUS\s+\S+\s+(\d+) bp", klebsiella_path.read_text(), re.M)
    assert [len(r) for r in recs] == [int(n) for n in locus]
    # gzip-compressed GenBank is detected by content too
    assert read_records("k.gbk.gz", raw=gzip.compress(klebsiella_path.read_bytes(), compresslevel=1))[5] == recs[5]


# ------------------------------------------------------------------------------ files made here

FASTQ = "@r1 first read\nACGTN\n+\nIIII#\n@r2\nAC\nGT\n+\nII\nII\n"


def test_fastq(tmp_path):
    recs = read_records(write(tmp_path / "reads.fq", FASTQ))
    assert recs == [
        SequenceRecord("r1", b"ACGTN", b"IIII#", "first read"),
        SequenceRecord("r2", b"ACGT", b"IIII", ""),
    ]


def test_fsspec_memory_url():
    import fsspec

    with fsspec.open("memory://pairflow-test/x.fa", "wb") as f:
        f.write(b">a\nACGT\n>b\nGG\n")
    assert [r.name for r in read_records("memory://pairflow-test/x.fa")] == ["a", "b"]


def test_bgzip(tmp_path):
    import pysam

    # enough data for several BGZF blocks (64 KB each): multi-member gzip
    body = "".join(f">r{i}\n{'ACGT' * 5000}\n" for i in range(20))
    plain = write(tmp_path / "x.fa", body)
    bgz = tmp_path / "x.fa.gz"
    pysam.tabix_compress(str(plain), str(bgz))
    raw = bgz.read_bytes()
    assert raw.count(b"\x1f\x8b\x08\x04") > 2  # several BGZF members
    assert read_records(bgz) == read_records(plain)
    assert len(read_records(bgz)) == 20


def test_crlf_and_lowercase(tmp_path):
    recs = read_records(write(tmp_path / "w.fa", b">r1 d\r\nacgt\r\nNN\r\n"))
    assert recs == [SequenceRecord("r1", b"acgtNN", None, "d")]


def test_temporary_files_are_removed(tmp_path):
    before = temp_leftovers()
    read_records(write(tmp_path / "ok.fa", ">a\nAC\n"))
    with pytest.raises(InputError):
        read_records(write(tmp_path / "bad.fq", "@a\nACGT\n+\nII\n"))
    assert temp_leftovers() == before


def test_temporary_copy_falls_back_when_shm_fails(tmp_path, monkeypatch):
    import pairflow.operators.sequences.fastx as seqmod  # where pysam's copy is written

    monkeypatch.setattr(seqmod, "_tmpdirs", lambda size: [str(tmp_path / "missing-dir"), str(tmp_path)])
    assert read_records(write(tmp_path / "ok.fa", ">a\nAC\n"))[0].sequence == b"AC"
    assert not [f for f in os.listdir(tmp_path) if f.startswith("pairflow-")]


# ---------------------------------------------------------------------------------------- errors


def assert_error(exc: pytest.ExceptionInfo, file, *words, record=None, index=None):
    msg = str(exc.value)
    assert isinstance(exc.value, InputError) and isinstance(exc.value, ValueError)
    assert msg.startswith(str(file) + ": "), msg
    for w in words:
        assert w in msg, (w, msg)
    if record is not None:
        assert exc.value.record == record and f"record {record!r}" in msg
    if index is not None:  # ``index`` here is the 1-based number shown; the attribute is 0-based
        assert exc.value.index == index - 1 and f"#{index}" in msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.fa"
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "not found")


def test_directory_is_not_a_file(tmp_path):
    with pytest.raises(InputError) as e:
        read_records(tmp_path)
    assert_error(e, tmp_path)


@pytest.mark.parametrize("content", [b"", b"\n \n\t\n", gzip.compress(b"")],
                         ids=["nothing", "blank lines", "gzip of nothing"])
def test_empty_file(tmp_path, content):
    p = write(tmp_path / "empty.fa.gz", content)
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "empty")


def test_binary_junk(tmp_path):
    p = write(tmp_path / "junk.fa", bytes(range(256)) * 4)
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "not a sequence file")


def test_text_that_is_not_sequences(tmp_path):
    p = write(tmp_path / "notes.txt", "hello world\nthis is not a genome\n")
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "not a sequence file", "hello world")


def test_missing_header(tmp_path):
    p = write(tmp_path / "headless.fa", "ACGTACGT\n>r1\nACGT\n")
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "missing header")


def test_missing_header_name(tmp_path):
    p = write(tmp_path / "noname.fa", ">r1\nACGT\n>\nACGT\n")
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "missing header name", index=2)


def test_empty_record(tmp_path):
    p = write(tmp_path / "hole.fa", ">r1\nACGT\n>r2\n>r3\nGG\n")
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "empty sequence", record="r2", index=2)
    assert [len(r) for r in read_records(p, allow_empty=True)] == [4, 0, 2]


def test_truncated_gzip(tmp_path):
    data = gzip.compress(b">r1\n" + b"ACGT" * 50_000 + b"\n")
    p = write(tmp_path / "cut.fa.gz", data[: len(data) // 2])
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "truncated")


def test_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress(b">r1\n" + b"ACGT" * 1000 + b"\n"))
    data[-8] ^= 0xFF  # break the CRC32
    p = write(tmp_path / "bad.fa.gz", bytes(data))
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "corrupt")


@pytest.mark.parametrize(
    "content, index",
    [
        ("@r1\nACGT\n+\nII\n@r2\nAC\n+\nII\n", 1),  # quality too short (pysam notices)
        ("@r1\nACGT\n+\nIIIIII\n", 1),  # quality too long (pysam notices)
        ("@r1\nAC\n+\nII\n@r2\nACGT\n+\nII", 2),  # last record's quality too short
    ],
)
def test_fastq_quality_length_mismatch(tmp_path, content, index):
    p = write(tmp_path / "q.fq", content)
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "quality", index=index)


def test_fastq_missing_quality(tmp_path):
    p = write(tmp_path / "cut.fq", "@r1\nACGT\n+\nIIII\n@r2\nACG")
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "missing quality", record="r2", index=2)


@pytest.mark.filterwarnings("ignore::Bio.BiopythonParserWarning")
def test_truncated_genbank(tmp_path, klebsiella_path):
    text = klebsiella_path.read_text()
    p = write(tmp_path / "cut.gbk", text[: len(text) // 2])
    with pytest.raises(InputError) as e:
        read_records(p)
    assert_error(e, p, "GenBank")


def test_forced_format_must_match(tmp_path):
    p = write(tmp_path / "x.fa", ">r1\nACGT\n")
    with pytest.raises(InputError) as e:
        read_records(p, fmt="fastq")
    assert_error(e, p, "fastq", "fasta")
    with pytest.raises(ValueError, match="format"):
        read_records(p, fmt="bam")


def test_input_error_is_the_engines_and_pickles():
    from pairflow.engine import errors

    e = pickle.loads(pickle.dumps(InputError("a.fa", "empty sequence", "r2", 1)))
    assert isinstance(e, errors.InputError) and isinstance(e, ValueError)
    assert (e.file, e.record, e.index, e.problem) == ("a.fa", "r2", 1, "empty sequence")
    assert str(e) == "a.fa: record 'r2' (#2): empty sequence"
    assert str(InputError("a.fa", "empty file")) == "a.fa: empty file"
    assert str(pickle.loads(pickle.dumps(InputError("a.fa", "bad", None, 0)))) == "a.fa: record #1: bad"

# ----------------------------------------------------------------------------------------- items


@pytest.mark.parametrize(
    "url, stem",
    [
        ("/d/K12.fasta.gz", "K12"),
        ("s3://bucket/x/ecoli.fa", "ecoli"),
        ("reads.fq.bgz", "reads"),
        ("loci.gbk", "loci"),
        ("http://h/genome.fna.gz?x=1", "genome"),
        ("plain", "plain"),
        ("a.b.fasta", "a.b"),
    ],
)
def test_file_stem(url, stem):
    assert file_stem(url) == stem


def test_items_per_file_and_per_record(tmp_path):
    a = write(tmp_path / "a.fa", ">x\nACGT\n>y\nGG\n")
    b = write(tmp_path / "b.fasta.gz", gzip.compress(b">x\nTT\n"))
    per_file = SequenceCatalog([a, b])
    assert per_file.keys() == ["a", "b"]
    assert [len(per_file.records(k)) for k in per_file.keys()] == [2, 1]
    per_record = SequenceCatalog([a, b], item="record")
    assert per_record.keys() == ["a/x", "a/y", "b/x"]
    assert all(len(per_record.records(k)) == 1 for k in per_record.keys())
    assert [per_record.records(k)[0].sequence for k in per_record.keys()] == [b"ACGT", b"GG", b"TT"]
    assert per_record.location("a/y") == (str(a), 1, "y")


def test_duplicate_file_stems_fail_before_reading(tmp_path):
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a = write(tmp_path / "d1" / "g.fa", ">x\nACGT\n")
    b = tmp_path / "d2" / "g.fa.gz"  # does not even exist: keys are checked first
    with pytest.raises(InputError) as e:
        SequenceCatalog([a, b])
    assert_error(e, b, "duplicate", str(a))


def test_duplicate_record_names(tmp_path):
    p = write(tmp_path / "dup.fa", ">x\nACGT\n>y\nGG\n>x\nTT\n")
    with pytest.raises(InputError) as e:
        SequenceCatalog([p], item="record")
    assert_error(e, p, "duplicate", "(#1)", record="x", index=3)


def test_same_stem_in_two_directories_stays_apart(tmp_path):
    """Records of two files with one stem get keys of their own (the later stem numbered)."""
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    a = write(tmp_path / "d1" / "g.fa", ">x\nACGT\n")
    b = write(tmp_path / "d2" / "g.fa", ">x\nGGCC\n")
    cat = SequenceCatalog([a, b], item="record")
    assert cat.keys() == ["g/x", "g~2/x"]
    assert [cat.records(k)[0].sequence for k in cat.keys()] == [b"ACGT", b"GGCC"]


def test_a_file_is_read_once_per_process_not_once_per_record(tmp_path, monkeypatch):
    """Record items of one file: one fetch and one parse, in the driver and in a (pickled,
    slim) worker copy alike."""
    import pickle

    from pairflow.operators.sequences import cache  # the per-process cache and its reader

    p = write(tmp_path / "many.fa", "".join(f">r{i}\n{'ACGT' * (i + 1)}\n" for i in range(50)))
    reads = []
    real = cache.read_records
    monkeypatch.setattr(cache, "read_records",
                        lambda *a, **kw: reads.append(a[0]) or real(*a, **kw))
    monkeypatch.setattr(cache, "_PARSED", type(cache._PARSED)())
    cat = SequenceCatalog([p], item="record")
    got = [cat.records(k)[0].sequence for k in cat.keys()]
    assert got == [b"ACGT" * (i + 1) for i in range(50)] and reads == [str(p)]
    slim = pickle.loads(pickle.dumps(cat))
    cache._PARSED.clear()  # a fresh worker process: nothing parsed yet
    assert [slim.records(f"many/r{i}")[0].sequence for i in range(50)] == got
    assert reads == [str(p), str(p)]
    with pytest.raises(RuntimeError, match="driver-side"):
        slim.keys()


def test_a_changed_file_is_read_again(tmp_path):
    p = write(tmp_path / "c.fa", ">a\nACGT\n")
    cat = SequenceCatalog([p], item="record")
    assert cat.records("c/a")[0].sequence == b"ACGT"
    write(tmp_path / "c.fa", ">b\nACGTT\n")
    with pytest.raises(InputError, match="file changed since the run started"):
        cat.records("c/a")


HEADERS = ["> NAME1 some description", ">\tNAME2", ">  NAME3  more  words ", ">NAME4 plain",
           "> sp|P69905|HBA_HUMAN Hemoglobin subunit alpha"]


@pytest.mark.parametrize("fmt", ["fasta", "fastq"])
def test_blanks_after_the_header_marker_read_as_biopython_does(tmp_path, fmt):
    """Some tools write '> NAME description': the name is the first word (Biopython, BLAST)."""
    from Bio import SeqIO

    seqs = ["ACGTTGCA", "GGCC", "TTAACCGG", "AC", "MVLSPADKTNVKAAWGKVGA"]
    if fmt == "fasta":
        text = "".join(f"{h}\n{s}\n" for h, s in zip(HEADERS, seqs))
    else:
        text = "".join(f"@{h[1:]}\n{s}\n+\n{'I' * len(s)}\n" for h, s in zip(HEADERS, seqs))
    p = write(tmp_path / f"blanks.{fmt}", text)
    ours = read_records(p)
    theirs = list(SeqIO.parse(str(p), fmt))
    assert [r.name for r in ours] == [r.id for r in theirs]
    assert [r.sequence.decode() for r in ours] == [str(r.seq) for r in theirs] == seqs
    # Biopython's description is the whole title; ours is what follows the name
    assert [r.description for r in ours] == \
        [r.description.strip()[len(r.id):].strip() for r in theirs]
