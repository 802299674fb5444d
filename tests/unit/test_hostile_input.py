"""Hostile input: damaged FASTA / FASTQ / GenBank files through read_records, the k-mer layer and
the Jaccard app.

The property everywhere: a damaged file gives either the records an independent oracle expects
(the records the generator wrote, transformed as the damage dictates) or an
``engine.errors.InputError`` whose message starts with the file name and says what is wrong — with
the record (name or ``#i``) when the damage is inside a record.  Never another exception type
(a crash without context), never a silently shortened or altered sequence (a wrong number).

Damage classes and their expected outcome
-----------------------------------------
Tolerated (result == the clean file's records, sequences byte for byte; k-mers identical):
  CRLF line ends, a UTF-8 byte-order mark, blanks (spaces/tabs) at line ends, any line wrapping
  (FASTA/FASTQ; one line up to 5 MB included), blank lines between records, gzip, lowercase or
  uppercase sequence letters (FASTA/FASTQ keep the case, GenBank upper-cases: k-mers are the same).
Kept as written (letters the k-mer layer skips windows on): '*', '-', '.', and any ASCII letter.
Errors (InputError naming file, record and problem):
  * truncation at any byte — FASTQ (a cut record has no or too short quality) and GenBank (no
    closing '//', LOCUS length) unless the cut falls exactly between records; gzip always
    (end-of-stream marker and CRC); BGZF cut at a block boundary (missing EOF block).
  * binary junk (control bytes, invalid UTF-8) anywhere, also past the 64 KB that format
    detection samples.
  * the first header line dropped; a later header dropped in FASTQ/GenBank (the record would
    vanish or be skipped: its lines belong to no record).
  * an empty record (unless ``allow_empty``).
  * unknown characters in a sequence: digits, punctuation, non-ASCII letters.
  * mixed formats (two files of different formats concatenated).
Undetectable by design, asserted only to be consistent (see the tests): a FASTA file cut between
two sequence letters; a FASTA header line lost (its sequence joins the record before), or only its
'>' lost when the header's text is all letters — each is exactly a valid, different FASTA file.

Runs in CI with fixed seeds (``derandomize=True``, the same examples in any run: see
``_same_examples_in_any_run``) and fixed example counts (``N_*`` below, per format); no Ray.
"""

from __future__ import annotations

import gzip
import itertools
import string
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from pairflow.engine.errors import InputError as EngineInputError
from pairflow.kernels.kmers import canonical_kmers
from pairflow.operators.sequences import read_records

pytestmark = pytest.mark.filterwarnings("ignore::Bio.BiopythonParserWarning")

FORMATS = ("fasta", "fastq", "genbank")

# Example counts, fixed (the suite is deterministic): ~11 s of CPU, ~14 s wall on the 2-core
# dev machine under moderate load.
N_CLEAN = 60
N_TOLERATED = 80
N_KMERS = 40
N_TRUNCATE = 80
N_GZIP = 30
N_JUNK = 60
N_HEADER = 40
N_DUPLICATE = 20
N_EMPTY = 40
N_UNKNOWN = 80
N_MIXED = 40
N_NO_KMER = 20
N_HUGE = 2  # per size (1 MB and 5 MB)


def fixed(n: int):
    return settings(derandomize=True, max_examples=n, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True, scope="module")
def _same_examples_in_any_run():
    """Hypothesis mixes literals from every *loaded* local module into generation, so with a fixed
    seed the examples still changed with the tests that ran before (seen: a failure found only in
    the full unit run).  Pin that pool empty here: the same examples in any run and any order.
    (Internal API: if it moves, the suite still runs, only less reproducibly.)"""
    try:
        from hypothesis.internal.conjecture import providers

        original, cache = providers._get_local_constants, providers.CONSTANTS_CACHE.cache
        empty = type(providers._local_constants)()
    except (ImportError, AttributeError, TypeError):
        yield
        return
    providers._get_local_constants = lambda: empty
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()


# ------------------------------------------------------------------------------------ generators


@dataclass(frozen=True)
class Rec:
    name: str
    seq: str
    qual: str | None = None
    desc: str = ""


