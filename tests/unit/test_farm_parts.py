"""The farm's pure parts without Ray: cutting, the writer and its CRC index, replay and gather,
volume planning and the hit merge, the unit queue. Oracles: Biopython's parsers, zlib on the
bytes read back independently, brute-force expectations written out by hand."""
from __future__ import annotations

import io
import json
import os
import zlib

import pytest

from pairflow.engine import InputError, PairflowError
from pairflow.engine.run.journal import JournalWriter
from pairflow.engine.run.rundir import FARM_UNITS, JOURNAL, write_json
from pairflow.engine.toolfarm.dispatch import UnitQueue
from pairflow.engine.toolfarm.gather import gather
from pairflow.engine.toolfarm.index import journal_blocks, replay
from pairflow.engine.toolfarm.segment import fasta_stats, merge_blast6, plan_volumes
from pairflow.engine.toolfarm.spec import FarmSpec, expand
from pairflow.engine.toolfarm.units import cut_units, read_unit, record_names, scan_records, unit_sizes
from pairflow.engine.toolfarm.writer import PARTIAL, BlockWriter, finalize
from tests.conftest import need, need_module, need_program
from tests.unit.conftest import SHARE

GLOBINS = SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"


def test_fasta_units_are_whole_records_in_order():
    SeqIO = need_module("Bio.SeqIO")
    path = str(need(GLOBINS))
    offsets = scan_records(path, "fasta")
    ids = [r.id for r in SeqIO.parse(path, "fasta")]
    assert len(offsets) - 1 == len(ids) == 45
    units = cut_units([offsets], 7, tail_units=2)
    data = open(path, "rb").read()
    assert b"".join(read_unit(path, u) for u in units) == data
    assert [u.uid for u in units] == list(range(len(units)))
    names = [n for u in units for n in record_names(read_unit(path, u), "fasta")]
    assert names == ids
    assert sum(u.records for u in units) == 45
    for u in units:
        assert read_unit(path, u).startswith(b">")
        assert [r.id for r in SeqIO.parse(io.StringIO(read_unit(path, u).decode()), "fasta")] \
            == ids[u.first:u.first + u.records]


def test_tail_units_are_smaller():
    sizes = unit_sizes(100, 10, tail_units=2)
    assert sum(sizes) == 100
    assert sizes[0] == 10 and sizes[-1] <= 3 and max(sizes[-4:]) <= 5
    assert sizes == sorted(sizes, reverse=True)
    assert unit_sizes(5, 10, 0) == [5]


def test_units_never_span_files(tmp_path):
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text(">a1\nMK\n>a2\nMV\n>a3\nML\n")
    b.write_text(">b1\nAC\n>b2\nGT\n")
    offs = [scan_records(str(a), "fasta"), scan_records(str(b), "fasta")]
    units = cut_units(offs, 2, tail_units=0)
    assert [(u.file, u.records, u.first) for u in units] == [(0, 2, 0), (0, 1, 2), (1, 2, 3)]
    per_file = cut_units(offs, 2, 0, per_file=True)
    assert [(u.file, u.start, u.end) for u in per_file] == [(0, 0, a.stat().st_size),
                                                            (1, 0, b.stat().st_size)]


def test_fastq_lines_and_patterns(tmp_path):
    SeqIO = need_module("Bio.SeqIO")
    fq = tmp_path / "r.fq"
    fq.write_text("".join(f"@r{i} x\nACGT\n+\nIIII\n" for i in range(5)))
    offs = scan_records(str(fq), "fastq")
    assert len(offs) - 1 == len(list(SeqIO.parse(str(fq), "fastq")))
    assert record_names(fq.read_bytes(), "fastq") == [f"r{i}" for i in range(5)]
    bad = tmp_path / "bad.fq"
    bad.write_text("@r0\nACGT\n-\nIIII\n")
    with pytest.raises(InputError, match="expected the '\\+' line"):
        scan_records(str(bad), "fastq")
    mol2 = tmp_path / "m.mol2"
    mol2.write_text("@<TRIPOS>MOLECULE\nm1\n@<TRIPOS>ATOM\n@<TRIPOS>MOLECULE\nm2\n")
    assert scan_records(str(mol2), "pattern", r"@<TRIPOS>MOLECULE") == \
        [0, len("@<TRIPOS>MOLECULE\nm1\n@<TRIPOS>ATOM\n"), mol2.stat().st_size]
    sdf = tmp_path / "m.sdf"
    sdf.write_text("m1\nx\n$$$$\nm2\ny\n$$$$\n")
    assert scan_records(str(sdf), "pattern", r"\$\$\$\$", pattern_ends=True) == \
        [0, len("m1\nx\n$$$$\n"), sdf.stat().st_size]
    lines = tmp_path / "l.txt"
    lines.write_text("a\nb\n\nc\n")
    assert len(scan_records(str(lines), "lines")) - 1 == 3
    notfa = tmp_path / "x.fa"
    notfa.write_text("hello\n>a\nMK\n")
    with pytest.raises(InputError, match="not FASTA"):
        scan_records(str(notfa), "fasta")


