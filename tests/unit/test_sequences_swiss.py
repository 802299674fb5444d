"""SwissProt flat files (HMMER's 7LESS_DROME query) through operators.sequences.read_records."""
import pytest

from pairflow.operators.sequences import InputError, detect_format, read_records
from tests.conftest import need as _need
from tests.unit.conftest import SHARE

SEVENLESS = SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "7LESS_DROME"

ENTRY = (b"ID   FOO_HUMAN               Reviewed;         5 AA.\n"
         b"DE   RecName: Full=Test protein;\n"
         b"SQ   SEQUENCE   5 AA;  500 MW;  0 CRC64;\n"
         b"     MKVLA\n//\n")


def test_sevenless_is_read_with_its_entry_name():
    from Bio import SeqIO
    (rec,) = read_records(str(_need(SEVENLESS)))
    assert rec.name == "7LESS_DROME"
    assert len(rec.sequence) == 2554
    assert rec.sequence.decode() == str(SeqIO.read(str(SEVENLESS), "swiss").seq)


def test_swiss_detected_and_parsed_from_bytes():
    assert detect_format(ENTRY) == "swiss"
    (rec,) = read_records("mem.dat", raw=ENTRY + ENTRY.replace(b"FOO_HUMAN", b"BAR_HUMAN"))[:1]
    assert (rec.name, rec.sequence) == ("FOO_HUMAN", b"MKVLA")
    assert [r.name for r in read_records("mem.dat", raw=ENTRY + ENTRY.replace(b"FOO", b"BAR"))] \
        == ["FOO_HUMAN", "BAR_HUMAN"]
    assert read_records("x", raw=ENTRY, fmt="swissprot")[0].name == "FOO_HUMAN"


def test_swiss_length_mismatch_and_malformed_entries_are_named():
    with pytest.raises(InputError, match=r"'FOO_HUMAN'.*5 letters but the ID line says 6"):
        read_records("x.dat", raw=ENTRY.replace(b"  5 AA.", b"  6 AA."))
    with pytest.raises(InputError, match="malformed SwissProt entry"):
        read_records("x.dat", raw=ENTRY.replace(b"SQ   SEQUENCE   5 AA;  500 MW;  0 CRC64;",
                                                b"SQ   SEQUENCE 5 AA;"))
    with pytest.raises(InputError, match="format fasta was requested but the content looks like swiss"):
        read_records("x.dat", raw=ENTRY, fmt="fasta")
