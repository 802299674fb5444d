"""The README's tour, run as written: every fenced block of its "A five-minute tour" section is
read from README.md itself (so the docs and this test cannot drift apart), run on a fresh
directory, and its output checked against an independent oracle or what the command promises.

The tour's ``pairflow`` is the installed command, run here as ``python -m pairflow.apps.cli``
with this interpreter; its data are the example data (``pairflow data install``, found through
``PAIRFLOW_DATA`` or the user data directory, as the tour's reader's are).
Placeholders of the tour are made real here, and only these: the genomes of
``my/genomes/*.fa.gz`` and ``a.fa,b.fa`` are small random genomes written by the test; the
killed run ``runs/mine`` is a run interrupted with Ctrl-C; ``HEAD:6379`` is a Ray cluster this
test starts on 127.0.0.1 (and stops); the dashboard is started on a free port on the tour's
first run and stopped once it answers. A tour command without a check here fails the test.
"""
import gzip
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from tests.conftest import need
from tests.oracles import (KLEBSIELLA, canonical_kmer_codes, canonical_kmers, jaccard_matrix,
                           read_sequences)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
TOUR = "## A five-minute tour"
PAIRFLOW = ("pairflow", ".venv/bin/pairflow")  # as installed, or a checkout's


def tour_blocks() -> list[tuple[str, str]]:
    """(language, body) of every fenced block of the tour section, in order."""
    with open(README) as fh:
        text = fh.read()
    assert TOUR in text, f"README.md has no section {TOUR!r}"
    section = text.split(TOUR, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w*)\n(.*?)^```", section, re.M | re.S)


def shell_commands(body: str) -> list[list[str]]:
    """A bash block's commands as the shell splits them (continuations joined, comments and
    quotes handled by shlex as a POSIX shell does)."""
    return [shlex.split(line, comments=True) for line in body.replace("\\\n", " ").splitlines()
            if shlex.split(line, comments=True)]


def _env() -> dict:
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")  # the installed pairflow
    for key in ("PAIRFLOW_DEBUG", "RAY_ADDRESS"):
        env.pop(key, None)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _random_genomes(where, names, length=3000, seed=0, gz=True) -> list[str]:
    """Genomes sharing one half (so their Jaccard is neither 0 nor 1), each with its own rest."""
    rng = np.random.default_rng(seed)
    shared = "".join(rng.choice(list("ACGT"), length // 2))
    paths = []
    for n, name in enumerate(names):
        own = "".join(rng.choice(list("ACGT"), length // 2 + 700 * n))
        text = f">{os.path.basename(name).split('.')[0]} random\n{shared}{own}\n"
        path = os.path.join(where, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if gz:
            with gzip.open(path, "wt") as fh:
                fh.write(text)
        else:
            with open(path, "w") as fh:
                fh.write(text)
        paths.append(path)
    return paths


def _outputs(stdout: str) -> dict:
    """``name: path`` lines of a report (the sinks' outputs)."""
    return dict(re.findall(r"^(\w+): (/\S+)$", stdout, re.M))


def _run_dir_of(output: str) -> str:
    return output.split("/result/", 1)[0]


def _dense(path: str, field: str):
    import zarr
    group = zarr.open_group(path, mode="r")
    return group[field][...], list(group.attrs["row_keys"])


def _check_jaccard(path: str, files: list[str], k: int) -> None:
    """The dense similarity matrix against the brute-force oracle, upper triangle."""
    sim, keys = _dense(path, "similarity")
    by_key = {os.path.basename(f).split(".")[0]: f for f in files}
    sets = [canonical_kmers([s for _, s in read_sequences(by_key[key])], k) for key in keys]
    expected, _ = jaccard_matrix(sets)
    i, j = np.triu_indices(len(keys), 1)
    assert np.allclose(sim[i, j], expected[i, j], rtol=0, atol=1e-12), (sim, expected)


class Tour:
    """Runs the tour's commands in one fresh directory and checks each one's output."""

    def __init__(self, root):
        self.root = str(root)
        self.env = _env()
        self.genomes = _random_genomes(self.root, ["my/genomes/g1.fa.gz", "my/genomes/g2.fa.gz",
                                                   "my/genomes/g3.fa.gz"])
        self.pair = _random_genomes(self.root, ["a.fa", "b.fa"], seed=1, gz=False)
        self.finished: list[str] = []  # run directories of finished runs, for the dashboard
        self.matrices: dict[str, np.ndarray] = {}
        self.cluster = None

    # -- running ---------------------------------------------------------------------------
    def pairflow(self, args: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
        out = subprocess.run([sys.executable, "-m", "pairflow.apps.cli", *args], cwd=self.root,
                             env=self.env, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
        assert "Traceback" not in out.stderr and "Token authentication" not in out.stderr, \
            (args, out.stderr[-3000:])
        return out

    def python(self, code: str, check: str) -> str:
        out = subprocess.run([sys.executable, "-c", code + "\n" + check], cwd=self.root,
                             env=self.env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, (code, out.stdout[-2000:], out.stderr[-3000:])
        return out.stdout

    # -- preparing what the tour assumes exists --------------------------------------------
    def killed_run(self, run_dir: str) -> int:
        """A run stopped with Ctrl-C after a few tiles; returns how many tiles it journaled.
        Its 780 compares burn 0.01 CPU seconds each: most of its tiles are still to do when
        the Ctrl-C lands after the first three, and the resume has them to compute."""
        path = os.path.join(self.root, run_dir)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pairflow.apps.cli", "app=synthetic", "synthetic.n=40",
             "synthetic.t_cmp=0.01", f"run_dir={run_dir}", "progress=false"],
            cwd=self.root, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        journal = os.path.join(path, "journal.jsonl")

        def tiles() -> set:
            try:
                with open(journal) as fh:
                    return {json.loads(line)["tile"] for line in fh if line.endswith("\n")}
            except OSError:
                return set()
        try:
            deadline = time.time() + 600
            while len(tiles()) < 3 and proc.poll() is None and time.time() < deadline:
                time.sleep(0.2)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 130
        return len(tiles())

    def launch_cluster(self) -> None:
        """A one-node Ray cluster of 1 CPU on 127.0.0.1, in a process of its own, started in
        the background (the tour's commands before its cluster command run meanwhile); without
        Ray's dashboard (its head and module processes), which nothing here reads."""
        if self.cluster is not None:
            return
        code = ("import sys\nfrom ray.cluster_utils import Cluster\n"
                "c = Cluster(initialize_head=True, head_node_args=dict(num_cpus=1, "
                "object_store_memory=300 * 2**20, node_ip_address='127.0.0.1', "
                "include_dashboard=False))\n"
                "print(c.address, flush=True)\nsys.stdin.read()\nc.shutdown()\n")
        self.cluster = subprocess.Popen([sys.executable, "-c", code], cwd=self.root,
                                        env=self.env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)

    def start_cluster(self) -> str:
        """The cluster's address, once it is up (launched now if it was not yet)."""
        self.launch_cluster()
        address = self.cluster.stdout.readline().strip()
        assert re.match(r"^127\.0\.0\.1:\d+$", address), address
        return address

    def stop_cluster(self) -> None:
        if self.cluster is None:
            return
        try:
            self.cluster.stdin.close()
            self.cluster.wait(timeout=120)
        except Exception:
            os.killpg(self.cluster.pid, signal.SIGKILL)
        self.cluster = None

    # -- the tour's commands ---------------------------------------------------------------
    def command(self, argv: list[str]) -> None:
        assert argv[0] in PAIRFLOW, f"a tour command that is not pairflow: {argv}"
        args = argv[1:]
        line = " ".join(args)
        if args and args[0] == "dashboard":
            return self.dashboard(args)
        if any(a.startswith("data.inputs=my/genomes/") for a in args):
            out = self.pairflow(args).stdout
            assert "app=jaccard n=3 k=21" in out, out
            _check_jaccard(_outputs(out)["dense"], self.genomes, 21)
            self.finished.append(_run_dir_of(_outputs(out)["dense"]))
        elif "data.item=record" in args and any("Klebsiella" in a for a in args):
            self.klebsiella(args)
        elif line in ("cluster=local", "cluster=inprocess"):
            out = self.pairflow(args).stdout
            assert "app=jaccard n=16 k=21" in out, out
            run_dir = _run_dir_of(_outputs(out)["dense"])
            summary = json.load(open(os.path.join(run_dir, "summary.json")))
            assert summary["executor"] == {"cluster=local": "ray",
                                           "cluster=inprocess": "inprocess"}[line]
            # the same 16 genomes on Ray or in this process: the same matrix
            self.matrices[line] = _dense(_outputs(out)["dense"], "similarity")[0]
            assert np.array_equal(self.matrices[line], next(iter(self.matrices.values())))
        elif line == "scheduler=zorder" or line == "cache.host_cache_items=4":
            out = self.pairflow(args).stdout
            assert "app=jaccard n=16 k=21" in out and re.search(r"^R = \d", out, re.M), out
            run_dir = _run_dir_of(_outputs(out)["dense"])
            meta = json.load(open(os.path.join(run_dir, "meta.json")))
            summary = json.load(open(os.path.join(run_dir, "summary.json")))
            if line == "scheduler=zorder":
                assert meta["plan"] == "zorder" and meta["eviction"] == "lru"
            else:
                assert summary["host_cache_items"] == 4 and "host tier holds 4 items" in out
                assert summary["R"] >= 1.0
            # the same 16 genomes whatever the plan or cache: the same matrix
            self.matrices[line] = _dense(_outputs(out)["dense"], "similarity")[0]
            first = next(iter(self.matrices.values()))
            assert np.array_equal(self.matrices[line], first)
        elif "resume=true" in args and any(a.startswith("run_dir=") for a in args):
            run_dir = next(a for a in args if a.startswith("run_dir=")).split("=", 1)[1]
            journaled = self.killed_run(run_dir)
            out = self.pairflow(args).stdout
            tiles = len(json.load(open(os.path.join(self.root, run_dir, "tiles.json"))))
            assert (f"resumed: reused {journaled} tiles, recomputed {tiles - journaled}, "
                    "repaired 0") in out.splitlines(), out
            value, _ = _dense(_outputs(out)["dense"], "value")
            i, j = np.triu_indices(40, 1)
            assert np.array_equal(value[i, j], ((i * 7919 + j) % 1000).astype(float))
        elif "cluster=ray" in args:
            address = self.start_cluster()
            try:
                joined = [a.replace("HEAD:6379", address) for a in args]
                assert joined != args, "the tour's cluster command names no HEAD:6379"
                out = self.pairflow(joined).stdout
            finally:
                self.stop_cluster()
            assert "app=jaccard n=16 k=21" in out, out
            meta = json.load(open(os.path.join(_run_dir_of(_outputs(out)["dense"]),
                                               "meta.json")))
            # the cluster's one CPU, not this machine's own Ray: one device actor
            assert len(meta["actors"]) == 1, meta["actors"]
        elif args and args[0] == "-m":
            out = self.pairflow(args).stdout
            ks = [int(v) for v in next(a for a in args if a.startswith("data.k=")).split("=")[1]
                  .split(",")]
            found = [int(k) for k in re.findall(r"^app=jaccard n=16 k=(\d+)", out, re.M)]
            assert sorted(found) == sorted(ks), out
        elif any(a == "data.inputs=a.fa,b.fa" for a in args):
            out = self.pairflow(args).stdout
            assert "app=jaccard n=2 k=21" in out, out
            _check_jaccard(_outputs(out)["dense"], self.pair, 21)
        elif "app=hep" in args:
            out = self.pairflow(args).stdout
            assert re.search(r"^app=hep events=2421 selected=\d+", out, re.M), out
            # the written order, the chosen one and the cost per event of each
            assert re.search(r"^(written order|order \(\w+, the written one\)): ", out,
                             re.M), out
        elif "app=align" in args:
            out = self.pairflow(args).stdout
            assert "app=align all-vs-all: 45 queries x 45 targets" in out, out
            assert re.search(r"top_k=5", out) and re.search(r"^hits: \d+", out, re.M), out
        else:
            pytest.fail(f"the README tour's command `pairflow {line}` has no check in "
                        f"{os.path.relpath(__file__, REPO)}")

    def klebsiella(self, args: list[str]) -> None:
        """One item per GenBank record, the top 3 per locus: the first locus's three against
        its brute-force Jaccard with every other locus."""
        import pandas as pd
        need(KLEBSIELLA)
        out = self.pairflow(args).stdout
        records = read_sequences(KLEBSIELLA)
        assert f"n={len(records)} " in out, out
        top = pd.read_parquet(_outputs(out)["topk"])
        assert len(top) == 3 * len(records) and top["query"].nunique() == len(records)
        names = [n for n, _ in records]
        # the k-mer sets as sorted 2-bit codes (checked equal to the string sets in
        # tests/unit/test_oracles.py): the same Jaccard, |A & B| / (|A| + |B| - |A & B|)
        codes = [canonical_kmer_codes([s], 21) for _, s in records]
        first = names[0]
        shared = [len(np.intersect1d(codes[0], c, assume_unique=True)) for c in codes[1:]]
        scores = sorted((x / (len(codes[0]) + len(c) - x) for x, c in zip(shared, codes[1:])),
                        reverse=True)
        query = top["query"].astype(str).str.rsplit("/", n=1).str[-1]  # key: file/record
        got = sorted(top[query == first]["score"], reverse=True)
        assert np.allclose(got, scores[:3], rtol=0, atol=1e-12), (got, scores[:3])

    def dashboard(self, args: list[str]) -> None:
        """Started on the tour's first finished run and a free port; stopped once it answers."""
        assert len(args) == 2 and self.finished, args
        port = _free_port()
        proc = subprocess.Popen([sys.executable, "-m", "pairflow.apps.cli", "dashboard", self.finished[0],
                                 "--port", str(port)], cwd=self.root, env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            deadline, status = time.time() + 120, None
            while time.time() < deadline and proc.poll() is None and status != 200:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                                timeout=5) as resp:
                        status = resp.status
                except OSError:
                    time.sleep(0.5)
            assert status == 200, proc.poll()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


PYTHON_CHECKS = {
    # the session block: two runs on one Ray, each checked against the dot products
    "pairflow.session(": """
V = np.array([vecs[k] for k in vecs])
want = V @ V.T
i, j = np.triu_indices(len(V), 1)
assert np.allclose(first.matrix()[i, j], want[i, j], rtol=1e-12), "first run"
top = again.topk
best = np.argsort(-(want - np.diag(np.full(len(V), np.inf))), axis=1)[:, :3]
names = list(vecs)
got = top.sort_values(["query", "rank"]).groupby("query")["target"].apply(list).to_dict()
assert all(got[names[q]] == [names[t] for t in best[q]] for q in range(len(V))), "top 3"
print("checked")
""",
    # the REPL block: every pair's dot product, and the top 5 per item
    "run = allpairs(": """
V = np.array([vecs[k] for k in vecs])
want = V @ V.T
got = res.matrix()
i, j = np.triu_indices(len(V), 1)
assert np.allclose(got[i, j], want[i, j], rtol=1e-12), "matrix"
top = res.topk
assert len(top) == 5 * len(V) and {"query", "target", "score", "rank"} <= set(top.columns)
assert res.R >= 1.0 and res.run_dir
print("checked")
""",
    # the pipeline block: the survivors counted by hand, every operator in the cutflow
    "Pipeline(": """
want = int(((d["x"] ** 2 > 1.0) & (d["y"] % 2 == 0)).sum())
assert res.n_selected == want, (res.n_selected, want)
assert {"x2", "far", "even"} <= set(res.cutflow["op"])
print("checked")
""",
}


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.multinode
def test_the_readme_tour_runs_as_written(tmp_path):
    blocks = tour_blocks()
    assert blocks, "the README's tour has no fenced blocks"
    tour = Tour(tmp_path)
    ran = 0
    try:
        if any("cluster=ray" in argv for lang, body in blocks if lang == "bash"
               for argv in shell_commands(body)):
            tour.launch_cluster()  # it starts while the commands before its own run
        for lang, body in blocks:
            if lang == "python":
                checks = [c for marker, c in PYTHON_CHECKS.items() if marker in body]
                assert len(checks) == 1, f"a tour Python block without one check:\n{body}"
                assert tour.python(body, checks[0]).strip().endswith("checked")
                ran += 1
            elif lang == "bash":
                for argv in shell_commands(body):
                    tour.command(argv)
                    ran += 1
            else:
                pytest.fail(f"a tour block of language {lang!r}: run it in this test")
    finally:
        tour.stop_cluster()
    assert ran >= 10
