"""How the dashboard prints numbers and thins series for charts.

Kept apart from the reading so that the page, the status line the browser tests parse and the
tests' own expectations share one definition of each format.
"""

from __future__ import annotations

import math

import pandas as pd

__all__ = ["downsample", "format_r", "format_count", "format_seconds", "format_duration"]


def downsample(df: pd.DataFrame, max_points: int = 1500, by: str | list[str] | None = None) -> pd.DataFrame:
    """At most ``max_points`` rows (per group ``by``), evenly spaced, always keeping the last row."""
    if df is None or df.empty:
        return df
    if by is not None:
        keys = [by] if isinstance(by, str) else list(by)
        if all(k in df.columns for k in keys):
            parts = [downsample(g, max_points) for _, g in df.groupby(keys, sort=False)]
            return pd.concat(parts, ignore_index=True) if parts else df
    n = len(df)
    if n <= max_points:
        return df
    step = math.ceil(n / max_points)
    idx = list(range(0, n, step))
    if idx[-1] != n - 1:
        idx.append(n - 1)
    return df.iloc[idx]


def format_r(r: float | None) -> str:
    """R as the dashboard prints it (the browser test parses this)."""
    return "n/a" if r is None else f"{r:.3f}"


def format_count(x: float | None, digits: int = 1) -> str:
    """A count in compact units, so a headline number fits its box: 866 -> "866", 866_860 ->
    "866.9 K", 49_009_236 -> "49.0 M" (K, M, G, T: powers of 1000)."""
    if x is None or not math.isfinite(x):
        return "?"
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        # the unit a rounded value still needs: 999_960 is "1.0 M", not "1000.0 K"
        if abs(x) >= scale * (1 - 0.5 * 10 ** -digits / 1000):
            return f"{x / scale:.{digits}f} {unit}"
    return f"{x:.0f}" if float(x).is_integer() or abs(x) >= 100 else f"{x:.{digits + 1}f}"


def format_seconds(s: float | None) -> str:
    """A short time as read per event or per record: 4.200 ms, 53.1 µs; "—" when unknown."""
    if s is None or not math.isfinite(s):
        return "—"
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.1f} ns"


def format_duration(s: float | None) -> str:
    """A duration as the page prints it: 75 -> "1 min 15 s"; "unknown" when unknown."""
    if s is None or not math.isfinite(s):
        return "unknown"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h} h {m:02d} min"
    d, h = divmod(h, 24)
    return f"{d} d {h} h"
