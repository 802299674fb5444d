"""Each app run twice over one L4 store (``store=DIR``): the second run parses nothing (parse
calls counted apart from the engine, ``tests/parse_count.py``) and its results equal the
first's. The synthetic app's items have no bytes to digest: they bypass the store, and both
runs parse them all."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conformance.test_item_codec_apps import GLOBINS, LAMBDA, O_LOCUS, OC_LOCUS, _files
from tests.conftest import need
from tests.parse_count import parsed

pytestmark = pytest.mark.slow


def _apps(count):
    import tests.counted_apps as ca
    import tests.parse_count as pc
    return {
        "jaccard-file": lambda: pc.CountedJaccard(
            [str(need(LAMBDA)), str(need(O_LOCUS)), str(need(OC_LOCUS))], k=21,
            count_path=count),
        "jaccard-record-bitset": lambda: pc.CountedJaccard(
            [str(need(O_LOCUS))], k=7, item="record", kernel="bitset", count_path=count),
        "jaccard_filtered": lambda: ca.CountedFiltered(
            [str(need(LAMBDA)), str(need(OC_LOCUS))], k=21, count_path=count),
        "align": lambda: pc.CountedAlign(str(need(GLOBINS)), weighted=False, count_path=count),
        "phylogeny": lambda: ca.CountedPhylogeny(
            _files("proteomes/*/*.faa", 3), k=4, count_path=count),
        "forensics": lambda: ca.CountedForensics(_files("cameras/*.jpg", 4), count_path=count),
        "microscopy": lambda: ca.CountedMicroscopy(_files("particles/particle_*.csv", 4),
                                                   count_path=count),
        "synthetic": lambda: ca.CountedSynthetic(6, item_floats=16, count_path=count),
    }


@pytest.mark.parametrize("name", ["jaccard-file", "jaccard-record-bitset", "jaccard_filtered",
                                  "align", "phylogeny", "forensics", "microscopy", "synthetic"])
def test_the_second_run_of_each_app_parses_nothing(name, runs, tmp_path):
    from pairflow.engine import DenseMatrix
    from pairflow.engine.pairs.driver import allpairs
    count, store = str(tmp_path / "parsed.txt"), str(tmp_path / "store")
    make = _apps(count)[name]

    def run():
        app = make()
        res = allpairs(app=app, sink=DenseMatrix(), runs_root=runs, wait=True, progress=False,
                       store=store, executor="inprocess", pack_items=False)
        return app, res

    app, first = run()
    n = len(app.keys())
    assert set(parsed(count)) == set(app.keys())
    _, second = run()
    s = second.summary["store"]
    assert s["corrupt"] == 0 and s["unstorable"] == 0, s
    if name == "synthetic":  # no bytes: nothing stored, everything parsed again
        assert set(parsed(count)) == set(app.keys()) and s["bypassed"] >= n
        assert s["bytes_written"] == 0
    else:
        assert parsed(count) == [] and s["parses"] == 0 and s["hits"] >= n, s
    for field in app.fields():
        assert np.array_equal(first.matrix(field), second.matrix(field), equal_nan=True), field