@dataclass(frozen=True)
class Clean:
    """A valid file: its records and how it is laid out."""

    fmt: str
    recs: tuple[Rec, ...]
    width: int | None = None  # FASTA/FASTQ line width; None = one line per sequence

    def text(self, **kw) -> str:
        return render(self.fmt, self.recs, self.width, **kw)[0]

    def data(self, **kw) -> bytes:
        return self.text(**kw).encode()


BASES = list("ACGT" * 6 + "acgt" * 2 + "NnRYKMSWBDHVrykmswbdhv")
QUAL = "".join(chr(c) for c in range(33, 127))  # includes '@', '+' and '>' as real FASTQ does
NAME_FASTX = string.ascii_letters + string.digits + "_.|:-"
NAME_GENBANK = string.ascii_letters + string.digits + "_"
DESC = string.ascii_letters + string.digits + " ,;=()[]/"


def wrap(seq: str, width: int | None) -> list[str]:
    if not seq:
        return []
    if width is None:
        return [seq]
    return [seq[i:i + width] for i in range(0, len(seq), width)]


def genbank_record(r: Rec, locus_length: int | None = None) -> str:
    n = len(r.seq) if locus_length is None else locus_length
    lines = [f"LOCUS       {r.name:<16} {n:>11} bp    DNA     linear   UNK 01-JAN-1980",
             f"DEFINITION  {r.desc or 'none'}.", f"ACCESSION   {r.name}",
             "FEATURES             Location/Qualifiers", "ORIGIN"]
    for i in range(0, len(r.seq), 60):
        chunk = r.seq[i:i + 60]
        lines.append(f"{i + 1:>9} " + " ".join(chunk[j:j + 10] for j in range(0, len(chunk), 10)))
    return "\n".join(lines) + "\n//\n"


def render(fmt: str, recs, width=None, blank_lines: int = 0, locus_lengths=None):
    """The file text, and per record (start, end): ``end`` is just after its last significant
    character (the last sequence letter, quality character, or the '//')."""
    out, spans, pos = [], [], 0
    for i, r in enumerate(recs):
        head = f" {r.desc}" if r.desc else ""
        if fmt == "fasta":
            s = f">{r.name}{head}\n" + "".join(line + "\n" for line in wrap(r.seq, width))
        elif fmt == "fastq":
            s = (f"@{r.name}{head}\n" + "".join(line + "\n" for line in wrap(r.seq, width)) + "+\n"
                 + "".join(line + "\n" for line in wrap(r.qual, width)))
        else:
            s = genbank_record(r, None if locus_lengths is None else locus_lengths[i])
        spans.append((pos, pos + len(s) - 1))
        s += "\n" * blank_lines
        out.append(s)
        pos += len(s)
    return "".join(out), spans


# Strategies are built once and drawn from inside composites: building a strategy per example
# (flatmap) cost more than the parsing under test.


@lru_cache(maxsize=None)
def names(fmt: str, min_size=1, max_size=5):
    alphabet = NAME_GENBANK if fmt == "genbank" else NAME_FASTX
    return st.lists(st.text(alphabet, min_size=1, max_size=16), min_size=min_size,
                    max_size=max_size, unique=True)


@lru_cache(maxsize=None)
def sequences(max_len: int):
    return st.text(st.sampled_from(BASES), min_size=1, max_size=max_len)


@lru_cache(maxsize=None)
def qualities(n: int):
    return st.text(QUAL, min_size=n, max_size=n)


DESCS = st.text(DESC, max_size=30)
WIDTHS = st.one_of(st.none(), st.integers(1, 80))


@st.composite
def cleans(draw, fmt: str, min_records=1, max_records=5, pad=False, max_len=300):
    """Valid files of one format.  ``pad``: sometimes a first record of 70 kb, so damage can land
    past the 64 KB that format detection samples."""
    recs = []
    for name in draw(names(fmt, min_records, max_records)):
        seq = draw(sequences(max_len))
        qual = draw(qualities(len(seq))) if fmt == "fastq" else None
        recs.append(Rec(name, seq, qual, " ".join(draw(DESCS).split())))
    width = None if fmt == "genbank" else draw(WIDTHS)
    if pad and draw(st.booleans()):
        recs.insert(0, big_record(fmt))
    return Clean(fmt, tuple(recs), width)


def big_record(fmt: str) -> Rec:
    seq = "ACGTTGCA" * 8750  # 70 kb
    return Rec("padding_record", seq, "I" * len(seq) if fmt == "fastq" else None, "70 kb")


