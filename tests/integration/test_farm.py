"""Tool farms against the oracle of every farm: the same unmodified tool run directly on the
whole input with the same database and options (BLAST+, HMMER, Clustal Omega from Debian)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import need, need_module, need_program
from pathlib import Path

from tests.oracles import DATA_ROOT

pytestmark = pytest.mark.ray
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARE = Path(DATA_ROOT) / "usr" / "share"
TUT = SHARE / "doc" / "hmmer" / "examples" / "tutorial"
SWISS = SHARE / "EMBOSS" / "test" / "swiss" / "seq.dat"
BALIBASE = SHARE / "dialign-tx"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """globins45 as queries; a database of emboss-test's 100 Swiss-Prot entries + the globins
    (FASTA written by Biopython, not by the code under test)."""
    SeqIO = need_module("Bio.SeqIO")
    d = tmp_path_factory.mktemp("farmdata")
    globins = str(need(TUT / "globins45.fa"))
    recs = list(SeqIO.parse(str(need(SWISS)), "swiss")) + list(SeqIO.parse(globins, "fasta"))
    for r in recs:
        r.description = ""
    db = str(d / "db.fa")
    SeqIO.write(recs, db, "fasta")
    return {"dir": d, "queries": globins, "db": db, "hmm": str(need(TUT / "globins4.hmm")),
            "n_db": len(recs)}


def direct(argv, cwd=None) -> bytes:
    proc = subprocess.run(argv, capture_output=True, cwd=cwd, check=True)
    return proc.stdout


def blast_oracle(data, queries, args=("-outfmt", "6")) -> bytes:
    need_program("blastp")
    out = data["dir"] / "oracle_db"
    if not (data["dir"] / "oracle_db.pin").exists():
        direct(["makeblastdb", "-in", data["db"], "-dbtype", "prot", "-out", str(out)])
    return direct(["blastp", "-query", queries, "-db", str(out), *args])


def cli(*argv) -> int:
    from pairflow.apps.cli import main
    return main(["progress=false", "cluster.num_cpus=2", *argv])


def gathered(run_dir, stream="stdout") -> bytes:
    from pairflow.engine import gather
    out = os.path.join(run_dir, f"gathered.{stream}")
    gather(run_dir, stream, out)
    with open(out, "rb") as fh:
        return fh.read()


def lines(b: bytes) -> list[bytes]:
    return sorted(b.splitlines())  # a stable sort of whole lines


def test_blastp_cli_and_gather_equal_one_blastp(ray_local, data, tmp_path, monkeypatch):
    monkeypatch.setenv("PAIRFLOW_SCRATCH", str(tmp_path / "scratch"))  # a node never seen
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=blastp", f"farm.queries={data['queries']}",
               f"farm.db={data['db']}", "farm.args=[-outfmt,'6',-evalue,'10']",
               "farm.unit_records=4", f"run_dir={rd}") == 0
    out = str(tmp_path / "hits.tsv")
    from pairflow.apps.cli import main
    assert main(["gather", rd, "stdout", "-o", out]) == 0
    got = open(out, "rb").read()
    want = blast_oracle(data, data["queries"], ("-outfmt", "6", "-evalue", "10"))
    assert len(want.splitlines()) > 1000
    assert lines(got) == lines(want)
    assert got == want  # units in input order: even the order of one search
    summary = json.load(open(os.path.join(rd, "summary.json")))
    assert summary["units_done"] == summary["units_total"] > 5
    # the database reached the node once: one fetch of its bytes, whatever the workers
    assert list(summary["node_bytes"].values()) == [os.path.getsize(data["db"])]
    files = os.listdir(os.path.join(rd, "result", "stdout"))
    assert files and not [f for f in files if f.endswith(".partial")]
    assert os.listdir(tmp_path / "scratch") == []  # the node's copy went with the run


def test_auto_units_follow_the_measured_curve_and_gather_equals_one_blastp(ray_local, data,
                                                                           tmp_path):
    """The blastp preset's unit_records=auto (Ray up: the ladder runs on its workers): the
    ladder's units are the run's first units, the rest is cut at the size the curve chose,
    and the gathered output is still exactly one blastp over the whole input."""
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=blastp", f"farm.queries={data['db']}", f"farm.db={data['db']}",
               f"run_dir={rd}") == 0
    assert gathered(rd) == blast_oracle(data, data["db"])
    summary = json.load(open(os.path.join(rd, "summary.json")))
    assert summary["executor"] == "ray"
    curve, n = summary["unit_choice"]["curve"], summary["unit_records"]
    units = json.load(open(os.path.join(rd, "units.json")))["units"]
    # the wiring: a fresh UnitSizer (hand cases in tests/unit/test_farm_units_auto.py) fed
    # the ladder's recorded timings of these units asks for the same steps and chooses the same
    from pairflow.engine.toolfarm.sizing import UnitSizer
    sizer, k, left = UnitSizer(data["n_db"], 2, curve["mean_record_bytes"]), 0, data["n_db"]
    for step in curve["steps"]:
        assert sizer.next_step(left) == step["size"]
        for seconds, cpu_s in zip(step["seconds"], step["cpu_s"]):
            u = units[k]
            assert u[5] == step["size"]  # records of the k-th unit of the run
            assert cpu_s is not None and cpu_s > 0  # the tool's CPU time, measured
            sizer.observe(step["size"], u[5], u[3] - u[2], seconds, cpu_s)
            k, left = k + 1, left - u[5]
    assert sizer.next_step(left) is None and sizer.stopped == curve["stopped"]
    assert sizer.choose() == n and k == summary["units_probed"] >= 2
    sizes = [u[5] for u in units[k:]]
    assert max(sizes) == n and sum(u[5] for u in units) == data["n_db"]


INPROCESS = textwrap.dedent("""
    import json, sys
    from pairflow.engine import farm, gather
    out = []
    for kw in json.loads({runs!r}):
        r = farm(progress=False, num_cpus=2, **kw)
        stream = kw.get("streams", ["stdout"])[0]
        gather(r.run_dir, stream, r.run_dir + "/gathered")
        out.append({{k: r.summary[k] for k in ("executor", "threads", "units_done",
                                               "units_total", "node_bytes")}})
    print(json.dumps({{"runs": out, "ray_imported": "ray" in sys.modules}}))
