"""A run's tiles: ``Tile`` (one leaf of the pair space's quadtree) and ``TileArray`` (all of
a run's tiles as columns of ints).

A run of 10^6 tiles kept a Python object per tile in the driver, the scheduler and every actor
(and a dict per tile on the way): ~250 bytes a ``Tile`` with its ints, ~400 a dict, over a GiB
in all. ``TileArray`` holds the seven numbers of each tile in one (n, 7) int64 array (56 bytes a
tile, one buffer to pickle) and makes a ``Tile`` when one is looked at. ``space.py`` cuts the
tiles (and re-exports both names).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np


@dataclass(frozen=True, slots=True)
class Tile:
    """A leaf of the quadtree: rows [r0, r1) x columns [c0, c1), holding ``pairs`` wanted pairs.

    A run keeps its tiles in a ``TileArray`` (columns of integers); a ``Tile`` is made when one
    is looked at, and holds no more than its seven numbers (slots: no ``__dict__``)."""

    id: int
    r0: int
    r1: int
    c0: int
    c1: int
    pairs: int
    depth: int = 0

    @property
    def rows(self) -> range:
        return range(self.r0, self.r1)

    @property
    def cols(self) -> range:
        return range(self.c0, self.c1)

    @property
    def block(self) -> tuple[int, int]:
        """(block row, block column) on the leaf grid."""
        return (self.r0, self.c0)

    def to_dict(self) -> dict:
        return {"id": self.id, "r0": self.r0, "r1": self.r1, "c0": self.c0, "c1": self.c1,
                "pairs": self.pairs, "depth": self.depth}



class TileArray(Sequence):
    """A run's tiles as one (n, 7) int64 array (id, r0, r1, c0, c1, pairs, depth), not a
    Python object per tile: 56 bytes a tile where a ``Tile`` and its ints took ~250 and its
    dict ~400; it pickles as one buffer (a Ray actor's spec). Indexing gives a ``Tile`` (made
    then); slices and index arrays give a ``TileArray``; columns are ``r0``, ``pairs`` ...
    Tile ``i`` has id ``i`` wherever a run uses it (ids number the tiles 0..n-1)."""

    FIELDS = ("id", "r0", "r1", "c0", "c1", "pairs", "depth")
    __slots__ = ("a",)

    def __init__(self, a: np.ndarray):
        a = np.asarray(a, dtype=np.int64)
        self.a = a.reshape(-1, len(self.FIELDS))

    @classmethod
    def of(cls, tiles) -> "TileArray":
        """From a ``TileArray`` (itself), ``Tile`` objects or tile dicts (``Tile.to_dict``)."""
        if isinstance(tiles, TileArray):
            return tiles
        rows = [(t.id, t.r0, t.r1, t.c0, t.c1, t.pairs, t.depth) if isinstance(t, Tile) else
                tuple(int(t.get(f, 0)) for f in cls.FIELDS) for t in tiles]
        return cls(np.array(rows, dtype=np.int64).reshape(-1, len(cls.FIELDS)))

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, i):
        if isinstance(i, (slice, np.ndarray, list)):
            return TileArray(self.a[i])
        return Tile(*self.a[i].tolist())

    def __iter__(self) -> Iterator[Tile]:
        for lo in range(0, len(self.a), 4096):
            for row in self.a[lo:lo + 4096].tolist():
                yield Tile(*row)

    def __eq__(self, other) -> bool:
        if isinstance(other, TileArray):
            return np.array_equal(self.a, other.a)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TileArray({len(self)} tiles)"

    def column(self, name: str) -> np.ndarray:
        return self.a[:, self.FIELDS.index(name)]

    @property
    def r0(self) -> np.ndarray:
        return self.a[:, 1]

    @property
    def r1(self) -> np.ndarray:
        return self.a[:, 2]

    @property
    def c0(self) -> np.ndarray:
        return self.a[:, 3]

    @property
    def c1(self) -> np.ndarray:
        return self.a[:, 4]

    @property
    def pairs(self) -> np.ndarray:
        return self.a[:, 5]

    _JSON = "{" + ",".join(f'"{f}":%d' for f in FIELDS) + "}"

    def to_json(self, order=None) -> Iterator[str]:
        """Each tile as the JSON text of ``Tile.to_dict`` (compact), in ``order`` or as stored:
        a plan of 10^6 tiles written without a dict per tile."""
        a = self.a if order is None else self.a[np.asarray(order, dtype=np.int64)]
        fmt = self._JSON
        for lo in range(0, len(a), 4096):
            for row in a[lo:lo + 4096].tolist():
                yield fmt % tuple(row)

    @classmethod
    def read_json(cls, path: str) -> "TileArray | None":
        """A saved plan (``tiles.json``: a JSON list of ``Tile.to_dict`` objects, keys in that
        order, as ``to_json`` and ``json.dump`` write them), in its order, read as numbers: no
        dict per tile (a resume of 10^6 tiles held ~0.5 GiB of them). None when the file is
        missing; a file of another shape is read through ``json``."""
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            return None
        n = raw.count(b"{")
        keys = [f'"{f}":'.encode() for f in cls.FIELDS]
        first = raw[raw.find(b"{"):raw.find(b"}") + 1]
        text = raw.replace(b" ", b"")
        if n and all(text.count(k) == n for k in keys) and \
                [first.replace(b" ", b"").find(k) for k in keys] == \
                sorted(first.replace(b" ", b"").find(k) for k in keys):
            for k in keys:
                text = text.replace(k, b" ")
            text = text.translate(bytes.maketrans(b"{}[],\n\r\t", b"        "))
            a = np.fromstring(text, dtype=np.int64, sep=" ")  # noqa: NPY201 (text mode)
            if len(a) == n * len(cls.FIELDS):
                return cls(a)
        import json
        try:
            with open(path) as fh:
                return cls.of(json.load(fh))
        except (OSError, ValueError, AttributeError, TypeError):
            return None

    def to_dicts(self, order=None) -> Iterator[dict]:
        """Each tile as ``Tile.to_dict`` gives it, in ``order`` (positions) or as stored."""
        a = self.a if order is None else self.a[np.asarray(order, dtype=np.int64)]
        for lo in range(0, len(a), 4096):
            for row in a[lo:lo + 4096].tolist():
                yield dict(zip(self.FIELDS, row))