def expected(fmt: str, recs) -> list[tuple]:
    """The oracle: (name, sequence, quality) read_records must give for these records."""
    return [(r.name, (r.seq.upper() if fmt == "genbank" else r.seq).encode(),
             r.qual.encode() if r.qual is not None else None) for r in recs]


def got(records) -> list[tuple]:
    return [(r.name, r.sequence, r.quality) for r in records]


# ------------------------------------------------------------------------------------ outcome


def outcome(fname: str, data: bytes, **kw):
    """(records, None) or (None, InputError); any other exception fails the test by its type."""
    try:
        return read_records(fname, raw=data, **kw), None
    except EngineInputError as e:
        msg = str(e)
        assert msg.startswith(f"{fname}: "), f"error does not start with the file name: {msg!r}"
        assert e.file == fname and e.problem and e.problem.strip(), msg
        return None, e
    except Exception as e:  # noqa: BLE001 - the point: nothing else may escape
        pytest.fail(f"read_records raised {type(e).__module__}.{type(e).__name__} (not InputError) "
                    f"on damaged input: {e!r}")


def must_fail(fname: str, data: bytes, **kw) -> EngineInputError:
    recs, err = outcome(fname, data, **kw)
    assert err is not None, f"damaged input was accepted: {got(recs)[:3]!r}"
    return err


def names_record(err: EngineInputError, index: int | None = None, name: str | None = None):
    """The message says which record: by name (``record 'x'``) or number (``#i``)."""
    msg = str(err)
    assert err.index is not None or err.record is not None, f"no record named: {msg!r}"
    if err.record is not None:
        assert f"record {err.record!r}" in msg, msg
    if err.index is not None:
        assert f"#{err.index + 1}" in msg, msg
    if index is not None:
        assert err.index == index, (index, msg)
    if name is not None:
        assert err.record == name, (name, msg)


# ------------------------------------------------------------------------------------ clean


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_CLEAN)
@given(data=st.data())
def test_clean_files_read_as_written(fmt, data):
    """The generator's files are valid: read_records gives the oracle exactly (descriptions too)."""
    c = data.draw(cleans(fmt))
    recs, err = outcome(f"clean.{fmt}", c.data())
    assert err is None, str(err)
    assert got(recs) == expected(fmt, c.recs)
    if fmt != "genbank":
        assert [r.description for r in recs] == [r.desc for r in c.recs]


# ------------------------------------------------------------------------------------ tolerated

TOLERATED = ("crlf", "bom", "trailing_blanks", "rewrap", "blank_lines", "case", "gzip")


def damage_tolerated(c: Clean, ops: frozenset, width, blanks: list[str], case: str):
    """Apply tolerated damage in a fixed order; returns (bytes, expected records)."""
    recs = c.recs
    if "case" in ops:
        recs = tuple(replace(r, seq=getattr(r.seq, case)()) for r in recs)
    layout = width if ("rewrap" in ops and c.fmt != "genbank") else c.width
    text = render(c.fmt, recs, layout, blank_lines=2 if "blank_lines" in ops else 0)[0]
    if "trailing_blanks" in ops:
        lines = text.split("\n")
        text = "\n".join(line + blanks[i % len(blanks)] for i, line in enumerate(lines))
    if "crlf" in ops:
        text = text.replace("\n", "\r\n")
    raw = text.encode()
    if "bom" in ops:
        raw = b"\xef\xbb\xbf" + raw
    if "gzip" in ops:
        raw = gzip.compress(raw, compresslevel=1)
    return raw, expected(c.fmt, recs)