""")


def test_small_farms_run_in_process_without_ray_and_equal_the_whole_tool(data, tmp_path):
    """In a fresh interpreter (no Ray up): blastp with auto units, hmmsearch, and Clustal
    Omega on one file with two cores (one worker passing --threads 2) run on threads of the
    process, never importing Ray; each gathered output equals the tool run on the whole
    input."""
    for tool in ("blastp", "hmmsearch", "clustalo"):
        need_program(tool)
    bb = sorted(str(p) for p in need(BALIBASE).glob("BB*.tfa"))[0]
    blast = ["blastp", "-query", "{input}", "-db", "{shared:db}", "-outfmt", "6",
             "-num_threads", "{threads}"]
    runs = [dict(program=blast, inputs=[data["queries"]], shared={"db": data["db"]},
                 prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
                 unit_records="auto", run_dir=str(tmp_path / "blastp")),
            dict(program=["hmmsearch", "--cpu", "{threads}", "--tblout", "{out:tblout}", "-o",
                          os.devnull, "-Z", "{input_records}", "{shared:hmm}", "{input}"],
                 inputs=[data["db"]], shared={"hmm": data["hmm"]}, streams=["tblout"],
                 unit_records=10, run_dir=str(tmp_path / "hmmsearch")),
            dict(program=["clustalo", "-i", "{input}", "--threads", "{threads}"], inputs=[bb],
                 cut="file", unit_records=1, run_dir=str(tmp_path / "clustalo"))]
    proc = subprocess.run([sys.executable, "-c", INPROCESS.format(
                                                                  runs=json.dumps(runs))],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PAIRFLOW_SCRATCH=str(tmp_path / "scratch")))
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ray_imported"] is False
    assert [r["executor"] for r in got["runs"]] == ["inprocess"] * 3
    assert all(r["units_done"] == r["units_total"] for r in got["runs"])
    blastp, hmmsearch, clustalo = got["runs"]
    assert blastp["threads"] == [1, 1] and clustalo["threads"] == [2]
    assert blastp["node_bytes"] == {"local": os.path.getsize(data["db"])}
    assert os.listdir(tmp_path / "scratch") == []  # the local copy went with the run
    assert (tmp_path / "blastp" / "gathered").read_bytes() == blast_oracle(data,
                                                                           data["queries"])
    want_tbl = tmp_path / "whole.tbl"
    direct(["hmmsearch", "--cpu", "2", "--tblout", str(want_tbl), "-o", os.devnull,
            data["hmm"], data["db"]])

    def hits(b):  # comment lines (the command line, the date) differ; order is per unit
        return sorted(x for x in b.splitlines() if not x.startswith(b"#"))
    assert hits((tmp_path / "hmmsearch" / "gathered").read_bytes()) == \
        hits(want_tbl.read_bytes()) and len(hits(want_tbl.read_bytes())) > 40
    assert (tmp_path / "clustalo" / "gathered").read_bytes() == \
        direct(["clustalo", "-i", bb, "--threads", "2"])


def test_hmmsearch_tblout_equals_one_hmmsearch(ray_local, data, tmp_path):
    need_program("hmmsearch")
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=hmmsearch", f"farm.hmm={data['hmm']}", f"farm.db={data['db']}",
               "farm.unit_records=10", f"run_dir={rd}") == 0
    got = gathered(rd, "tblout")
    want_path = tmp_path / "whole.tbl"
    direct(["hmmsearch", "--cpu", "1", "--tblout", str(want_path), "-o", os.devnull,
            data["hmm"], data["db"]])
    def hits(b):  # comment lines (the command line, the date) differ; order is per unit
        return sorted(x for x in b.splitlines() if not x.startswith(b"#"))
    want = hits(want_path.read_bytes())
    assert len(want) > 40
    assert hits(got) == want


def test_hmmscan_with_hmmpress_per_node_equals_one_hmmscan(ray_local, data, tmp_path):
    need_program("hmmscan")
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=hmmscan", f"farm.hmm={data['hmm']}",
               f"farm.queries={data['queries']}", "farm.unit_records=10", f"run_dir={rd}") == 0
    got = gathered(rd, "tblout")
    hmm = tmp_path / "profiles.hmm"
    hmm.write_bytes(open(data["hmm"], "rb").read())
    direct(["hmmpress", str(hmm)])
    want_path = tmp_path / "whole.tbl"
    direct(["hmmscan", "--cpu", "1", "--tblout", str(want_path), "-o", os.devnull, str(hmm),
            data["queries"]])
    def hits(b):
        return sorted(x for x in b.splitlines() if not x.startswith(b"#"))
    assert hits(got) == hits(want_path.read_bytes()) and len(hits(got)) == 45


def test_clustalo_alignments_equal_direct_runs(ray_local, tmp_path):
    need_program("clustalo")
    files = sorted(str(p) for p in need(BALIBASE).glob("BB*.tfa"))[:6]
    assert len(files) == 6
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=clustalo", f"farm.inputs={','.join(files)}",
               f"run_dir={rd}") == 0
    want = b"".join(direct(["clustalo", "-i", f, "--threads", "1"]) for f in files)
    assert want.count(b">") > 20
    assert gathered(rd) == want


def test_blastp_three_volumes_equal_one_search(ray_local, data, tmp_path):
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=blastp", f"farm.queries={data['queries']}",
               f"farm.db={data['db']}", "farm.volumes=3", "farm.unit_records=8",
               f"run_dir={rd}") == 0
    meta = json.load(open(os.path.join(rd, "meta.json")))
    assert meta["volumes"] == 3
    want = blast_oracle(data, data["queries"])
    got = gathered(rd)
    assert lines(got) == lines(want)


KILLED = textwrap.dedent("""
    from pairflow.engine import farm
    farm(program=["blastp", "-query", "{{input}}", "-db", "{{shared:db}}", "-outfmt", "6"],
         inputs=[{db!r}], shared={{"db": {db!r}}},
         prepare=[["makeblastdb", "-in", "{{shared:db}}", "-dbtype", "prot"]],
         unit_records=1, run_dir={run_dir!r}, num_cpus=2, object_store_mb=256,
         progress=False, flush_s=0.2)
