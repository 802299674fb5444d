"""The cache view's data: R (item loads per item), the cache tiers' counters and the L3 directory.

R is the number that decides an all-pairs run's speed; the tiers (L1 per device, L2 per node, the
source) say where the loads were saved or spent. Counters are cumulative in each metrics
snapshot, so the rates and the hit ratio over a short window come from differences between
snapshots. The L3 directory's hits per hop are known only from summary.json, once the run ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .base import Reader, locked
from .snapshots import window_delta
from .values import first, num

__all__ = ["CacheTiers"]

L3_FIELDS = ("hops", "hits_per_hop", "hits", "misses", "failed", "stale", "lookup_calls", "take_calls")


class CacheTiers(Reader):
    """Per-tier counters from metrics.jsonl (``tiers``), R over time, the L3 summary."""

    view = "cache"
    streams = ("metrics",)

    def __init__(self, run):
        super().__init__(run)
        self.rows: list[dict] = []  # long: one per snapshot x tier x counter

    def ingest(self, stream: str, recs: list[dict]) -> None:
        for r in recs:
            t = num(r.get("t"))
            if t is None:
                continue
            for tier, c in (r.get("tiers") or {}).items():
                if not isinstance(c, dict):
                    continue
                for counter, v in c.items():
                    val = num(v)
                    if val is not None:
                        self.rows.append({"t": t, "tier": str(tier), "counter": str(counter), "value": val})

    def clear(self, stream: str) -> None:
        self.rows.clear()

    def thin(self, keep: set[float]) -> None:
        self.rows[:] = [r for r in self.rows if r["t"] in keep]

    def applies(self, kind: str | None) -> bool:
        summ = self.run.summary
        return kind == "allpairs" or bool(self.rows) or bool(summ.get("tiers")) or summ.get("R") is not None

    @locked
    def tier_series(self, smooth_s: float = 2.0) -> pd.DataFrame:
        """Long frame: sec, tier, counter (hits, misses, bytes_in, evictions, loads, bytes...), value
        (cumulative), rate (per second over the last ``smooth_s``), and for tiers that count hits and
        misses a pseudo-counter ``hit_ratio`` (value: cumulative ratio, rate: ratio over the window)."""
        def build():
            cols = ["sec", "tier", "counter", "value", "rate"]
            if not self.rows:
                return pd.DataFrame(columns=cols)
            df = pd.DataFrame(self.rows)
            df = df.drop_duplicates(["t", "tier", "counter"], keep="last").sort_values(["tier", "counter", "t"])
            parts = []
            for _, g in df.groupby(["tier", "counter"], sort=True):
                dv, dt = window_delta(g["t"], g["value"], smooth_s)
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.where(dt > 0, dv / np.where(dt > 0, dt, 1), np.nan)
                parts.append(g.assign(rate=r))
            for tier, g in df[df["counter"].isin(["hits", "misses"])].groupby("tier"):
                w = g.pivot_table(index="t", columns="counter", values="value", aggfunc="last").dropna()
                if not {"hits", "misses"} <= set(w.columns) or w.empty:
                    continue
                h, m, t = w["hits"].to_numpy(), w["misses"].to_numpy(), w.index.to_numpy()
                dh, _ = window_delta(t, h, smooth_s)
                dm, _ = window_delta(t, m, smooth_s)
                with np.errstate(divide="ignore", invalid="ignore"):
                    cum = np.where(h + m > 0, h / np.where(h + m > 0, h + m, 1), np.nan)
                    win = np.where(dh + dm > 0, dh / np.where(dh + dm > 0, dh + dm, 1), np.nan)
                parts.append(pd.DataFrame({"t": t, "tier": tier, "counter": "hit_ratio", "value": cum, "rate": win}))
            out = pd.concat(parts, ignore_index=True)
            out["sec"] = out["t"] - (self.run.started or out["t"].min())
            return out[cols]
        return self.cached(("tiers", smooth_s), ("metrics", "meta"), build)

    @locked
    def tier_totals(self) -> pd.DataFrame:
        """Latest cumulative counters per tier with hit ratio: tier, hits, misses, hit_ratio, ..."""
        def build():
            last = self.run.snapshots.raw_last or {}
            tiers = last.get("tiers") or self.run.summary.get("tiers") or {}
            rows = []
            for tier, c in sorted(tiers.items(), key=lambda kv: (kv[0] == "source", str(kv[0]))):
                if not isinstance(c, dict):
                    continue
                row = {"tier": str(tier)}
                for k, v in c.items():
                    if num(v) is not None:
                        row[k] = num(v)
                h, m = row.get("hits"), row.get("misses")
                row["hit_ratio"] = h / (h + m) if h is not None and m is not None and (h + m) > 0 else None
                rows.append(row)
            df = pd.DataFrame(rows)
            lead = [c for c in ("tier", "hits", "misses", "hit_ratio", "bytes_in", "evictions", "loads", "bytes")
                    if c in df.columns]
            return df[lead + [c for c in df.columns if c not in lead]]
        return self.cached("tier_totals", ("metrics", "summary"), build)

    @locked
    def r_series(self) -> pd.DataFrame:
        """sec, R over time (from snapshots; R = loads / n_items when R is absent)."""
        df = self.run.snapshots.frame()
        if df.empty:
            return pd.DataFrame(columns=["sec", "R"])
        if "R" in df.columns and df["R"].notna().any():
            return df[["sec", "R"]].dropna()
        if "loads" in df.columns:
            n = first(df["n_items"].iloc[-1] if "n_items" in df.columns else None, self.run.meta.get("n_items"))
            if n:
                return pd.DataFrame({"sec": df["sec"], "R": df["loads"] / n}).dropna()
        return pd.DataFrame(columns=["sec", "R"])

    @locked
    def l3_hops(self) -> pd.DataFrame:
        """The L3 directory's hits per hop, per node, from summary.json (``l3``): node, hop
        (1 = the most recent holder), hits; plus one row per node with hop ``miss`` (items no
        peer handed over: loaded from storage) and ``failed`` (hand-overs that failed). Empty
        when the run had no L3 (or has not finished)."""
        def build():
            cols = ["node", "hop", "hits"]
            l3 = self.run.summary.get("l3")
            if not isinstance(l3, dict) or not l3.get("enabled"):
                return pd.DataFrame(columns=cols)
            rows = []
            for node, part in sorted((l3.get("nodes") or {}).items()):
                if not isinstance(part, dict):
                    continue
                for k, hits in enumerate(part.get("hits_per_hop") or []):
                    rows.append({"node": str(node), "hop": str(k + 1), "hits": num(hits)})
                rows.append({"node": str(node), "hop": "miss", "hits": num(part.get("misses"))})
                rows.append({"node": str(node), "hop": "failed", "hits": num(part.get("failed"))})
            return pd.DataFrame(rows, columns=cols)
        return self.cached("l3_hops", ("summary",), build)

    @locked
    def l3_totals(self) -> dict:
        """summary.json's ``l3`` totals: hops, hits_per_hop, hits, misses, failed (or {})."""
        l3 = self.run.summary.get("l3")
        if not isinstance(l3, dict) or not l3.get("enabled"):
            return {}
        return {k: l3.get(k) for k in L3_FIELDS}