tolerated_ops = st.sets(st.sampled_from(TOLERATED), min_size=1).map(frozenset)
blank_runs = st.lists(st.sampled_from(["", " ", "\t", "  ", " \t "]), min_size=1, max_size=5)


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_TOLERATED)
@given(data=st.data())
def test_tolerated_damage_gives_the_clean_records(fmt, data):
    c = data.draw(cleans(fmt))
    ops = data.draw(tolerated_ops, "ops")
    event(f"{len(ops)} kinds of damage at once")
    raw, want = damage_tolerated(c, ops, data.draw(st.integers(1, 90)), data.draw(blank_runs),
                                 data.draw(st.sampled_from(["lower", "upper"])))
    recs, err = outcome(f"tolerated.{fmt}", raw)
    assert err is None, f"{sorted(ops)}: {err}"
    assert got(recs) == want, sorted(ops)
    if fmt != "genbank":  # blanks at the end of a header are not part of the description
        assert [r.description for r in recs] == [r.desc for r in c.recs]


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_KMERS)
@given(data=st.data())
def test_tolerated_damage_gives_the_same_kmers(fmt, data):
    """"Never a wrong number": the k-mer sets of a tolerably damaged file and of the clean file
    are identical, read directly and through JaccardApp.parse."""
    from pairflow.apps.jaccard import JaccardApp

    c = data.draw(cleans(fmt, max_len=600))
    k = data.draw(st.integers(1, 31), "k")
    ops = data.draw(tolerated_ops, "ops")
    raw, _ = damage_tolerated(c, ops, data.draw(st.integers(1, 90)), data.draw(blank_runs),
                              data.draw(st.sampled_from(["lower", "upper"])))
    clean = canonical_kmers([r.sequence for r in read_records("clean", raw=c.data())], k)
    damaged = canonical_kmers([r.sequence for r in read_records("damaged", raw=raw)], k)
    assert np.array_equal(clean.hashes, damaged.hashes), sorted(ops)
    assert (clean.n_windows, clean.skipped_windows) == (damaged.n_windows, damaged.skipped_windows)
    # the oracle's own sequences give the same set: nothing was lost or invented on the way
    assert np.array_equal(canonical_kmers([r.seq.encode() for r in c.recs], k).hashes, clean.hashes)
    app = JaccardApp([f"memory://hostile/kmers.{fmt}"], k=k)
    (key,) = app.keys()
    if len(clean.hashes):
        assert np.array_equal(app.parse(key, raw)["kmers"], clean.hashes)


# ------------------------------------------------------------------------------------ truncation


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_TRUNCATE)
@given(data=st.data())
def test_truncated_file(fmt, data):
    c = data.draw(cleans(fmt))
    text, spans = render(fmt, c.recs, c.width)
    # anywhere, or at / next to a record's edges (where a cut can leave a valid shorter file)
    edges = sorted({min(max(p + d, 0), len(text) - 1) for s, e in spans for p in (s, e) for d in (-1, 0, 1)})
    cut = data.draw(st.one_of(st.integers(0, len(text) - 1), st.sampled_from(edges)), "cut")
    fname = f"cut.{fmt}"
    recs, err = outcome(fname, text[:cut].encode())
    event("raised" if err is not None else "accepted")
    want = expected(fmt, c.recs)
    if fmt == "fasta":
        # A FASTA file cut between two sequence letters (or at a line end) is indistinguishable
        # from a valid file with a shorter last sequence: no reader can tell.  Asserted: no other
        # exception escapes, and what is read is consistent with a shorter file — every record but
        # the last unchanged, the last one's sequence a prefix of the original.
        if recs is not None:
            n = len(recs)
            assert got(recs)[:-1] == want[:n - 1]
            name, seq, _ = got(recs)[-1]
            assert name == want[n - 1][0] and want[n - 1][1].startswith(seq) and seq
        return
    # FASTQ and GenBank: valid only when the cut falls between records (after a record's last
    # quality character or its '//'); anywhere else it must raise.
    between = [j for j, (_, end) in enumerate(spans)
               if end <= cut <= (spans[j + 1][0] if j + 1 < len(spans) else len(text))]
    if between:
        assert err is None, f"cut at {cut} between records raised: {err}"
        assert got(recs) == want[:between[0] + 1]
    else:
        assert err is not None, f"cut at {cut} inside a record was accepted: {got(recs)[-1:]!r}"
        if cut > text.index("\n"):  # past the first header line: the message names a record
            names_record(err)


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_GZIP)
@given(data=st.data())
def test_truncated_gzip_always_raises(fmt, data):
    c = data.draw(cleans(fmt))
    gz = gzip.compress(c.data(), compresslevel=data.draw(st.integers(1, 9)))
    cut = data.draw(st.integers(1, len(gz) - 1), "cut")
    err = must_fail(f"cut.{fmt}.gz", gz[:cut])
    # (a cut after the first byte leaves no gzip magic: "binary content")
    assert any(w in str(err) for w in ("truncated", "corrupt", "binary")), str(err)


