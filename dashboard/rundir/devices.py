"""The devices view's data: each device actor's tiles, pairs and busy time, over time and in total.

An all-pairs run's metrics snapshots count, per actor, its tiles, pairs and seconds busy
(cumulative); rates are differences between snapshots a few seconds apart, so a chart of them is
smoother than the half-second steps. A run whose snapshots carry no per-actor counters still shows
its actors from tiles.jsonl (who finished which tile, when).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import Reader, locked
from .snapshots import window_delta
from .values import num

__all__ = ["Devices"]


class Devices(Reader):
    """Per-actor counters from metrics.jsonl (``actors``), else from tiles.jsonl."""

    view = "devices"
    streams = ("metrics",)

    def __init__(self, run):
        super().__init__(run)
        self.rows: list[dict] = []  # long: one per snapshot x actor

    def ingest(self, stream: str, recs: list[dict]) -> None:
        for r in recs:
            t = num(r.get("t"))
            if t is None:
                continue
            for actor, a in (r.get("actors") or {}).items():
                if isinstance(a, dict):
                    self.rows.append({"t": t, "actor": str(actor), "tiles": num(a.get("tiles")),
                                      "pairs": num(a.get("pairs")), "busy_s": num(a.get("busy_s"))})

    def clear(self, stream: str) -> None:
        self.rows.clear()

    def thin(self, keep: set[float]) -> None:
        self.rows[:] = [r for r in self.rows if r["t"] in keep]

    def applies(self, kind: str | None) -> bool:
        return kind == "allpairs" or bool(self.rows) or bool(self.run.matrix.done)

    @locked
    def series(self, smooth_s: float = 3.0) -> pd.DataFrame:
        """Per actor over time: cumulative tiles/pairs/busy_s and the rates derived from them.

        Columns: sec, actor, tiles, pairs, busy_s, pairs_per_s, tiles_per_s, busy_frac.  Rates are
        differences between snapshots at least ``smooth_s`` apart (smoother than 0.5 s steps).
        Falls back to binning tiles.jsonl when the metrics carry no per-actor counters.
        """
        def build():
            cols = ["sec", "actor", "tiles", "pairs", "busy_s", "pairs_per_s", "tiles_per_s", "busy_frac"]
            start = self.run.started
            if self.rows:
                df = pd.DataFrame(self.rows).sort_values(["actor", "t"], kind="stable")
                df = df.drop_duplicates(["actor", "t"], keep="last")
                parts = [_rates(g.reset_index(drop=True), smooth_s) for _, g in df.groupby("actor", sort=True)]
                out = pd.concat(parts, ignore_index=True)
                out["sec"] = out["t"] - (start if start is not None else out["t"].min())
                return out[cols]
            tiles = self.run.matrix.done_frame()
            if tiles.empty or tiles["t_end"].isna().all():
                return pd.DataFrame(columns=cols)
            tiles = tiles.dropna(subset=["t_end"])
            origin = start if start is not None else tiles["t_end"].min()
            bin_s = max(smooth_s, 1.0)
            tiles = tiles.assign(bin=((tiles["t_end"] - origin) // bin_s) * bin_s + bin_s)
            g = tiles.groupby(["actor", "bin"]).agg(tiles_bin=("id", "size"), pairs_bin=("pairs", "sum"))
            g = g.reset_index().sort_values(["actor", "bin"])
            g["tiles"] = g.groupby("actor")["tiles_bin"].cumsum()
            g["pairs"] = g.groupby("actor")["pairs_bin"].cumsum()
            g["pairs_per_s"] = g["pairs_bin"] / bin_s
            g["tiles_per_s"] = g["tiles_bin"] / bin_s
            g["busy_s"] = float("nan")
            g["busy_frac"] = float("nan")
            g = g.rename(columns={"bin": "sec"})
            return g[cols]
        return self.cached(("series", smooth_s), ("metrics", "tiles", "meta"), build)

    @locked
    def summary(self) -> pd.DataFrame:
        """Per actor: tiles, pairs, busy_s, idle_s, idle_frac, node, device."""
        def build():
            cols = ["actor", "node", "device", "tiles", "pairs", "busy_s", "idle_s", "idle_frac"]
            meta_actors = {str(a.get("id")): a for a in self.run.meta.get("actors") or [] if isinstance(a, dict)}
            last = self.run.snapshots.raw_last or {}
            elapsed = num(last.get("elapsed"))
            rows: dict[str, dict] = {}
            for aid, a in (last.get("actors") or {}).items():
                if isinstance(a, dict):
                    busy = num(a.get("busy_s"))
                    idle = (elapsed - busy) if (elapsed is not None and busy is not None) else None
                    rows[str(aid)] = {"actor": str(aid), "tiles": num(a.get("tiles")), "pairs": num(a.get("pairs")),
                                      "busy_s": busy, "idle_s": None if idle is None else max(0.0, idle),
                                      "idle_frac": None if idle is None or not elapsed else max(0.0, idle) / elapsed}
            if not rows and self.run.matrix.done:
                t = self.run.matrix.done_frame()
                for aid, g in t.groupby("actor"):
                    rows[str(aid)] = {"actor": str(aid), "tiles": float(len(g)), "pairs": float(g["pairs"].sum()),
                                      "busy_s": None, "idle_s": None, "idle_frac": None}
            for aid in meta_actors:
                rows.setdefault(aid, {"actor": aid, "tiles": 0.0, "pairs": 0.0, "busy_s": None,
                                      "idle_s": None, "idle_frac": None})
            for aid, r in rows.items():
                m = meta_actors.get(aid, {})
                r["node"], r["device"] = m.get("node"), m.get("device")
            return pd.DataFrame(sorted(rows.values(), key=lambda r: r["actor"]), columns=cols)
        return self.cached("summary", ("metrics", "tiles", "meta"), build)


def _rates(g: pd.DataFrame, smooth_s: float) -> pd.DataFrame:
    """Rates of one actor's cumulative counters between snapshots >= smooth_s apart."""
    out = g.copy()
    for col, rate in (("pairs", "pairs_per_s"), ("tiles", "tiles_per_s"), ("busy_s", "busy_frac")):
        dv, dt = window_delta(g["t"], g[col], smooth_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = dv / dt
        r[dt <= 0] = np.nan
        out[rate] = r
    out["busy_frac"] = out["busy_frac"].clip(lower=0.0, upper=1.0)
    return out
