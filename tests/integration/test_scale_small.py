"""The scale benchmark's small version (issue 58, part 4): ``benchmarks/scale.py --quick`` runs
1,000 simulated reads (k = 7, top 10) and 1,000 synthetic items through the ``pairflow`` command,
and every read's top 10 equals the one of plain Python sets over the whole matrix
(tests/oracles.py), independently of the benchmark's own numpy oracle. The simulator is checked
too: seeded, and an error-free read is a window of a ragout genome or of its reverse complement."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.conftest import need
from tests.oracles import RAGOUT, canonical_kmers, jaccard, read_sequences

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_RC = str.maketrans("ACGT", "TGCA")


def _fastq(path):
    with open(path) as fh:
        lines = fh.read().split("\n")
    return [(lines[i][1:], lines[i + 1]) for i in range(0, len(lines) - 3, 4)]


def test_simulated_reads_are_seeded_windows_of_the_genomes(tmp_path):
    from pairflow.apps.reads_sim import simulate_reads
    need(RAGOUT)
    a = simulate_reads(300, str(tmp_path / "a.fq"), seed=5)
    b = simulate_reads(300, str(tmp_path / "b.fq"), seed=5)
    c = simulate_reads(300, str(tmp_path / "c.fq"), seed=6)
    assert open(a).read() == open(b).read() != open(c).read()
    clean = _fastq(simulate_reads(20, str(tmp_path / "clean.fa.fq"), seed=2, error=0.0))
    genomes = [s.upper() for p in sorted(glob.glob(os.path.join(RAGOUT, "*/references/*.gz")))
               for _, s in read_sequences(p)]
    assert len(clean) == 20
    for _, read in clean:
        assert len(read) == 150
        assert any(read in g or read.translate(_RC)[::-1] in g for g in genomes), read


def test_scale_quick_is_exact_against_python_sets(tmp_path):
    work, out = tmp_path / "work", tmp_path / "scale.json"
    env = {**os.environ, "PAIRFLOW_BENCH_OUT": str(tmp_path),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "scale.py"), "--quick",
                    "--work", str(work), "--keep", "--out", str(out), "--bare-rows", "1000"],
                   cwd=ROOT, env=env, check=True, timeout=900)
    d = json.loads(out.read_text())
    reads, synth = d["reads"][0], d["synthetic"][0]
    for c in (reads, synth):
        assert c["n"] == 1000 and c["exact"]["mismatches"] == 0, c["exact"]
        assert c["exact"]["queries"] == c["items"]
        assert c["tiles"] >= 1 and c["files_in_result"] >= 1 and c["peak_rss"] > 0
        assert c["pairs"] == c["items"] * (c["items"] - 1) // 2
    # every read's top 10, by plain Python sets over the whole matrix
    reads_fq = _fastq(str(work / "reads-1000-seed1.fq"))
    sets = [canonical_kmers([s], 7) for _, s in reads_fq]
    names = [name for name, _ in reads_fq]
    top = pq.read_table(str(work / "run-reads-1000" / "result" / "topk.parquet")).to_pandas()
    top["q"] = top["query"].str.split("/").str[1].map({n: i for i, n in enumerate(names)})
    top["t"] = top["target"].str.split("/").str[1].map({n: i for i, n in enumerate(names)})
    kept = [i for i, s in enumerate(sets) if s]
    assert sorted(set(top["q"])) == kept
    for q, mine in top.sort_values(["q", "rank"]).groupby("q"):
        want = sorted((-jaccard(sets[q], sets[t]), t) for t in kept if t != q)[:10]
        assert mine["t"].tolist() == [t for _, t in want], q
        assert mine["score"].tolist() == pytest.approx([-v for v, _ in want], abs=1e-12)
    # the synthetic app's value, (i * 7919 + j) % 1000 for i < j
    syn = pq.read_table(str(work / "run-synthetic-1000" / "result" / "topk.parquet")).to_pandas()
    for q in (0, 1, 500, 999):
        vals = sorted((-((min(q, t) * 7919 + max(q, t)) % 1000), t) for t in range(1000)
                      if t != q)[:10]
        mine = syn[syn.qi == q].sort_values("rank")
        assert mine.ti.tolist() == [t for _, t in vals]
