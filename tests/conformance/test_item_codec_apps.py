"""Every app's items through its L4 codec (``engine.pairs.codec.item_codec(app)``): what
``parse`` returns and what ``preprocess(..., "cpu")`` makes of it (a CPU run stores the
latter) come back identical (``tests/item_oracle.py``: types, dtypes, shapes, bytes, float
bits), on real inputs, for each app and item kind. An item the codec refused would be parsed
by every run: none of these may be refused."""
from __future__ import annotations

import glob
import os

import pytest

from pairflow.apps.data import data_dir
from tests.conftest import need
from tests.item_oracle import assert_identical
from tests.unit.conftest import LAMBDA, SHARE

DATA = data_dir()
O_LOCUS = SHARE / "kaptive" / "reference_database" / "Klebsiella_o_locus_primary_reference.gbk"
OC_LOCUS = SHARE / "kaptive" / "reference_database" / \
    "Acinetobacter_baumannii_OC_locus_primary_reference.gbk"
GLOBINS = SHARE / "doc" / "hmmer" / "examples" / "tutorial" / "globins45.fa"


def _files(pattern: str, n: int) -> list[str]:
    found = sorted(glob.glob(os.path.join(DATA, pattern)))[:n]
    if len(found) < n:
        pytest.fail(f"real data not found: {pattern} under {DATA}; run scripts/setup.sh",
                    pytrace=False)
    return found


def _jaccard(item, kernel, k):
    from pairflow.apps.jaccard import JaccardApp
    urls = [str(need(O_LOCUS))] if item == "record" else \
        [str(need(LAMBDA)), str(need(O_LOCUS)), str(need(OC_LOCUS))]
    return JaccardApp(urls, k=k, item=item, kernel=kernel)


def _filtered():
    from pairflow.apps.jaccard_filtered import FilteredJaccardApp
    return FilteredJaccardApp([str(need(LAMBDA)), str(need(OC_LOCUS))], k=21)


def _align():
    from pairflow.apps.align import AlignApp
    return AlignApp(str(need(GLOBINS)))


def _phylogeny():
    from pairflow.apps.phylogeny import PhylogenyApp
    return PhylogenyApp(_files("proteomes/H.Pylori/*.faa", 2), k=5)


def _forensics():
    from pairflow.apps.forensics import ForensicsApp
    return ForensicsApp(_files("cameras/*.jpg", 2))


def _microscopy():
    from pairflow.apps.microscopy import MicroscopyApp
    return MicroscopyApp(_files("particles/particle_*.csv", 3))


def _synthetic():
    from pairflow.apps.synthetic import SyntheticApp
    return SyntheticApp(4, item_floats=32)


APPS = {
    "jaccard-file-merge": lambda: _jaccard("file", "merge", 21),
    "jaccard-file-bitset": lambda: _jaccard("file", "bitset", 7),
    "jaccard-record-merge": lambda: _jaccard("record", "merge", 21),
    "jaccard-record-bitset": lambda: _jaccard("record", "bitset", 7),
    "jaccard_filtered": _filtered,
    "align": _align,
    "phylogeny": _phylogeny,
    "forensics": _forensics,
    "microscopy": _microscopy,
    "synthetic": _synthetic,
}


def _raw(app, key):
    from pairflow.engine.run.io import fetch
    url = app.url(key)
    return fetch(url) if url else None


@pytest.mark.parametrize("name", list(APPS))
def test_an_apps_items_come_back_identical(name):
    from pairflow.engine.pairs.codec import item_codec
    app = APPS[name]()
    codec = item_codec(app)
    keys = list(app.keys())[:4]
    for key in keys:
        parsed = app.parse(key, _raw(app, key))
        assert_identical(parsed, codec.decode(codec.encode(parsed)), f"{name} {key} parsed")
        prepared = app.preprocess(key, app.parse(key, _raw(app, key)), "cpu")
        assert_identical(prepared, codec.decode(codec.encode(prepared)),
                         f"{name} {key} preprocessed")
    if app.packs():  # a pack never goes to the store, but is an item all the same
        pack = app.parse_pack(keys)
        assert_identical(pack, codec.decode(codec.encode(pack)), f"{name} pack")
