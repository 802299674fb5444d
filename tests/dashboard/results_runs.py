"""Real runs whose results the results view shows, made once per session with the ``pairflow``
command as a user runs it (small inputs, in-process: no Ray).

    python tests/dashboard/results_runs.py OUT_DIR     # writes OUT_DIR/{topk,phylogeny,...}

``topk``: exact Jaccard of the 162 Klebsiella capsule loci, top 3 per locus; ``phylogeny``: the
16 proteomes' composition-vector tree; ``forensics``: 24 camera shots; ``align``: the 45 globins
all-vs-all, top 5; ``hep``: the ttH selection over 2,421 events (64 draws a reconstruction, to
keep it short); ``microscopy``: 40 particles fused; ``farm``: blastp of the 45 globins. The dense Jaccard run is ``engine_runs["allpairs"]`` (tests/dashboard/conftest.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from pairflow.apps.data import data_path

REPO = Path(__file__).resolve().parents[2]
KLEBSIELLA = data_path("usr/share/kaptive/reference_database/Klebsiella_k_locus_primary_reference.gbk")

RUNS = {
    "topk": ["app=jaccard", f"data.inputs={KLEBSIELLA}", "data.item=record", "sink=topk", "sink.k=3"],
    "phylogeny": ["app=phylogeny"],
    "forensics": ["app=forensics"],
    "align": ["app=align"],
    "hep": ["app=hep", "hep.reco_draws=64"],
    # (tests/dashboard/test_results_app.py, without a browser)
    "microscopy": ["app=microscopy"],
    "farm": ["app=farm"],
}
BROWSER = ("topk", "phylogeny", "forensics", "align", "hep")


def pairflow() -> list[str]:
    exe = Path(sys.executable).with_name("pairflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from pairflow.apps.cli import console; console()"]


def make(out: Path, names=None) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    made = {}
    for name in names or RUNS:
        run_dir = out / name
        t0 = time.time()
        proc = subprocess.run([*pairflow(), *RUNS[name], f"run_dir={run_dir}", "progress=false"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"pairflow {' '.join(RUNS[name])} failed ({proc.returncode}):\n"
                               f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
        made[name] = run_dir
    return made


if __name__ == "__main__":
    make(Path(sys.argv[1]), sys.argv[2:] or None)
