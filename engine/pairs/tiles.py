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
        a = cls._numbers(raw)
        if a is not None:
            return cls(a)
        import json
        try:
            with open(path) as fh:
                return cls.of(json.load(fh))
        except (OSError, ValueError, AttributeError, TypeError):
            return None

    _NOT_SKELETON = b"0123456789- \n\r\t"
    _SPACES = bytes(b if chr(b) in "0123456789-" else 32 for b in range(256))

    @classmethod
    def _numbers(cls, raw: bytes) -> np.ndarray | None:
        """A plan's (tiles, 7) numbers when it is a JSON list of objects with exactly the keys
        of ``FIELDS``, in that order, and whole numbers (spaces anywhere); else None. Four
        passes over the text, not one per key (10^6 tiles: 0.4 s, where 17 passes took 2-4 s
        of a resume): the text without digits and spaces must be that object's skeleton n
        times in a list, and with only digits and signs kept it reads as 11 numbers a tile
        (the keys r0, r1, c0, c1 give their digits 0, 1, 0, 1 in fixed places)."""
        n = raw.count(b"{")
        one = ("{" + ",".join(f'"{f}":' for f in cls.FIELDS) + "}").encode().translate(
            None, cls._NOT_SKELETON)
        skeleton = raw.translate(None, cls._NOT_SKELETON)
        if not n or len(skeleton) != n * (len(one) + 1) + 1 or skeleton[:1] != b"[" or \
                skeleton[-1:] != b"]" or skeleton.count(one) != n or \
                skeleton.count(b"},{") != n - 1:  # "[" one "," one ... "," one "]"
            return None
        a = np.fromstring(raw.translate(cls._SPACES), dtype=np.int64, sep=" ")  # noqa: NPY201
        if len(a) != n * 11:
            return None
        a = a.reshape(n, 11)
        if not (a[:, [1, 3, 5, 7]] == [0, 1, 0, 1]).all():
            return None
        return np.ascontiguousarray(a[:, [0, 2, 4, 6, 8, 9, 10]])

    def to_dicts(self, order=None) -> Iterator[dict]:
        """Each tile as ``Tile.to_dict`` gives it, in ``order`` (positions) or as stored."""
        a = self.a if order is None else self.a[np.asarray(order, dtype=np.int64)]
        for lo in range(0, len(a), 4096):
            for row in a[lo:lo + 4096].tolist():
                yield dict(zip(self.FIELDS, row))