def test_bgzip_cut_at_a_block_boundary_raises(tmp_path):
    """BGZF is a series of gzip members ending in an empty EOF block: a file cut exactly between
    two blocks is valid multi-member gzip, so only the missing EOF block tells the truncation."""
    import pysam

    body = "".join(f">r{i}\n{'ACGT' * 5000}\n" for i in range(20))
    (tmp_path / "x.fa").write_text(body)
    pysam.tabix_compress(str(tmp_path / "x.fa"), str(tmp_path / "x.fa.gz"))
    raw = (tmp_path / "x.fa.gz").read_bytes()
    assert got(read_records("whole.fa.gz", raw=raw)) == got(read_records("x.fa", raw=body.encode()))
    starts = [i for i in range(1, len(raw)) if raw.startswith(b"\x1f\x8b\x08\x04", i)]
    assert len(starts) > 3
    for s in starts:  # every block boundary, the one before the EOF block included
        err = must_fail("cut.fa.gz", raw[:s])
        assert "truncated" in str(err), str(err)
    for s in starts[:3]:
        must_fail("cut.fa.gz", raw[:s + 20])


# ------------------------------------------------------------------------------------ junk

CONTROL = bytes(range(0, 9)) + b"\x0b\x0e\x0f" + bytes(range(0x10, 0x20)) + b"\x7f"
junk = st.tuples(st.binary(max_size=8), st.sampled_from(list(CONTROL)), st.binary(max_size=8)) \
    .map(lambda t: (t[0] + bytes([t[1]]) + t[2]).replace(b"\n", b"").replace(b"\r", b""))
invalid_utf8 = st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\x80abc", b"\xed\xa0\x80"])


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_JUNK)
@given(data=st.data())
def test_binary_junk_anywhere_raises_naming_the_record(fmt, data):
    c = data.draw(cleans(fmt, pad=True))
    text, spans = render(fmt, c.recs, c.width)
    raw = text.encode()
    pos = data.draw(st.one_of(st.integers(0, len(raw)), st.integers(min(65537, len(raw)), len(raw))), "pos")
    bad = data.draw(st.one_of(junk, invalid_utf8), "junk")
    err = must_fail(f"junk.{fmt}", raw[:pos] + bad + raw[pos:])
    event("junk past the 64 KB sample" if pos > 65536 else "junk in the first 64 KB")
    # the record holding the junk: the last whose header marker lies wholly before it
    marker = 5 if fmt == "genbank" else 1
    holders = [j for j, (start, _) in enumerate(spans) if start + marker <= pos]
    if holders:
        names_record(err, index=holders[-1])
    else:
        assert "binary" in str(err) or "UTF-8" in str(err) or "not a sequence file" in str(err)


# ------------------------------------------------------------------------------------ headers


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_HEADER)
@given(data=st.data())
def test_dropped_header(fmt, data):
    """A header line dropped whole ("line"), or only its marker lost ("marker": '>' / '@' /
    'LOCUS', the header's text stays as a line of its own)."""
    c = data.draw(cleans(fmt, min_records=1))
    text, spans = render(fmt, c.recs, c.width)
    k = data.draw(st.integers(0, len(c.recs) - 1), "k")
    mode = data.draw(st.sampled_from(["line", "marker"]), "mode")
    start = spans[k][0]
    eol = text.index("\n", start)
    header = text[start:eol]
    marker = 5 if fmt == "genbank" else 1
    if mode == "line":
        damaged = text[:start] + text[eol + 1:]
    else:
        damaged = text[:start] + text[start + marker:]
    recs, err = outcome(f"headless.{fmt}", damaged.encode())
    event(f"{mode}: {'raised' if err is not None else 'accepted'}")
    if k == 0:
        assert err is not None, "a file without its first header was accepted"
        assert "header" in str(err) or "not a sequence file" in str(err), str(err)
        return
    if fmt == "fasta":
        # Both are valid FASTA when what is left is sequence letters: the record's lines join the
        # record before (undetectable by any reader) and the join must be exact.  A header text
        # with other characters is an error naming the record before.
        want = expected(fmt, c.recs)
        extra = b"" if mode == "line" else header[1:].encode()
        merged = (c.recs[k - 1].name, want[k - 1][1] + extra + want[k][1], None)
        if mode == "line" or set(header[1:]) <= LETTERS_KEPT:
            assert err is None, str(err)
            assert got(recs) == want[:k - 1] + [merged] + want[k + 1:]
        else:
            assert err is not None, f"header text {header!r} read as sequence letters"
            names_record(err, index=k - 1, name=c.recs[k - 1].name)
        return
    # FASTQ / GenBank: the record's lines belong to no record; they must not vanish silently.
    assert err is not None, f"record {k + 1} without its header ({mode}) was silently dropped"
    names_record(err)
    assert err.index in (k - 1, k), str(err)


