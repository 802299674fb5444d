"""Predict the 16 ragout proteomes with pyrodigal, once, for ``app=phylogeny``.

    python scripts/predict_proteomes.py            # into $PAIRFLOW_DATA or .data: proteomes/
    python scripts/predict_proteomes.py --force    # predict again even if the stamp is current

Prodigal's single-genome mode trains on the genome itself and is deterministic, so the same
genomes and the same pyrodigal version give the same proteins byte for byte; the stamp records
both, and a changed version predicts again. A genome of several records (V. cholerae has two
chromosomes) is trained on all of them at once and gives one proteome. The output is
``proteomes/<Species>/<strain>.faa``, one protein per gene, ``>record_n`` headers, no stop
``*``: the species is the folder, so a test knows which clade a proteome belongs to.
Genomes are predicted in parallel processes, one per core the machine has.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENOMES = "usr/share/doc/ragout/examples/*/references/*.fasta.gz"


def _data_dir() -> str:
    return os.environ.get("PAIRFLOW_DATA") or os.path.join(ROOT, ".data")


def _predict_one(genome: str, out_path: str) -> tuple[str, int]:
    import gzip

    import pyrodigal
    from Bio import SeqIO
    with gzip.open(genome, "rt") as fh:
        records = [(r.id, bytes(r.seq)) for r in SeqIO.parse(fh, "fasta")]
    finder = pyrodigal.GeneFinder(meta=False)
    finder.train(*[seq for _, seq in records])
    tmp = out_path + ".tmp"
    n_genes = 0
    with open(tmp, "w") as out:
        for name, seq in records:
            for i, gene in enumerate(finder.find_genes(seq), 1):
                protein = gene.translate(include_stop=False)
                out.write(f">{name}_{i}\n")
                for p in range(0, len(protein), 80):
                    out.write(protein[p:p + 80] + "\n")
                n_genes += 1
    os.replace(tmp, out_path)
    return out_path, n_genes


def predict(data_dir: str, force: bool = False, workers: int | None = None) -> str:
    """Write the proteomes under ``data_dir/proteomes`` unless its stamp is current; returns
    that folder."""
    import pyrodigal
    genomes = sorted(glob.glob(os.path.join(data_dir, "root", GENOMES)))
    if len(genomes) != 16:
        raise SystemExit(f"expected the 16 ragout genomes under {data_dir}/root (found "
                         f"{len(genomes)}): run scripts/setup.sh to unpack ragout-examples")
    out_dir = os.path.join(data_dir, "proteomes")
    stamp_path = os.path.join(out_dir, ".stamp")
    want = {"pyrodigal": pyrodigal.__version__,
            "genomes": {os.path.relpath(g, data_dir): os.path.getsize(g) for g in genomes}}
    if not force and os.path.exists(stamp_path):
        with open(stamp_path) as fh:
            if json.load(fh) == want:
                return out_dir
    jobs = []
    for genome in genomes:
        species = os.path.basename(os.path.dirname(os.path.dirname(genome)))
        strain = os.path.basename(genome).removesuffix(".fasta.gz")
        os.makedirs(os.path.join(out_dir, species), exist_ok=True)
        jobs.append((genome, os.path.join(out_dir, species, f"{strain}.faa")))
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for path, n_genes in pool.map(_predict_one, *zip(*jobs)):
            print(f"[proteomes] {os.path.relpath(path, data_dir)}: {n_genes} proteins",
                  file=sys.stderr)
    with open(stamp_path, "w") as fh:
        json.dump(want, fh, indent=1)
    return out_dir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=_data_dir(), help="data folder (default: .data)")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    print(predict(args.data, force=args.force, workers=args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