def test_spec_checks_and_expansion():
    with pytest.raises(PairflowError, match="no shared file 'db'"):
        FarmSpec(program=["blastp", "-query", "{input}", "-db", "{shared:db}"],
                 inputs=["q.fa"]).check()
    with pytest.raises(PairflowError, match="stream 'tblout'"):
        FarmSpec(program=["t", "{input}"], inputs=["q"], streams=["tblout"]).check()
    with pytest.raises(PairflowError, match="unknown cut"):
        FarmSpec(program=["t", "{input}"], inputs=["q"], cut="xml").check()
    argv = expand(["-db", "{shared:db}", "--x={{literal}}", "a b;c", "{input_records}"],
                  {"shared:db": "/s/db.fa", "input_records": "45"})
    assert argv == ["-db", "/s/db.fa", "--x={literal}", "a b;c", "45"]
    with pytest.raises(PairflowError, match="no value for placeholder"):
        expand(["{out:x}"], {})


def _write_blocks(tmp_path, blocks, flush_bytes=64):
    w = BlockWriter(str(tmp_path / "result" / "stdout" / "a0-n0"), "stdout",
                    flush_bytes=flush_bytes, flush_s=0.05)
    for unit, data in blocks:
        w.append(unit, unit * 10, data)
    entries = w.drain() + w.close()
    return w, entries


def test_writer_index_matches_bytes_read_back(tmp_path):
    blocks = [(u, f"unit {u} ".encode() * (u + 1)) for u in (3, 0, 2, 1)]
    w, entries = _write_blocks(tmp_path, blocks, flush_bytes=20)
    assert w.flushes >= 2  # flushed on size, not only at close
    path = tmp_path / "result" / "stdout" / "a0-n0"
    assert not path.exists() and (tmp_path / "result" / "stdout" / ("a0-n0" + PARTIAL)).exists()
    finalize(str(path))
    raw = path.read_bytes()
    assert sorted(e["unit"] for e in entries) == [0, 1, 2, 3]
    for e in entries:
        chunk = raw[e["offset"]:e["offset"] + e["length"]]
        assert chunk == dict(blocks)[e["unit"]]
        assert zlib.crc32(chunk) == e["crc32"]
        assert e["record"] == e["unit"] * 10


def _run_dir(tmp_path, blocks, n_units):
    _, entries = _write_blocks(tmp_path, blocks)
    j = JournalWriter(str(tmp_path / JOURNAL))
    journal_blocks(j, entries, "attempt-0")
    j.close()
    write_json(str(tmp_path / FARM_UNITS), {"streams": ["stdout"], "records": n_units,
                                            "units": [[u, 0, 0, 0, u, 1] for u in range(n_units)]})
    return entries


