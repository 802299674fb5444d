"""The timeline view's data: stage spans (who loaded, parsed, compared, wrote what, when) and the
seconds spent in each stage.

Spans come from trace.jsonl while the run writes it, or from trace.parquet, which a run writes at
its end and after which trace.jsonl may be gone. A long run writes millions of spans: at most
``max_spans`` (the most recent) are kept in memory, as a few data frames that are joined when a
chart asks for them.
"""

from __future__ import annotations

import os
from typing import Iterable

import pandas as pd

from .base import Reader, locked
from .values import num

__all__ = ["Timeline", "STAGES", "stage_order"]

#: stage names of the all-pairs dataflow in pipeline order (others are shown after these)
STAGES = ("load", "parse", "preprocess", "compare", "postprocess", "write")
SPAN_COLUMNS = ["actor", "stage", "what", "t0", "t1"]


def stage_order(stages: Iterable[str]) -> list[str]:
    """``stages`` in pipeline order, unknown ones after, by name."""
    known = [s for s in STAGES if s in set(stages)]
    return known + sorted(set(stages) - set(STAGES))


class Timeline(Reader):
    """trace.jsonl (tailed) or trace.parquet, and the snapshots' ``stage_seconds``."""

    view = "timeline"
    streams = ("trace",)

    def __init__(self, run):
        super().__init__(run)
        self.chunks: list[pd.DataFrame] = []
        self.count = 0
        self._from_parquet = False
        self._parquet_sig: tuple | None = None

    def ingest(self, stream: str, recs: list[dict]) -> None:
        if self._from_parquet:  # a new trace.jsonl after a converted one: a new run
            self.clear(stream)
            self._parquet_sig = None
        rows = []
        for r in recs:
            t0, t1 = num(r.get("t0")), num(r.get("t1"))
            if t0 is None or t1 is None:
                continue
            rows.append({"actor": str(r.get("actor", "?")), "stage": str(r.get("stage", "?")),
                         "what": str(r.get("what", "")), "t0": t0, "t1": t1})
        if rows:
            self._add(pd.DataFrame(rows))

    def clear(self, stream: str) -> None:
        self.chunks.clear()
        self.count = 0
        self._from_parquet = False

    def _add(self, df: pd.DataFrame) -> None:
        self.chunks.append(df)
        self.count += len(df)
        if self.count > self.run.max_spans:  # keep the most recent spans, with some slack
            keep = max(1, int(self.run.max_spans * 0.8))
            all_ = pd.concat(self.chunks, ignore_index=True).iloc[-keep:]
            self.chunks[:] = [all_.reset_index(drop=True)]
            self.count = len(all_)

    def poll(self) -> None:
        """Use trace.parquet when the run converted its trace and trace.jsonl is gone."""
        if self.run.stream_exists("trace"):
            return  # the JSONL trace is being tailed: it holds the same spans
        p = self.run.run_dir / "trace.parquet"
        try:
            st = os.stat(p)
        except OSError:
            return
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._parquet_sig:
            return
        try:
            df = pd.read_parquet(p)
        except Exception:  # noqa: BLE001 - partially written or unreadable: try again later
            return
        self._parquet_sig = sig
        if not {"actor", "stage", "t0", "t1"} <= set(df.columns):
            return
        if "what" not in df.columns:
            df["what"] = ""
        df = df[SPAN_COLUMNS].astype({"actor": str, "stage": str, "what": str, "t0": float, "t1": float})
        self.clear("trace")
        self._from_parquet = True
        self._add(df)
        self.run.touch("trace")

    def applies(self, kind: str | None) -> bool:
        return kind == "allpairs" or self.count > 0

    def first_t0(self) -> float | None:
        """The earliest span start held, or None."""
        return float(min(c["t0"].min() for c in self.chunks)) if self.count else None

    @locked
    def spans(self, window: tuple[float, float] | None = None, max_rows: int | None = 20_000) -> pd.DataFrame:
        """Stage spans for the timeline: actor, stage, what, t0, t1, s0, s1 (seconds since start),
        duration.  ``window=(a, b)`` in seconds since start keeps spans overlapping [a, b]; at most
        ``max_rows`` spans are returned (the most recent)."""
        def build_all():
            if not self.chunks:
                return pd.DataFrame(columns=SPAN_COLUMNS + ["s0", "s1", "duration"])
            df = pd.concat(self.chunks, ignore_index=True) if len(self.chunks) > 1 else self.chunks[0]
            if len(self.chunks) > 1:
                self.chunks[:] = [df]  # compact: the next concat is cheap
            df = df.copy()
            started = self.run.started
            origin = started if started is not None else df["t0"].min()
            df["s0"], df["s1"] = df["t0"] - origin, df["t1"] - origin
            df["duration"] = df["t1"] - df["t0"]
            return df
        df = self.cached("spans", ("trace", "meta"), build_all)
        if window is not None and not df.empty:
            a, b = window
            df = df[(df["s1"] >= a) & (df["s0"] <= b)]
        if max_rows is not None and len(df) > max_rows:
            df = df.nlargest(max_rows, "t1")
        return df

    @locked
    def extent(self) -> tuple[float, float] | None:
        """(first start, last end) of the spans in seconds since start, or None."""
        df = self.spans(max_rows=None)
        if df.empty:
            return None
        return float(df["s0"].min()), float(df["s1"].max())

    @locked
    def stage_totals(self) -> pd.DataFrame:
        """Latest cumulative seconds per stage (from the metrics), in pipeline order."""
        last = (self.run.snapshots.raw_last or {}).get("stage_seconds") or {}
        rows = [{"stage": s, "seconds": num(last[s])} for s in stage_order(last) if num(last[s]) is not None]
        return pd.DataFrame(rows, columns=["stage", "seconds"])