""")


@pytest.mark.slow
def test_kill_mid_run_then_resume_loses_and_duplicates_nothing(ray_local, data, tmp_path):
    from pairflow.engine import farm
    rd = str(tmp_path / "run")
    script = tmp_path / "driver.py"
    script.write_text(KILLED.format(db=data["db"], run_dir=rd))
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            # a killed run cannot remove its node scratch: keep it in tmp_path
                            env=dict(os.environ, PAIRFLOW_SCRATCH=str(tmp_path)))
    journal = os.path.join(rd, "journal.jsonl")
    deadline = time.time() + 300  # Ray start-up alone can take a minute on a loaded machine
    try:
        while time.time() < deadline:
            if os.path.exists(journal) and sum(1 for _ in open(journal)) >= 10:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray it started
    finally:
        proc.wait()
    status = json.load(open(os.path.join(rd, "status.json")))
    assert status["state"] == "running"
    result = farm(program=["blastp", "-query", "{input}", "-db", "{shared:db}", "-outfmt", "6"],
                  inputs=[data["db"]], shared={"db": data["db"]},
                  prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
                  unit_records=1, run_dir=rd, resume=True, progress=False)
    s = result.summary
    assert s["resumed"]["reused"] >= 10
    assert s["units_run"] == s["units_total"] - s["resumed"]["reused"]
    assert s["units_done"] == s["units_total"] == data["n_db"]
    got = gathered(rd)
    want = blast_oracle(data, data["db"])
    assert lines(got) == lines(want) and got == want


def test_corrupted_block_is_detected_and_its_unit_rerun(ray_local, data, tmp_path):
    from pairflow.engine import PairflowError, farm, gather
    rd = str(tmp_path / "run")
    spec = dict(program=["blastp", "-query", "{input}", "-db", "{shared:db}", "-outfmt", "6"],
                inputs=[data["queries"]], shared={"db": data["db"]},
                prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
                unit_records=5, progress=False)
    farm(**spec, run_dir=rd)
    with open(os.path.join(rd, "journal.jsonl")) as fh:
        entries = [json.loads(x) for x in fh]
    victim = next(e for e in entries if e["length"] > 100)
    path = os.path.join(rd, "result", "stdout", victim["location"])
    with open(path, "r+b") as fh:
        fh.seek(victim["offset"] + 50)
        byte = fh.read(1)
        fh.seek(victim["offset"] + 50)
        fh.write(bytes([byte[0] ^ 0x20]))
    with pytest.raises(PairflowError, match=f"unit {victim['tile']}'s block .* CRC32"):
        gather(rd, "stdout", str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()
    before = {f: open(os.path.join(rd, f)).read() for f in ("status.json", "config.yaml")}
    with pytest.raises(PairflowError, match="unit_records: 5 -> 6"):
        farm(**{**spec, "unit_records": 6}, run_dir=rd, resume=True)
    # the refused resume left the run as it was: still finished, its config its own
    assert {f: open(os.path.join(rd, f)).read() for f in before} == before
    result = farm(**spec, run_dir=rd, resume=True)
    assert result.summary["resumed"]["corrupt_units"] == [victim["tile"]]
    assert result.summary["units_run"] == 1
    assert gathered(rd) == blast_oracle(data, data["queries"])


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(ray_local, data, tmp_path):
    """SIGKILL one worker's process while it runs the tool: its units go to the other worker
    and the gathered output is still exactly one blastp over the whole input."""
    need_program("blastp")
    import threading
    from pairflow.engine import farm
    rd = tmp_path / "run"
    # a slower tool (0.3 s a unit) so the run is surely still going when the worker dies
    program = ["bash", "-c", 'sleep 0.3 && exec blastp -query "$0" -db "$1" -outfmt 6',
               "{input}", "{shared:db}"]
    out = {}
    runner = threading.Thread(target=lambda: out.update(result=farm(
        program=program, inputs=[data["queries"]], shared={"db": data["db"]},
        prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
        unit_records=1, workers_per_node=2, run_dir=str(rd), progress=False,
        executor="ray")))
    runner.start()
    victim, deadline = None, time.time() + 120
    while victim is None and time.time() < deadline:
        time.sleep(0.1)
        try:
            ran = [json.loads(x) for x in (rd / "farm.jsonl").read_text().splitlines()]
            workers = json.loads((rd / "meta.json").read_text())["workers"]
        except (OSError, ValueError, KeyError):
            continue
        if len(ran) >= 3:
            victim = workers[0]
    assert victim is not None, "the run never got going"
    os.kill(victim["pid"], signal.SIGKILL)
    runner.join(timeout=300)
    result = out["result"]
    s = result.summary
    assert s["units_done"] == s["units_total"] == 45 and not result.failures
    assert s["units_done"] - len(ran) > 5  # most of the run came after the kill
    lost = [json.loads(x) for x in (rd / "farm.jsonl").read_text().splitlines()
            if "worker lost" in x]
    assert lost and all(e["worker"] == victim["worker"] for e in lost)
    assert gathered(result.run_dir) == blast_oracle(data, data["queries"])


def test_an_idle_worker_takes_back_queued_units_from_a_busy_one(ray_local, tmp_path):
    """The first unit handed out (unit 2: units 0 and 1 are the first step, one a worker,
    timed before the rest is cut) takes 1.5 s, the others milliseconds: the worker stuck on it
    still has units queued when the other runs out, and the idle one takes them back. The
    output is still every record once, in input order (oracle: the input file itself, through
    cat)."""
    need_program("bash")
    from pairflow.engine import farm
    records = [f">r{i}\n{'SLOW' if i == 2 else 'MKV'}\n" for i in range(16)]
    queries = tmp_path / "q.fa"
    queries.write_text("".join(records))
    program = ["bash", "-c", 'if grep -q SLOW "$0"; then sleep 1.5; fi; cat "$0"', "{input}"]
    result = farm(program=program, inputs=[str(queries)], unit_records=1, workers_per_node=2,
                  run_dir=str(tmp_path / "run"), progress=False)
    s = result.summary
    assert s["units_done"] == 16 and not result.failures
    assert s["stolen"] >= 1
    ran = [json.loads(x) for x in (tmp_path / "run" / "farm.jsonl").read_text().splitlines()]
    slow_worker = next(e["worker"] for e in ran if e["unit"] == 2)
    # units 3 and 4 were queued behind the slow one; at least one ran elsewhere
    assert any(e["worker"] != slow_worker for e in ran if e["unit"] in (3, 4))
    assert gathered(result.run_dir) == queries.read_bytes()


def test_crashing_unit_is_reported_with_stderr_and_the_rest_completes(ray_local, data, tmp_path,
                                                                      monkeypatch):
    need_program("hmmsearch")
    from pairflow.engine import farm
    SeqIO = need_module("Bio.SeqIO")
    recs = list(SeqIO.parse(data["db"], "fasta"))
    targets = tmp_path / "targets.fa"
    good = tmp_path / "good.fa"
    SeqIO.write(recs, str(good), "fasta")
    text = good.read_text()
    cut = text.index(">", len(text) // 2)  # a record the tool cannot parse, mid-file
    targets.write_text(text[:cut] + ">broken not a protein\n12345!!**\n" + text[cut:])
    n = len(recs) + 1
    result = farm(program=["hmmsearch", "--cpu", "1", "--tblout", "{out:tblout}", "-o",
                           os.devnull, "-Z", "{input_records}", "{shared:hmm}", "{input}"],
                  inputs=[str(targets)], shared={"hmm": data["hmm"]}, streams=["tblout"],
                  unit_records=10, retries=1, run_dir=str(tmp_path / "run"), progress=False)
    assert len(result.failures) == 1
    f = result.failures[0]
    assert "broken" in f["names"] and f["attempts"] == 2
    assert f["returncode"] not in (0, None) and "illegal character" in f["stderr"]
    s = result.summary
    assert s["units_done"] == s["units_total"] - 1 and s["retries"] == 1
    from pairflow.engine import gather
    report = gather(result.run_dir, "tblout", str(tmp_path / "got.tbl"))
    assert report["missing"] == [f["unit"]]
    # oracle: the whole good file in one search, the whole input's size as -Z, minus the hits
    # of the failed unit's records
    want_path = tmp_path / "want.tbl"
    direct(["hmmsearch", "--cpu", "1", "--tblout", str(want_path), "-o", os.devnull,
            "-Z", str(n), data["hmm"], str(good)])
    lost = set(f["names"])
    want = sorted(x for x in want_path.read_bytes().splitlines()
                  if not x.startswith(b"#") and x.split()[0].decode() not in lost)
    got = sorted(x for x in (tmp_path / "got.tbl").read_bytes().splitlines()
                 if not x.startswith(b"#"))
    assert got == want and len(want) > 20
    from pairflow.apps.farm import report as text_report
    assert "FAILED unit" in text_report(result) and "illegal character" in text_report(result)
    # the dashboard's farm view of this run: units per worker, both failed runs, the failure
    from pairflow.dashboard.rundir import RunView
    view = RunView(result.run_dir).refresh()
    frames = view.farm.frames()
    assert frames["workers"]["units"].sum() == s["units_done"]
    assert len(frames["failed_runs"]) == 2 and frames["retries"] == 1
    assert all("illegal character" in e for e in frames["failed_runs"]["stderr"])
    assert [g["unit"] for g in frames["given_up"]] == [f["unit"]]
    assert view.progress()["units"] == {"done": s["units_done"], "total": s["units_total"],
                                        "fraction": s["units_done"] / s["units_total"]}
    AppTest = need_module("streamlit.testing.v1").AppTest
    monkeypatch.setattr(sys, "argv", [os.path.join(REPO, "dashboard", "app.py"), result.run_dir])
    at = AppTest.from_file(os.path.join(REPO, "dashboard", "app.py"), default_timeout=60)
    at.query_params["view"] = "farm"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]
    assert any("broken" in e.value and "2 attempts" in e.value for e in at.error)
    assert any("units done: " in m.value for m in at.markdown)


MULTINODE = textwrap.dedent("""
    import json, os, sys
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import ray
    from ray.cluster_utils import Cluster
    from pairflow.engine import farm, gather
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=1, object_store_memory=200 * 2**20, node_ip_address="127.0.0.1",
        include_dashboard=False))
    cluster.add_node(num_cpus=1, object_store_memory=200 * 2**20, node_ip_address="127.0.0.1")
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    r = farm(program=["blastp", "-query", "{{input}}", "-db", "{{shared:db}}", "-outfmt", "6"],
             inputs=[{queries!r}], shared={{"db": {db!r}}},
             prepare=[["makeblastdb", "-in", "{{shared:db}}", "-dbtype", "prot"]],
             unit_records=3, run_dir={run_dir!r}, progress=False, keep_scratch=True,
             scratch={scratch!r})
    gather(r.run_dir, "stdout", {out!r})
    print(json.dumps({{"node_bytes": r.summary["node_bytes"], "nodes": r.summary["nodes"],
                      "per_worker": r.summary["per_worker"]}}))
    ray.shutdown()
    cluster.shutdown()
