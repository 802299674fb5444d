"""The dense sink's layout on small leaves (issue 58, part 1): files per field of a finished
``matrix.zarr``, and the actors' write seconds against their compare seconds.

The exact Jaccard of 241 capsule/O-antigen loci (the Klebsiella K primary, K variant and O
primary records, each name once, then the Acinetobacter K loci up to 241, in one FASTA) with
``data.item=record cache.host_cache_items=24 scheduler.leaf_items=6``: the stripe rule's leaf
under that host tier, 860 tiles. The leaf is pinned because the planner now groups 2 x 2 of those
leaves into a tile of 12 (230 tiles, ``benchmarks/tile_costs.py``): this benchmark keeps measuring
the small-tile case the issue named, the hardest for files and write share. Runs the ``pairflow`` command once, as a user does, and reads the run directory back:

    .venv/bin/python benchmarks/dense_layout.py [--work DIR] [--out JSON]

writes benchmarks/out/dense_layout.json (report.py's section): files per field, chunks, dask
tasks per field, the actors' stage_seconds write and compare and the write share, finalize
seconds; targets (issue 58): at most 64 files per field, a write share below 10 %, a dask task
per chunk. ``--quick`` runs the same (one run of ~20 s).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)  # tests.oracles (the Kaptive loci), not pairflow

FILES = ["Klebsiella_k_locus_primary_reference.gbk", "Klebsiella_k_locus_variant_reference.gbk",
         "Klebsiella_o_locus_primary_reference.gbk",
         "Acinetobacter_baumannii_k_locus_primary_reference.gbk"]
N = 241


def loci_fasta(path: str) -> str:
    from tests.oracles import KAPTIVE, read_sequences
    recs, seen = [], set()
    for name in FILES:  # the K variant file repeats some primary loci's names: the first kept
        for rec in read_sequences(os.path.join(KAPTIVE, name), "genbank"):
            if rec[0] not in seen:
                seen.add(rec[0])
                recs.append(rec)
    with open(path, "w") as fh:
        fh.writelines(f">{name}\n{seq}\n" for name, seq in recs[:N])
    return path


def files_per_field(zarr_dir: str) -> dict:
    out = {}
    for field in sorted(os.listdir(zarr_dir)):
        where = os.path.join(zarr_dir, field)
        if os.path.isdir(where):
            out[field] = sum(len(files) for _, _, files in os.walk(where))
    return out


def main() -> None:
    from _record import out_path, target, write
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=None, help="where the input and the run go (a temp dir)")
    ap.add_argument("--out", default=None, help="the JSON (default benchmarks/out/...)")
    ap.add_argument("--quick", action="store_true", help="the same single run")
    args = ap.parse_args()
    where = args.work or tempfile.mkdtemp(prefix="pairflow-dense-layout-")
    fasta = loci_fasta(os.path.join(where, f"first{N}.fa"))
    run_dir = os.path.join(where, "run")
    cmd = [sys.executable, "-m", "pairflow.apps.cli", "app=jaccard", f"data.inputs={fasta}",
           "data.item=record", "cache.host_cache_items=24", "scheduler.leaf_items=6",
           f"hydra.run.dir={run_dir}",
           "progress=false"]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    stages = summary["stage_seconds"]
    dense = summary["outputs"]["dense"]
    import zarr
    from pairflow.engine.pairs.result import AllPairsResult
    res = AllPairsResult(run_dir, summary, summary["outputs"])
    group = zarr.open_group(dense, mode="r")
    fields = sorted(name for name, _ in group.arrays())
    arrays = {f: res.dask(f) for f in fields}
    tasks = {f: len(dict(a.__dask_graph__())) for f, a in arrays.items()}
    chunks = {f: int(a.npartitions) for f, a in arrays.items()}
    files = files_per_field(dense)
    share = stages["write"] / (stages["write"] + stages["compare"])
    out = {"command": " ".join(["pairflow"] + cmd[3:-2]).replace(fasta, f"first{N}.fa"),
           "n": N, "leaf": summary.get("leaf_items"), "tiles": summary["tiles_total"],
           "executor": summary.get("executor"), "files_per_field": files,
           "chunks_per_field": chunks, "dask_tasks_per_field": tasks,
           "chunk_shape": list(group[fields[0]].chunks),
           "write_s": stages["write"], "compare_s": stages["compare"], "write_share": share,
           "finalize_s": summary["phases"].get("finalize_s"), "wall_s": summary["wall_s"]}
    print(json.dumps(out), flush=True)
    write(out_path("dense_layout.json", args.out), out, "dense_layout", quick=args.quick, targets=[
        target("files per field (most of any field)", max(files.values()), "<=", 64),
        target("write share of the actors' write + compare", share, "<", 0.10),
        target("dask tasks per chunk (most of any field)",
               max(tasks[f] / chunks[f] for f in fields), "==", 1)])


if __name__ == "__main__":
    main()