# ------------------------------------------------------------------------------------ duplicates


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_DUPLICATE)
@given(data=st.data())
def test_duplicate_names(fmt, data):
    """read_records keeps both records; JaccardApp(item="record") refuses the duplicate by name."""
    import fsspec

    from pairflow.apps.jaccard import JaccardApp

    c = data.draw(cleans(fmt, min_records=2))
    i, j = sorted(data.draw(st.lists(st.integers(0, len(c.recs) - 1), min_size=2, max_size=2,
                                     unique=True), "pair"))
    dup = c.recs[i].name
    recs = tuple(replace(r, name=dup) if n == j else r for n, r in enumerate(c.recs))
    raw = render(fmt, recs, c.width)[0].encode()
    got_recs, err = outcome(f"dup.{fmt}", raw)
    assert err is None, str(err)
    assert got(got_recs) == expected(fmt, recs)
    url = f"memory://hostile/dup-{next(_serial)}.{fmt}"
    with fsspec.open(url, "wb") as f:
        f.write(raw)
    JaccardApp([url], k=5, item="file")  # one item: duplicate record names are fine
    with pytest.raises(EngineInputError) as e:
        JaccardApp([url], k=5, item="record")
    msg = str(e.value)
    assert msg.startswith(url + ": ") and repr(dup) in msg and "duplicate" in msg, msg
    assert e.value.record == dup


_serial = itertools.count()


# ------------------------------------------------------------------------------------ empty


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_EMPTY)
@given(data=st.data())
def test_empty_record(fmt, data):
    c = data.draw(cleans(fmt))
    j = data.draw(st.integers(0, len(c.recs)), "position")
    empty = Rec("empty_record", "", "" if fmt == "fastq" else None, "no letters")
    recs = c.recs[:j] + (empty,) + c.recs[j:]
    raw = render(fmt, recs, c.width)[0].encode()
    err = must_fail(f"empty.{fmt}", raw)
    # FASTQ: kseq reads the line after an empty record's '+' as its quality, so pysam fails on it
    # by number only; elsewhere the record is named.
    names_record(err, index=j, name=None if fmt == "fastq" else "empty_record")
    if fmt != "fastq":  # allow_empty keeps it (FASTQ cannot: see above, it stays an error)
        kept, err = outcome(f"empty.{fmt}", raw, allow_empty=True)
        assert err is None, str(err)
        assert got(kept) == expected(fmt, recs)


# ------------------------------------------------------------------------------------ letters

LETTERS_KEPT = set(string.ascii_letters + "*-.")
UNKNOWN_KEPT = list("*-.XUJZOBxujzob")
UNKNOWN_BAD = list("0123456789#!?~_=;:,()[]{}<|\"'@+$%&^`\\/") + ["é", "ü", "Ω", "→", "\u00a0", "ß"]
UNKNOWN = st.one_of(st.sampled_from(UNKNOWN_KEPT), st.sampled_from(UNKNOWN_BAD))
# not '>': at the start of a line it begins a new, valid record.  Not blanks: those at a line's
# end are tolerated (and removed), covered above.


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_UNKNOWN)
@given(data=st.data())
def test_unknown_letters(fmt, data):
    c = data.draw(cleans(fmt))
    j = data.draw(st.integers(0, len(c.recs) - 1), "record")
    seq = list(c.recs[j].seq)
    changes = data.draw(st.lists(st.tuples(st.integers(0, len(seq) - 1), UNKNOWN),
                                 min_size=1, max_size=4), "changes")
    for p, ch in changes:
        seq[p] = ch
    recs = c.recs[:j] + (replace(c.recs[j], seq="".join(seq)),) + c.recs[j + 1:]
    lengths = [len(r.seq) for r in c.recs]  # GenBank: LOCUS keeps the clean length
    raw = render(fmt, recs, c.width, locus_lengths=lengths)[0].encode()
    recs_read, err = outcome(f"letters.{fmt}", raw)
    event("raised" if err is not None else "kept")
    if set("".join(seq)) <= LETTERS_KEPT:
        assert err is None, str(err)
        assert got(recs_read) == expected(fmt, recs)
    else:
        assert err is not None, f"sequence with {[ch for _, ch in changes]!r} was accepted"
        names_record(err, index=j)


