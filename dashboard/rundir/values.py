"""Tolerant reading of the values a run directory holds.

A run's files come from several writers and versions, and a reader may catch a field missing,
null, a string, NaN or infinite: these helpers turn each such value into a finite number or
``None`` rather than raising, so one odd field leaves one blank on the page, not a traceback.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["num", "int_or_none", "first", "max_of", "prog", "tile_key"]


def num(x: Any) -> float | None:
    """A finite float or None."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def int_or_none(x: Any) -> int | None:
    v = num(x)
    return int(v) if v is not None else None


def first(*xs: Any) -> Any:
    """The first value that is neither None nor NaN."""
    for x in xs:
        if x is not None and not (isinstance(x, float) and math.isnan(x)):
            return x
    return None


def max_of(*xs: Any) -> float | None:
    """The largest of the values that read as numbers, or None."""
    vals = [num(x) for x in xs]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def prog(done: Any, total: Any) -> dict:
    """{"done", "total", "fraction"} of a counter, done clipped to the total."""
    d, t = num(done), num(total)
    if d is not None and t is not None and t > 0:
        d = min(d, t)
    frac = (d / t) if (d is not None and t) else None
    return {"done": None if d is None else int(round(d)), "total": None if t is None else int(round(t)),
            "fraction": frac}


def tile_key(x: Any) -> Any:
    """Tile ids compare equal whether written as 7 or "7" (JSON writers differ)."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)) and float(x).is_integer():
        return str(int(x))
    return str(x)
