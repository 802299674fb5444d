"""What every sink is: the contract between the driver, which opens and finalizes a sink, and
the device actors, which write tiles into it (``sinks/__init__.py`` lists the sinks and makes
them from config entries).

A sink is created in the driver (``open``: make the output empty, under a ``.partial`` name),
shipped to the device actors, which call ``write_tile`` once per finished tile (idempotent by tile
id: writing the same tile twice gives the same bytes), and closed in the driver (``finalize``:
merge parts, rename ``.partial`` to the final name). ``write_tile`` returns journal entries
(location, length, CRC32 of what it wrote) so the journal, not the presence of files, says what is
done. A sink that keeps only part of a tile (a top-k, a threshold) says so with a reduction, so
an app can compute just that part in its kernel (``compare_reduced``).
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..space import PairSpace, Tile


@dataclass
class SinkContext:
    """What a sink needs to know about the run, fixed before the first tile."""

    out_dir: str
    space: PairSpace
    leaf: int
    row_keys: Sequence[str]
    col_keys: Sequence[str]
    fields: dict  # name -> dtype string


@dataclass(frozen=True)
class TopKReduction:
    """What a ``TopK`` sink keeps of a tile: each row's (``rows``) and each column's (``cols``)
    ``k`` best cells of ``field``, largest first (``largest``) or smallest, ties to the lower
    index. An app whose kernel can keep these while it computes (``compare_reduced``) hands
    back only them, as ``TileCandidates``, and no tile-sized field is ever made."""

    field: str
    k: int
    largest: bool
    rows: bool
    cols: bool
    # per tile (``Sink.tile_reduction``): the k-th best each row's / column's item already has
    # in tiles written before (NaN: none yet). A kernel may drop the cells worse than it
    # (not those equal to it): they cannot be among the item's k best of the run.
    row_floor: np.ndarray | None = field(default=None, compare=False, repr=False)
    col_floor: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ThresholdReduction:
    """What a ``Threshold`` sink keeps of a tile: the cells of ``field`` >= ``t`` (``above``)
    or <= ``t``, as ``TileCandidates`` in row-major order."""

    field: str
    t: float
    above: bool


@dataclass
class TileCandidates:
    """A tile reduced by an app's kernel: tile-local row and column indices of the kept cells,
    their values, and (TopK) whether each was kept as a column's best rather than a row's.
    Kept cells are cells of the space (the mask's), and exactly what the sink's own pass over
    the full field would keep."""

    i: np.ndarray
    j: np.ndarray
    values: np.ndarray
    is_col: np.ndarray | None = None


def _atomic_replace_dir(src: str, dst: str) -> None:
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.replace(src, dst)


class Sink:
    name = "sink"

    def open(self, ctx: SinkContext, resume: bool = False) -> None:
        self.ctx = ctx

    def write_tile(self, tile: Tile, fields: dict[str, np.ndarray], mask: np.ndarray) -> list[dict]:
        """Write one tile where it is computed; returns its journal entries."""
        return self.store_tile(tile, self.encode_tile(tile, fields, mask))

    def encode_tile(self, tile: Tile, fields: dict[str, np.ndarray], mask: np.ndarray):
        """Everything of a write but touching the output: what ``store_tile`` puts there. When
        workers cannot reach the run directory (``shared_fs=False``) a device actor encodes and
        the driver stores, so the sink's CPU work stays with the actors."""
        raise NotImplementedError

    def store_tile(self, tile: Tile, payload) -> list[dict]:
        """Put an encoded tile into the output; returns its journal entries."""
        raise NotImplementedError

    def reduction(self):
        """What this sink keeps of a tile, when that is far less than the tile (a
        ``TopKReduction``, a ``ThresholdReduction``), for an app that can keep it while it
        computes; ``None``: the sink needs the tile's fields."""
        return None

    def tile_reduction(self, tile: Tile, reduction):
        """``reduction()`` for one tile, with what this sink already knows that lets a kernel
        keep less (a ``TopK``'s floors); the default: the reduction as it is."""
        return reduction

    def encode_reduced(self, tile: Tile, found: "TileCandidates"):
        """``encode_tile`` of a tile an app reduced to ``reduction()``'s candidates: the same
        payload as from the full fields."""
        raise NotImplementedError

    def write_reduced(self, tile: Tile, found: "TileCandidates") -> list[dict]:
        return self.store_tile(tile, self.encode_reduced(tile, found))

    def preload(self) -> None:
        """In the driver, first thing in a run: start importing what ``open`` needs in the
        background, so the import overlaps the probe (whose kernels may release the GIL)."""
        return None

    def attach(self) -> None:
        """In the writing process, before its first tile: import and open what writing needs
        (importing zarr or pyarrow costs a device actor up to a second of CPU)."""
        return None

    def verify(self, entry: dict) -> bool:
        """Does what the journal says was written still read back with the same CRC?"""
        return True

    def before_finalize(self) -> None:
        """In the driver, on a thread of its own while the tiles compute (``driver._launch``;
        ``finalize`` waits for it): import what ``finalize`` needs (pyarrow and pandas cost a
        noticeable time on first import), off the start-up every run waits for."""
        return None

    def finalize(self) -> Any:
        return None