def test_gather_in_input_order_and_crc(tmp_path):
    blocks = [(2, b"c\n"), (0, b"a\n"), (1, b"b\n")]
    entries = _run_dir(tmp_path, blocks, 4)
    out = tmp_path / "out.txt"
    report = gather(str(tmp_path), "stdout", str(out))
    assert out.read_bytes() == b"a\nb\nc\n" and report["missing"] == [3]
    done, rep = replay(str(tmp_path / JOURNAL), str(tmp_path / "result"), ["stdout"], 4)
    assert done == {0, 1, 2} and rep["rerun"] == 1
    # corrupt unit 1's byte: replay and gather both catch it by its CRC
    e1 = next(e for e in entries if e["unit"] == 1)
    part = tmp_path / "result" / "stdout" / ("a0-n0" + PARTIAL)
    raw = bytearray(part.read_bytes())
    raw[e1["offset"]] ^= 0xFF
    part.write_bytes(bytes(raw))
    done, rep = replay(str(tmp_path / JOURNAL), str(tmp_path / "result"), ["stdout"], 4)
    assert done == {0, 2} and rep["corrupt_units"] == [1]
    with pytest.raises(PairflowError, match="unit 1's block .* CRC32"):
        gather(str(tmp_path), "stdout", str(out))
    assert out.read_bytes() == b"a\nb\nc\n"  # the old complete file, never a partial one
    # a later write of unit 1 elsewhere supersedes the corrupt one
    w = BlockWriter(str(tmp_path / "result" / "stdout" / "a1-n0"), "stdout")
    w.append(1, 10, b"b\n")
    j = JournalWriter(str(tmp_path / JOURNAL))
    journal_blocks(j, w.close(), "attempt-1")
    j.close()
    done, _ = replay(str(tmp_path / JOURNAL), str(tmp_path / "result"), ["stdout"], 4)
    assert done == {0, 1, 2}
    buf = io.BytesIO()
    gather(str(tmp_path), "stdout", buf)
    assert buf.getvalue() == b"a\nb\nc\n"
    with open(tmp_path / JOURNAL) as fh:
        lines = [json.loads(x) for x in fh]
    assert {"tile", "sink", "location", "length", "crc32", "offset", "record"} <= set(lines[0])


def test_volumes_are_contiguous_and_balanced(tmp_path):
    path = str(need(GLOBINS))
    offs, letters = fasta_stats(path)
    SeqIO = need_module("Bio.SeqIO")
    assert letters == [len(r.seq) for r in SeqIO.parse(path, "fasta")]
    vols = plan_volumes(offs, letters, 3)
    assert len(vols) == 3 and vols[0][0] == 0 and vols[-1][1] == os.path.getsize(path)
    assert all(a[1] == b[0] for a, b in zip(vols, vols[1:]))
    assert plan_volumes(offs[:3], letters[:2], 5) == [(offs[0], offs[1]), (offs[1], offs[2])]


def test_blast6_merge_orders_like_one_search():
    def line(q, s, e, b):
        return f"{q}\t{s}\t90.0\t10\t1\t0\t1\t10\t1\t10\t{e}\t{b}\n".encode()
    v0 = line("q1", "s1", "1e-10", "50.0") + line("q2", "s2", "0.5", "20.0")
    v1 = line("q1", "s9", "1e-20", "80.0") + line("q1", "s9", "1e-3", "30.0") + \
        line("q0", "s5", "2.0", "15.0")
    merged = merge_blast6([v0, v1], ["q0", "q1", "q2"], max_targets=500)
    assert merged == line("q0", "s5", "2.0", "15.0") + line("q1", "s9", "1e-20", "80.0") + \
        line("q1", "s9", "1e-3", "30.0") + line("q1", "s1", "1e-10", "50.0") + \
        line("q2", "s2", "0.5", "20.0")
    top1 = merge_blast6([v0, v1], ["q0", "q1", "q2"], max_targets=1)
    assert b"s1" not in top1 and top1.count(b"s9") == 2


def test_unit_queue_retries_then_reports_and_holds_back_the_tail():
    q = UnitQueue(list(range(8)), retries=1)
    # before any unit ran: one running and two queued, so a worker asks every two units
    assert [q.next_for("a", 2) for _ in range(4)] == [0, 1, 2, None]
    assert q.next_for("b", 2) == 3
    assert q.failed("a", 0, {"error": "exit status 1"}) is True  # retried first
    assert q.next_for("a", 2) == 0
    assert q.failed("a", 0, {"error": "exit status 1"}) is False
    assert q.failures[0]["attempts"] == 2
    q.succeeded("a", 1, 0.001)
    assert q.depth() == 8  # short units: a deep prefetch queue hides the hand-out
    # pending (4, 5, 6, 7) > workers: a full depth; then the tail only to idle workers
    assert q.next_for("a", 2) == 4 and q.next_for("a", 2) == 5
    assert q.next_for("a", 2) is None and q.next_for("c", 2) == 6
    assert q.next_for("c", 2) is None and q.next_for("d", 2) == 7
    assert q.lost_worker("a") == [2, 4, 5] and list(q.pending) == [2, 4, 5]
    q2 = UnitQueue([0], retries=0)
    q2.succeeded("x", 0, 10.0)
    assert q2.depth() == 3


