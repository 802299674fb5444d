"""What every Smith-Waterman path of :mod:`kernels.smith_waterman` shares: the
``Alignment`` record a traceback returns, the dynamic-programming cells a block of pairs costs
(``cells``), and the checks of the inputs (sequences, scoring, method, mask, k).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .scoring import Scoring, validate as _validate

METHODS = ("striped", "scan")


@dataclass(frozen=True)
class Alignment:
    """One local alignment, in BLAST's coordinates: 1-based, inclusive, query first.

    ``cigar`` is the extended SAM form with ``=``/``X`` for identical/different columns, ``I`` for a
    query letter against a gap and ``D`` for a target letter against a gap.  ``identity`` is
    ``matches / length`` over alignment columns (a fraction; BLAST's pident is 100 times this); it
    is a field rather than a property so that ``dataclasses.asdict`` hands it to table sinks.
    An empty alignment (nothing scores above 0) has score 0 and all coordinates 0.
    """

    score: int
    qstart: int
    qend: int
    sstart: int
    send: int
    cigar: str
    query_aligned: str
    target_aligned: str
    matches: int
    length: int
    identity: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "identity", self.matches / self.length if self.length else 0.0)

    @property
    def gaps(self) -> int:
        return self.query_aligned.count("-") + self.target_aligned.count("-")


# the alignment of a pair where nothing scores above 0
EMPTY_ALIGNMENT = Alignment(0, 0, 0, 0, 0, "", "", "", 0, 0)


def cells(q_len, t_len, mask=None) -> int:
    """Dynamic-programming cells of a pair or of a block of pairs: the unit of SW cost.

    Scalars give ``q_len * t_len``; arrays of lengths give the sum over the
    ``len(q_len) x len(t_len)`` block, restricted to ``mask`` if given, which is what a scheduler
    needs to size a tile and what cells/s rates divide by.
    """
    q = np.asarray(q_len, dtype=np.int64)
    t = np.asarray(t_len, dtype=np.int64)
    if q.ndim == 0 and t.ndim == 0 and mask is None:
        return int(q) * int(t)
    block = np.multiply.outer(np.atleast_1d(q), np.atleast_1d(t))
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != block.shape:
            raise ValueError(f"mask shape {mask.shape} != block shape {block.shape}")
        return int(block[mask].sum())
    return int(block.sum())


def _prepare(seqs, scoring: Scoring, what: str, validate: bool) -> list[str]:
    if not isinstance(scoring, Scoring):
        raise TypeError(f"scoring must be a Scoring (Scoring.create(...)), got {type(scoring).__name__}")
    if isinstance(seqs, (str, bytes)):
        raise TypeError(f"{what}s must be a sequence of sequences, got a single {type(seqs).__name__}")
    if validate:
        return _validate(seqs, scoring, what=what)
    return [s.upper() if isinstance(s, str) else bytes(s).decode("latin-1").upper() for s in seqs]


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _check_mask(mask, shape) -> np.ndarray | None:
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValueError(f"mask must be boolean (which pairs to compute), got dtype {mask.dtype}")
    if mask.shape != shape:
        raise ValueError(f"mask shape {mask.shape} != (len(queries), len(targets)) = {shape}")
    return mask


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return int(k)
