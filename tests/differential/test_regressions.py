"""Shapes the differential harness (or a user) found failing, kept by name, each with the
mechanism it pinned. The drawn ones run through the same harness and oracle."""
from __future__ import annotations

import numpy as np
import pytest

from tests.differential.harness import run_and_check
from tests.differential.shapes import Shape
from tests.oracles import KLEBSIELLA, canonical_kmer_codes, jaccard_matrix_of_codes, \
    read_sequences


def _shape(**kw) -> Shape:
    base = dict(n=3, kind="vectors", storage="records", record_files=1, space="triangle",
                split=0, subset=(), pairs=(), pairlist_symmetric=False, weighted=False, seed=0,
                leaf_items=2, host_cache_items=None, plan="auto", eviction="auto",
                pack_items=True, sinks=(("dense",),), reduce_in_kernel=False, in_flight=1,
                read_ahead=False, interrupt_at=None)
    return Shape(**{**base, **kw})


# A pack of one record read as that record's key (PackKey's text was its member's), and the
# in-process executor handed the pack the record's own item, which the probe had parsed:
# "len() of unsized object" (a list of sets) or "cannot reshape" (stacked vectors).
PACK_OF_ONE = [
    pytest.param(_shape(), id="triangle-3-leaf-2-vectors"),
    pytest.param(_shape(kind="sets", n=13, leaf_items=6), id="triangle-13-leaf-6-sets"),
    pytest.param(_shape(space="rect_disjoint", split=1), id="rows-of-one-vectors"),
]


@pytest.mark.parametrize("shape", PACK_OF_ONE)
def test_a_pack_of_one_record_is_not_that_record(shape):
    run_and_check(shape)


@pytest.fixture(scope="module")
def loci(tmp_path_factory):
    """The first 157 Klebsiella K loci (one FASTA), and the brute force of all 157."""
    recs = read_sequences(KLEBSIELLA, "genbank")[:157]
    where = tmp_path_factory.mktemp("loci")
    files = {}
    for n in (145, 157):
        path = where / f"first{n}.fa"
        path.write_text("".join(f">{name}\n{seq}\n" for name, seq in recs[:n]))
        files[n] = str(path)
    sim = jaccard_matrix_of_codes([canonical_kmer_codes([s], 21) for _, s in recs])[0]
    return files, sim


@pytest.mark.ray
@pytest.mark.parametrize("executor", ["inprocess", "ray"])
@pytest.mark.parametrize("n", [145, 157])  # 1 mod 6: the last pack of 6 holds one record
def test_klebsiella_records_with_a_last_pack_of_one(ray_local, loci, tmp_path, n, executor):
    """The issue's command: `pairflow app=jaccard data.inputs=first145.fa data.item=record
    cache.host_cache_items=24`, through the API, on both executors."""
    from pairflow.apps.jaccard import JaccardApp
    from pairflow.engine import DenseMatrix, allpairs
    files, sim = loci
    res = allpairs(app=JaccardApp([files[n]], k=21, item="record"),
                   sink=DenseMatrix(diagonal={"similarity": 1.0}), host_cache_items=24,
                   executor=executor, runs_root=str(tmp_path), progress=False, wait=True)
    # the shape this guards: the last pack holds one record (packs are leaves; the leaf is 6,
    # or 12 where the planner groups 2x2 of them to spread a tile's fixed cost: 1 mod 12 too)
    assert n % res.summary["leaf_items"] == 1 and res.summary["executor"] == executor
    np.testing.assert_allclose(res.matrix("similarity"), sim[:n, :n], rtol=0, atol=1e-12)