# ------------------------------------------------------------------------------------ mixed


@fixed(N_MIXED)
@given(data=st.data())
def test_mixed_formats_raise(data):
    first, second = data.draw(st.permutations(FORMATS), "order")[:2]
    a, b = data.draw(cleans(first)), data.draw(cleans(second))
    err = must_fail(f"mixed.{first}+{second}", a.data() + b.data())
    names_record(err)


# ------------------------------------------------------------------------------------ huge lines


@pytest.mark.parametrize("size", [1_000_000, 5_000_000])
@pytest.mark.parametrize("fmt", ["fasta", "fastq"])
@fixed(N_HUGE)
@given(seed=st.integers(0, 2**32 - 1))
def test_huge_single_line(fmt, size, seed):
    rng = np.random.default_rng(seed)
    event(f"{size // 1_000_000} MB")
    seq = rng.choice(np.frombuffer(b"ACGTACGTACGTN", np.uint8), size).tobytes().decode()
    big = Rec("huge", seq, "I" * size if fmt == "fastq" else None, "one line")
    small = Rec("small", "ACGTTTGA", "IIIIIIII" if fmt == "fastq" else None)
    one_line = render(fmt, (big, small), None)[0]
    recs, err = outcome(f"huge.{fmt}", one_line.encode())
    assert err is None, str(err)
    assert got(recs) == expected(fmt, (big, small))
    wrapped = render(fmt, (big, small), 60)[0].replace("\n", " \r\n").encode()
    recs2 = read_records("wrapped", raw=wrapped)
    assert got(recs2) == got(recs)
    k = int(rng.integers(11, 32))
    assert np.array_equal(canonical_kmers([r.sequence for r in recs], k).hashes,
                          canonical_kmers([r.sequence for r in recs2], k).hashes)
    one_line_spans = render(fmt, (big, small), None)[1]
    cut = int(rng.integers(1, one_line_spans[0][1]))  # inside the huge record
    recs3, err3 = outcome(f"huge.{fmt}", one_line[:cut].encode())
    if fmt == "fastq":
        assert err3 is not None
    elif recs3 is not None:
        assert seq.encode().startswith(recs3[0].sequence)
    gz = gzip.compress(one_line.encode(), compresslevel=1)
    must_fail(f"huge.{fmt}.gz", gz[:int(rng.integers(1, len(gz)))])


# ------------------------------------------------------------------------------------ no k-mer

NO_ACGT = list("NRYKMSWBDHVnrykmswbdhv-*")