def test_an_idle_worker_takes_back_half_of_the_busiest_queue():
    q = UnitQueue(list(range(8)), retries=0)
    assert [q.next_for("a", 2) for _ in range(3)] == [0, 1, 2]
    assert [q.next_for("b", 2) for _ in range(3)] == [3, 4, 5]
    assert q.steal("b") is None  # b still holds units
    assert q.steal("c") is None  # units are pending
    for u in (6, 7):
        assert q.next_for("c", 2) == u
        q.succeeded("c", u, 1.0)
    # c holds nothing and nothing is pending: a and b hold one running and two queued each;
    # ties go to the later name, half of two queued is one
    assert q.steal("c") == ("b", 1)
    q.returned("b", [5])
    assert q.held["b"] == [3, 4] and list(q.pending) == [5] and q.attempts[5] == 0
    assert q.stolen == 1
    assert q.next_for("c", 2) == 5 and q.attempts[5] == 1 and q.held["c"] == [5]
    for u in (3, 4):
        q.succeeded("b", u, 1.0)
    q.succeeded("a", 0, 1.0)
    assert q.steal("b") == ("a", 1)  # a holds one running and one queued; c one running
    q.returned("a", [2])
    assert q.held["a"] == [1] and list(q.pending) == [2]


def test_a_refused_write_is_a_failed_run():
    # a run whose output the writer then refuses is a failed run: retried like any other
    q3 = UnitQueue([0], retries=1)
    assert q3.next_for("w", 1) == 0
    q3.ran("w", 0, 0.1)
    assert 0 not in q3.finished and q3.held["w"] == []
    assert q3.failed("w", 0, {"error": "writing the output failed"}) is True
    assert q3.next_for("w", 1) == 0
    q3.ran("w", 0, 0.1)
    q3.written(0)
    assert q3.finished == {0} and q3.idle()


def _children_running(argv: list[str]) -> list[int]:
    """This process's child processes running ``argv`` (from /proc)."""
    found = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")[:-1]
        except OSError:
            continue
        if ppid == os.getpid() and [c.decode() for c in cmd] == argv:
            found.append(int(d))
    return found


def test_run_unit_feeds_collects_and_reports(tmp_path):
    from pairflow.engine.toolfarm.tool import run_unit
    for p in ("cat", "cp", "sh", "sleep"):
        need_program(p)
    data = b">a\nMK\n>b\nMV\n"
    spec = FarmSpec(program=["cat"], inputs=["x"], feed="stdin").check()
    r = run_unit(spec, data, [{}], str(tmp_path), {})
    assert r.ok and r.outputs == {"stdout": data}
    spec = FarmSpec(program=["cp", "{input}", "{out:copy}"], inputs=["x"],
                    streams=["copy"]).check()
    r = run_unit(spec, data, [{}], str(tmp_path), {})
    assert r.ok and r.outputs == {"copy": data}
    # arguments are never shell words: ';' and spaces reach the program as they are
    spec = FarmSpec(program=["sh", "-c", 'printf "%s|" "$@"; echo >&2 oops; exit 3', "x",
                             "a b;c", "{input_records}"], inputs=["x"], feed="stdin").check()
    r = run_unit(spec, data, [{}], str(tmp_path), {"input_records": "2"})
    assert not r.ok and r.returncode == 3 and "oops" in r.stderr and r.error == "exit status 3"
    spec = FarmSpec(program=["sh", "-c", 'printf "%s|" "$@"', "x", "a b;c"], inputs=["x"],
                    feed="stdin").check()
    assert run_unit(spec, data, [{}], str(tmp_path), {}).outputs["stdout"] == b"a b;c|"
    # a tool that would run for an hour is killed at its timeout: reported as timed out, and
    # no process of it is left (had run_unit waited for it, the test would not end)
    spec = FarmSpec(program=["sleep", "3607"], inputs=["x"], feed="stdin",
                    timeout_s=0.2).check()
    r = run_unit(spec, data, [{}], str(tmp_path), {})
    assert not r.ok and r.returncode is None and r.error == "timed out after 0.2 s"
    assert _children_running(["sleep", "3607"]) == []
    spec = FarmSpec(program=["true", "{out:missing}"], inputs=["x"], feed="stdin",
                    streams=["missing"]).check()
    assert "wrote no missing file" in run_unit(spec, data, [{}], str(tmp_path), {}).error
    # one run per volume, outputs merged (concat): the volume's file reaches the tool
    a, b = tmp_path / "v0", tmp_path / "v1"
    a.write_bytes(b"zero\n")
    b.write_bytes(b"one\n")
    spec = FarmSpec(program=["cat", "{shared:db}"], inputs=["x"], feed="stdin",
                    shared={"db": "db"}, volumes=2, segment="db").check()
    r = run_unit(spec, data, [{"db": str(a)}, {"db": str(b)}], str(tmp_path), {})
    assert r.outputs["stdout"] == b"zero\none\n"
    assert os.listdir(tmp_path / "tmp") == []  # unit temporaries removed


