"""Validation: a sample of tiles recomputed on another device actor and compared exactly.

The scheduler keeps the fields of the tiles ``sizing.validation_sample`` picked (``validate``,
seeded); once every tile is done, the driver has each recomputed by a different actor than the
one that computed it (a fresh one when the run has no other) and compares cell by cell, NaN
equal to NaN. A nondeterministic kernel or a faulty device then fails the run, naming the tile,
the pair, the field and both actors, instead of leaving a wrong value in the outputs.
"""
from __future__ import annotations

import numpy as np

from ..errors import PairflowError
from .plan.scheduler import describe_tile


def validate(ex, kept: dict, members, tiles: list, space, row_keys: list[str],
             col_keys: list[str]) -> int:
    """Recompute the kept tiles (``kept``: tile -> the computing actor and its fields) on the
    run's other actors (``members``: membership.Membership); returns how many were checked."""
    others = list(members.handles)
    for i, (t, rec) in enumerate(sorted(kept.items())):
        choices = [a for a in others if a != rec["actor"]]
        if not choices:
            choices = [members.spawn(members.actor_node.get(rec["actor"], 0), f"validator-{i}")]
            others.append(choices[0])
        other = choices[i % len(choices)]
        fields = ex.get(members.handles[other].recompute.remote(t))
        tile = tiles[t]
        mask = space.mask(tile.r0, tile.r1, tile.c0, tile.c1)
        diff = first_difference(rec["fields"], fields, mask)
        if diff is not None:
            name, r, c, a, b = diff
            raise PairflowError(
                f"validation failed: {describe_tile(tile, row_keys, col_keys)}"
                f", pair ({row_keys[tile.r0 + r]}, {col_keys[tile.c0 + c]}): "
                f"{name} = {a!r} from {rec['actor']} but {b!r} from {other}")
    return len(kept)


def first_difference(mine: dict, theirs: dict, mask: np.ndarray):
    """Where two computations of one tile differ: ``(field, row, col, mine, theirs)`` of the
    first pair of ``mask`` whose values differ (NaN equals NaN), or None."""
    for name, a in mine.items():
        a, b = np.asarray(a), np.asarray(theirs[name])
        same = (a == b) | (_isnan(a) & _isnan(b))
        bad = np.argwhere(mask & ~same)
        if len(bad):
            r, c = bad[0]
            return name, int(r), int(c), a[r, c], b[r, c]
    return None


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