""")


@pytest.mark.multinode
@pytest.mark.slow
def test_two_nodes_fetch_the_database_once_each_and_write_a_file_each(data, tmp_path):
    rd, out, scratch = str(tmp_path / "run"), str(tmp_path / "hits.tsv"), tmp_path / "scratch"
    script = MULTINODE.format(queries=data["queries"], db=data["db"], run_dir=rd,
                              out=out, scratch=str(scratch))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["nodes"] == 2
    size = os.path.getsize(data["db"])
    assert sorted(got["node_bytes"].values()) == [size, size]  # once per node, not per worker
    assert all(w["units"] > 0 for w in got["per_worker"].values())
    assert sorted(os.listdir(os.path.join(rd, "result", "stdout"))) == ["a0-n0", "a0-n1"]
    assert len(os.listdir(scratch)) == 2  # each node prepared its own copy
    assert open(out, "rb").read() == blast_oracle(data, data["queries"])


def test_gzip_queries_equal_blastp_on_the_plain_file(ray_local, data, tmp_path):
    import gzip
    from pairflow.engine import farm
    gz = tmp_path / "globins45.fa.gz"
    gz.write_bytes(gzip.compress(open(data["queries"], "rb").read()))
    rd = str(tmp_path / "run")
    spec = dict(program=["blastp", "-query", "{input}", "-db", "{shared:db}", "-outfmt", "6"],
                inputs=[str(gz)], shared={"db": data["db"]},
                prepare=[["makeblastdb", "-in", "{shared:db}", "-dbtype", "prot"]],
                unit_records=8, progress=False)
    farm(**spec, run_dir=rd)
    want = blast_oracle(data, data["queries"])
    assert gathered(rd) == want
    result = farm(**spec, run_dir=rd, resume=True)  # the copy in the run directory is reused
    assert result.summary["units_run"] == 0 and gathered(rd) == want


def test_blastn_preset_equals_one_blastn(ray_local, tmp_path):
    """The nucleotide preset (makeblastdb -dbtype nucl per node) on Kaptive's wzi/wzc alleles:
    40 of them as queries against all 604 (queries written by Biopython)."""
    SeqIO = need_module("Bio.SeqIO")
    need_program("blastn")
    db = str(need(SHARE / "kaptive" / "reference_database" / "wzi_wzc_db.fasta"))
    queries = str(tmp_path / "q.fa")
    SeqIO.write(list(SeqIO.parse(db, "fasta"))[::15][:40], queries, "fasta")
    rd = str(tmp_path / "run")
    assert cli("app=farm", "farm=blastn", f"farm.queries={queries}", f"farm.db={db}",
               "farm.unit_records=6", f"run_dir={rd}") == 0
    oracle_db = str(tmp_path / "oracle")
    direct(["makeblastdb", "-in", db, "-dbtype", "nucl", "-out", oracle_db])
    want = direct(["blastn", "-query", queries, "-db", oracle_db, "-outfmt", "6"])
    assert len(want.splitlines()) > 40
    assert gathered(rd) == want