@pytest.mark.parametrize("fmt", FORMATS)
@fixed(N_NO_KMER)
@given(data=st.data())
def test_jaccard_no_valid_kmer_names_file_and_record(fmt, data):
    """A record with no window of k A/C/G/T letters: JaccardApp.check and .parse raise
    InputError naming the file (item=file) and the record (item=record)."""
    import fsspec

    from pairflow.apps.jaccard import JaccardApp

    k = data.draw(st.integers(2, 31), "k")
    ns = data.draw(names(fmt, 1, 4), "names")
    # ACGT runs shorter than k between letters that are not bases
    short = st.lists(st.tuples(st.text(st.sampled_from("ACGTacgt"), max_size=k - 1),
                               st.sampled_from(NO_ACGT)), min_size=1, max_size=20) \
        .map(lambda parts: "".join(a + b for a, b in parts))
    assume("good_record" not in ns)
    seqs = [data.draw(short) for _ in ns]
    qual = (lambda s: "I" * len(s)) if fmt == "fastq" else (lambda s: None)
    bad = tuple(Rec(n, s, qual(s)) for n, s in zip(ns, seqs))
    raw = render(fmt, bad, None)[0].encode()
    url = f"memory://hostile/nokmer-{next(_serial)}.{fmt}"
    with fsspec.open(url, "wb") as f:
        f.write(raw)
    app = JaccardApp([url], k=k, item="file")
    (key,) = app.keys()
    for call in (app.check, app.parse):
        with pytest.raises(EngineInputError) as e:
            call(key, raw)
        assert str(e.value).startswith(url + ": ") and f"no valid {k}-mer" in str(e.value)
    # per record: a good record beside the bad ones is fine, each bad one is named
    good = Rec("good_record", "ACGT" * 10, "I" * 40 if fmt == "fastq" else None)
    raw2 = render(fmt, bad + (good,), None)[0].encode()
    url2 = f"memory://hostile/nokmer-{next(_serial)}.{fmt}"
    with fsspec.open(url2, "wb") as f:
        f.write(raw2)
    app2 = JaccardApp([url2], k=k, item="record", kernel="merge", on_bad_record="fail")
    for key2 in app2.keys():
        rname = key2.split("/", 1)[1]
        if rname == "good_record":
            app2.check(key2, raw2)
            assert len(app2.parse(key2, raw2)) > 0  # a record's item: its k-mer array
            continue
        with pytest.raises(EngineInputError) as e:
            app2.check(key2, raw2)
        assert str(e.value).startswith(url2 + ": ") and e.value.record == rname
        assert f"record {rname!r}" in str(e.value)


# ------------------------------------------------------------------------------------ found


def _gb(name: str, seq: str) -> bytes:
    return genbank_record(Rec(name, seq)).encode()


_PAD = b">padding_record\n" + b"ACGT" * 17500 + b"\n"  # past the 64 KB that detection samples

# What the properties above found in operators/sequences/, kept as fixed examples.
FOUND = [
    ("fasta blanks at line ends", b">a d \nACGT \nAC\t\nGG\n", [("a", b"ACGTACGG")]),
    ("fastq blank after the quality only", b"@a\nACGT\n+\nIIII \n", [("a", b"ACGT")]),
    ("byte-order mark", b"\xef\xbb\xbf>a\nACGT\n", [("a", b"ACGT")]),
    ("NUL past 64 KB", _PAD + b">a\nAC\x00GT\nGG\n", ("binary", 1)),
    ("NUL in a header past 64 KB", _PAD + b">a\x00b\nACGT\n", ("binary", 1)),
    ("FASTQ then GenBank", b"@a\nACGT\n+\nIIII\n" + _gb("B", "acgt"), ("belongs to no FASTQ record", 0)),
    ("GenBank record without its LOCUS line",
     _gb("A", "acgt") + _gb("B", "ggg").split(b"\n", 1)[1], ("not a LOCUS line", 0)),
    ("text between GenBank records", _gb("A", "acgt") + b">x\nACGT\n" + _gb("B", "ggg"),
     ("not a LOCUS line", 0)),
    ("FASTA then FASTQ", b">a\nACGT\n@b\nACGT\n+\nIIII\n", ("starts with '@'", 0)),
    ("FASTA line starting with '@'", b">0\n@\n", ("starts with '@'", 0)),
    ("FASTA '+' line", b">a\nACGT\n+\nACGT\n", ("'+' line", 0)),
    ("FASTA then GenBank", b">a\nACGT\n" + _gb("B", "acgt"), ("unexpected character", 0)),
    ("digits in a sequence", b">a\nAC12GT\n", ("unexpected character '1'", 0)),
    ("FASTQ bare '@' at the end", b"@a\nACGT\n+\nIIII\n@", ("ends the file", 1)),
    ("FASTA bare '>' at the end", b">a\nACGT\n>", ("ends the file", 1)),
]


@pytest.mark.parametrize("what, raw, want", FOUND, ids=[f[0] for f in FOUND])
def test_found_by_the_properties(what, raw, want):
    recs, err = outcome("found.seq", raw)
    if isinstance(want, list):
        assert err is None, str(err)
        assert [(r.name, r.sequence) for r in recs] == want
    else:
        assert err is not None, f"{what}: accepted as {got(recs)!r}"
        words, index = want
        assert words in str(err), str(err)
        names_record(err, index=index)
