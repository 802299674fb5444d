"""What pairflow reads back from a run directory never runs code that was put there: each
reader of bytes gets a planted file whose content would run code (create a marker file) if it
were unpickled or constructed, and must refuse it or read it as plain data.

The readers (found by grepping the engine, apps, operators, dashboard, kernels, hydra_plugins
and scripts for pickle, ``allow_pickle``, ``eval`` and ``yaml.load``; the L4 store has its own
tests, ``test_store_safety.py``):
- a parts sink's ``.npy`` parts (``TopK``/``Threshold`` finalize): object dtypes refused;
- the dense sink's zarr array (``AllPairsResult.matrix``, the apps' reports): zarr finds no
  data type for a pickled object array;
- Parquet results (``AllPairsResult.topk``/``edges``, the dashboard): pyarrow does not unpickle
  the old ``arrow.py_extension_type``;
- a resumed run's ``config.yaml`` (``apps.resume``): a safe YAML loader, the error named.
Journals, summaries, metrics and the farm's index are JSON (``json.loads``) and raw blocks.
"""
from __future__ import annotations

import io
import json
import os
import pickle

import numpy as np
import pytest

from pairflow.engine.pairs.sinks import SinkContext, Threshold, TopK
from pairflow.engine.pairs.space import Triangle, leaves


class Plant:
    """Unpickled, it creates ``path`` (any code would run the same way)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _object_npy(marker: str, dtype) -> bytes:
    a = np.empty(2, dtype)
    a[0] = (1, Plant(marker)) if dtype != object else Plant(marker)
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("sink", [lambda: Threshold(0.5), lambda: TopK(2)],
                         ids=["threshold", "topk"])
@pytest.mark.parametrize("alone", [True, False], ids=["only-part", "among-parts"])
def test_a_planted_object_part_is_refused(tmp_path, sink, alone):
    marker = str(tmp_path / "marker")
    space = Triangle(4)
    ctx = SinkContext(str(tmp_path / "out"), space, 2, list("abcd"), list("abcd"),
                      {"value": "float64"})
    s = sink()
    s.open(ctx)
    s.attach()
    if not alone:
        for tile in leaves(space, 2):
            mask = space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
            s.write_tile(tile, {"value": np.ones(mask.shape)}, mask)
    with open(os.path.join(s.parts_dir, "tile-99999999.npy"), "wb") as fh:
        fh.write(_object_npy(marker, object if alone else [("row", "i8"), ("x", "O")]))
    with pytest.raises(ValueError, match="tile-99999999.npy.*Python objects"):
        s.finalize()
    assert not os.path.exists(marker)


def test_a_planted_pickled_zarr_array_is_refused(tmp_path):
    from pairflow.engine.pairs.result import AllPairsResult
    marker = str(tmp_path / "marker")
    dense = tmp_path / "matrix.zarr"
    (dense / "value").mkdir(parents=True)
    (dense / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (dense / "value" / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "|O", "compressor": None,
        "fill_value": None, "order": "C", "filters": [{"id": "pickle"}]}))
    (dense / "value" / "0").write_bytes(pickle.dumps(np.array([Plant(marker)], object)))
    result = AllPairsResult(str(tmp_path), {}, {"dense": str(dense)})
    with pytest.raises(ValueError, match="data type"):
        result.matrix("value")
    assert not os.path.exists(marker)


def test_a_planted_pickled_arrow_extension_type_is_read_as_plain_data(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pairflow.engine.pairs.result import AllPairsResult
    marker = str(tmp_path / "marker")
    field = pa.field("row", pa.int64(), metadata={
        b"ARROW:extension:name": b"arrow.py_extension_type",
        b"ARROW:extension:metadata": pickle.dumps(Plant(marker))})
    table = pa.table({"row": pa.array([3, 1])}).cast(pa.schema([field]))
    path = str(tmp_path / "topk.parquet")
    pq.write_table(table, path)
    result = AllPairsResult(str(tmp_path), {}, {"topk": path, "threshold": path})
    assert result.topk["row"].tolist() == [3, 1] and result.edges["row"].tolist() == [3, 1]
    assert not os.path.exists(marker)


def test_a_resumed_config_with_a_python_tag_is_refused_by_name(tmp_path):
    from pairflow.apps.cli import CONFIG_DIR
    from pairflow.apps.resume import resume_config
    from pairflow.engine import PairflowError
    marker = tmp_path / "marker"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text("{}")
    (run_dir / "config.yaml").write_text(
        f'app:\n  name: !!python/object/apply:os.system ["touch {marker}"]\n')
    with pytest.raises(PairflowError, match="config.yaml does not read as a configuration"):
        resume_config(["resume=true", f"run_dir={run_dir}"], CONFIG_DIR)
    assert not marker.exists()
