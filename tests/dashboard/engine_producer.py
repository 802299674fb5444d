"""A REAL run for the dashboard tests: exact Jaccard of the Klebsiella capsule loci (kaptive-data,
unpacked by scripts/setup.sh) on a local Ray, in a subprocess so the test process never imports Ray.

    python tests/dashboard/engine_producer.py RUN_DIR [N_RECORDS] [LEAF_ITEMS]

Used by the ``producer`` fixture when PAIRFLOW_DASHBOARD_PRODUCER=engine (see conftest.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main(run_dir: str, n_records: int = 0, leaf_items: int = 8) -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    from tests.oracles import KLEBSIELLA, read_sequences

    recs = read_sequences(KLEBSIELLA, "genbank")
    if n_records:
        recs = recs[:n_records]
    fasta = Path(run_dir).parent / (Path(run_dir).name + "-input.fa")
    fasta.parent.mkdir(parents=True, exist_ok=True)
    fasta.write_text("".join(f">{n}\n{s}\n" for n, s in recs))

    from apps.jaccard import JaccardApp
    from engine import DenseMatrix
    from engine.pairs.driver import allpairs
    from engine.run.runtime import init_ray

    init_ray(num_cpus=2, object_store_mb=512)
    res = allpairs(app=JaccardApp([str(fasta)], k=21, item="record"), sink=DenseMatrix(diagonal={"similarity": 1.0}),
                   run_dir=run_dir, wait=True, progress=False, leaf_items=leaf_items)
    print(f"finished: {res.summary['tiles_total']} tiles, R={res.summary['R']:.3f}, wall={res.summary['wall_s']:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:4]))