def test_run_unit_measures_the_tools_cpu_time(tmp_path):
    """``cpu_s`` is the tool's CPU time (what unit sizing reads), not its wall time: a child
    that spins until its own clock says 0.3 s of CPU against one that sleeps 0.3 s; and a
    unit larger than a pipe's buffer goes through stdin and back whole."""
    import sys
    from pairflow.engine.toolfarm.tool import run_unit
    need_program("sleep")
    spin = ("import time\nwhile time.process_time() < 0.3: pass\n"
            "print(time.process_time())")
    spec = FarmSpec(program=[sys.executable, "-c", spin], inputs=["x"], feed="stdin").check()
    r = run_unit(spec, b"", [{}], str(tmp_path), {})
    own = float(r.outputs["stdout"])  # the child's own account, interpreter start included
    assert r.ok and own >= 0.3 and own - 0.01 <= r.cpu_s <= own + 0.2
    spec = FarmSpec(program=["sleep", "0.3"], inputs=["x"], feed="stdin").check()
    r = run_unit(spec, b"", [{}], str(tmp_path), {})
    assert r.ok and r.seconds >= 0.3 and r.cpu_s < 0.1
    big = os.urandom(3 << 20)
    spec = FarmSpec(program=["cat"], inputs=["x"], feed="stdin").check()
    r = run_unit(spec, big, [{}], str(tmp_path), {})
    assert r.ok and r.outputs["stdout"] == big


def test_prepare_node_fetches_and_prepares_once(tmp_path):
    import threading

    from pairflow.engine.toolfarm.shared import bytes_digest, prepare_node
    data = b">s1\nMKV\n>s2\nMLL\n"
    fetched = []

    def fetch(ref):
        fetched.append(ref)
        return data

    shared = {"db": {"path": "/x/db.fa", "digest": bytes_digest(data), "ref": "R"}}
    prep = [["cp", "{shared:db}", "{shared:db}.prepared"]]
    scratch = str(tmp_path / "scratch")
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        prepare_node(scratch, shared, prep, None, None, fetch, {}))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fetched) == 1 and sum(r["fetched_bytes"] for r in results) == len(data)
    path = results[0]["paths"][0]["db"]
    assert open(path, "rb").read() == data == open(path + ".prepared", "rb").read()
    # volumes: byte ranges written beside the whole file, each prepared
    vols = [(0, 8), (8, len(data))]
    r = prepare_node(str(tmp_path / "s2"), shared, prep, vols, "db", fetch, {})
    assert [open(p["db"], "rb").read() for p in r["paths"]] == [data[:8], data[8:]]
    assert all(os.path.exists(p["db"] + ".prepared") for p in r["paths"])
    bad = {"db": {**shared["db"], "digest": "0" * 64}}
    with pytest.raises(PairflowError, match="another digest"):
        prepare_node(str(tmp_path / "s3"), bad, [], None, None, fetch, {})
    with pytest.raises(PairflowError, match="node preparation false exited with 1"):
        prepare_node(str(tmp_path / "s4"), shared, [["false"]], None, None, fetch, {})


def test_cli_help_lists_gather_and_gather_exit_codes(tmp_path, capsys):
    from pairflow.apps.cli import help_text, main
    assert "gather RUN_DIR STREAM" in help_text()
    assert main(["gather", str(tmp_path), "stdout"]) == 2
    assert "not a farm's run directory" in capsys.readouterr().err
    _run_dir(tmp_path, [(0, b"a\n"), (2, b"c\n")], 3)
    out = tmp_path / "o.txt"
    assert main(["gather", str(tmp_path), "stdout", "-o", str(out)]) == 1  # unit 1 missing
    assert out.read_bytes() == b"a\nc\n" and "[1]" in capsys.readouterr().err
    assert main(["gather", str(tmp_path), "tblout"]) == 2


