"""The survivors of a pipeline as a Parquet dataset: one part per batch.

Parts are written under ``NAME.partial`` as batches finish (in any order; a part is named by
its batch index, so a batch written twice replaces its part) and the directory is renamed to
``NAME`` by ``finalize``: a run that fails leaves nothing under the final name. The dataset reads
back with pyarrow, pandas, Dask or ``operators.columnar.ParquetSource``.
"""
from __future__ import annotations

import os
import shutil
from typing import Sequence

from pairflow.engine.pipeline import PipelineSink


class ParquetSink(PipelineSink):
    name = "parquet"

    def __init__(self, filename: str = "selected.parquet", columns: Sequence[str] | None = None):
        self.filename, self.columns = filename, list(columns) if columns else None

    def open(self, out_dir):
        super().open(out_dir)
        self.final = os.path.join(out_dir, self.filename)
        self.partial = self.final + ".partial"
        shutil.rmtree(self.partial, ignore_errors=True)
        os.makedirs(self.partial)

    def write(self, batch_index, batch):
        import pyarrow.parquet as pq
        table = batch.select(self.columns).to_arrow()
        path = os.path.join(self.partial, f"part-{batch_index:06d}.parquet")
        pq.write_table(table, path + ".tmp")
        os.replace(path + ".tmp", path)

    def finalize(self):
        if os.path.exists(self.final):
            shutil.rmtree(self.final)
        os.replace(self.partial, self.final)
        return self.final
