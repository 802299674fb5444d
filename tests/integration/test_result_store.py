"""A result store on S3 (``result_store=s3://bucket/prefix``), through a moto server on 127.0.0.1.

The run's workers ship their tiles to the driver (``shared_fs=False``), the driver writes the
run directory and then copies the finished outputs to the store; what is read back from S3 must
equal a run without a store (the matrix, the top-k table) and the brute-force Jaccard of Python
sets. A store that cannot be written fails before any compute, naming it.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.moto_s3 import s3_bucket
from tests.conftest import need
from tests.oracles import canonical_kmers, jaccard_matrix, read_sequences
from tests.unit.conftest import SHARE

pytestmark = [pytest.mark.ray]
O_LOCUS = SHARE / "kaptive" / "reference_database" / "Klebsiella_o_locus_primary_reference.gbk"


@pytest.fixture
def s3(monkeypatch):
    with s3_bucket(monkeypatch, "results") as fs:
        yield fs


def _run(runs: str, **options):
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine.pairs.driver import allpairs
    from pairflow.engine.pairs.sinks import DenseMatrix
    return allpairs(app=JaccardApp([str(O_LOCUS)], k=21, item="record"),
                    sinks=[DenseMatrix(diagonal={"similarity": 1.0, "distance": 0.0}),
                           {"type": "topk", "k": 3, "field": "similarity"}],
                    runs_root=runs, leaf_items=4, progress=False, wait=True,
                    executor="ray", **options)


def test_results_on_s3_equal_a_local_run(ray_local, s3, tmp_path):
    import pandas as pd
    import zarr
    need(O_LOCUS)
    local = _run(str(tmp_path / "local"))
    stored = _run(str(tmp_path / "stored"), result_store="s3://results/jaccard/run1",
                  shared_fs=False)
    assert stored.summary["shared_fs"] is False
    published = stored.summary["published"]
    assert published == {"dense": "s3://results/jaccard/run1/matrix.zarr",
                         "topk": "s3://results/jaccard/run1/topk.parquet"}

    copy = tmp_path / "from_s3"
    s3.get("results/jaccard/run1/", str(copy) + "/", recursive=True)
    got = zarr.open_group(str(copy / "matrix.zarr"), mode="r")
    want = zarr.open_group(local.outputs["dense"], mode="r")
    assert list(got.attrs["row_keys"]) == list(want.attrs["row_keys"])
    for field in ("similarity", "distance"):
        assert np.array_equal(got[field][...], want[field][...], equal_nan=True), field
    assert pd.read_parquet(str(copy / "topk.parquet")).equals(pd.read_parquet(local.outputs["topk"]))

    # an independent oracle: brute-force canonical k-mer sets of each record
    names = list(got.attrs["row_keys"])
    records = dict(read_sequences(str(O_LOCUS), "genbank"))
    sets = [canonical_kmers([records[n.split("/", 1)[1]]], 21) for n in names]
    oracle, _ = jaccard_matrix(sets)
    assert np.allclose(got["similarity"][...], oracle, rtol=0, atol=1e-12)


def test_a_store_that_cannot_be_written_fails_before_compute(ray_local, tmp_path):
    from pairflow.engine import PairflowError
    need(O_LOCUS)
    with pytest.raises(PairflowError, match="result store nosuchscheme://x"):
        _run(str(tmp_path / "runs"), result_store="nosuchscheme://x")