def test_compressed_inputs_are_decompressed_once_and_whole(tmp_path):
    import bz2
    import gzip
    import lzma
    from pairflow.engine.errors import InputError
    from pairflow.engine.toolfarm.units import decompressed
    text = b">a one\nMKV\n>b\nMLL\n"
    plain = tmp_path / "q.fa"
    plain.write_bytes(text)
    assert decompressed(str(plain), str(tmp_path / "in")) == str(plain)  # not compressed: as is
    into = tmp_path / "in"
    for ext, mod in ((".gz", gzip), (".bz2", bz2), (".xz", lzma)):
        src = tmp_path / f"q.fa{ext}"
        src.write_bytes(mod.compress(text))
        out = decompressed(str(src), str(into))
        assert open(out, "rb").read() == text and out.endswith("-q.fa")
        assert decompressed(str(src), str(into)) == out  # once: found again, not rewritten
    assert len(os.listdir(into)) == 3  # one copy per compressed file, names kept apart
    bad = tmp_path / "cut.fa.gz"
    bad.write_bytes(gzip.compress(text)[:-12])  # truncated
    with pytest.raises(InputError, match="cut.fa.gz.*cannot decompress"):
        decompressed(str(bad), str(into))
    assert not [f for f in os.listdir(into) if f.endswith(".partial") or "cut.fa" in f]


def test_the_last_units_of_a_local_run_pass_every_core(tmp_path):
    """``drive_local`` with ``all_cores_last=2`` on two one-core workers: the last two units
    handed out get ``{threads}`` = 2 (every core), the others 1, and every unit's output is on
    disk once, in input order. Oracle: the tool echoes the threads it was given; the units'
    order is the input's."""
    from pairflow.engine.run.rundir import FARM_LOG, RunRecorder
    from pairflow.engine.toolfarm.local import drive_local
    from pairflow.engine.toolfarm.units import Unit
    need_program("sh")
    inp = tmp_path / "in.txt"
    inp.write_bytes(b"".join(b"r%d\n" % i for i in range(8)))
    spec = FarmSpec(program=["sh", "-c", 'sed "s/$/ $0/"', "{threads}"], inputs=[str(inp)],
                    cut="lines", feed="stdin").check()
    offs = scan_records(str(inp), "lines")
    units = cut_units([offs], 1, 0)
    assert [u.records for u in units] == [1] * 8 and isinstance(units[0], Unit)
    rec = RunRecorder.open(str(tmp_path / "run"), str(tmp_path), "t")
    stats = drive_local(spec, units, set(), [], [{}], str(tmp_path / "scratch"), {},
                        [1, 1], rec.rundir.result_dir, rec, False, 0, 1 << 20, 0.1,
                        all_cores_last=2)
    assert stats["units_done"] == 8 and not stats["failures"]
    log = [json.loads(x) for x in open(rec.file(FARM_LOG))]
    threads = {x["unit"]: x["threads"] for x in log}  # handed out in input order
    assert [threads[u] for u in range(8)] == [1] * 6 + [2] * 2
    write_json(rec.file(FARM_UNITS), {"streams": ["stdout"],
                                      "units": [u.to_list() for u in units]})
    out = io.BytesIO()
    gather(rec.path, "stdout", out)
    assert out.getvalue() == b"".join(b"r%d %d\n" % (i, threads[i]) for i in range(8))


def test_a_farm_on_one_machine_stays_in_process_whatever_its_size():
    """The one rule (``executor_choice.choose``) with ``parallel_here`` (a farm's tools are
    child processes, threads use every core): in-process for any estimate, even none; Ray
    where a cluster is named or Ray is up; a forced executor is obeyed; without
    ``parallel_here`` the estimate decides as before."""
    from pairflow.engine.run.executor_choice import choose
    for est in (0.0, 1e6, None):
        assert choose("auto", None, est, 20.0, False, parallel_here=True) == "inprocess"
    assert choose("auto", "10.0.0.1:6379", 1.0, 20.0, False, parallel_here=True) == "ray"
    assert choose("auto", None, 1.0, 20.0, True, parallel_here=True) == "ray"
    assert choose("ray", None, 1.0, 20.0, False, parallel_here=True) == "ray"
    assert choose("auto", None, 1e6, 20.0, False) == "ray"
    assert choose("auto", None, 1.0, 20.0, False) == "inprocess"
