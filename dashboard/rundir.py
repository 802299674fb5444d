"""Reading layer of the dashboard: turns a run directory into dicts and pandas frames.

Pure Python + pandas (pyarrow only for an optional ``trace.parquet``); no Streamlit, no Ray and
nothing from the engine.  The run-directory format is documented in ``docs/run-directory.md``;
this module is written against that text only, so it works on a live run, a finished one and a
directory copied from a cluster.

Everything here tolerates a directory that is being written while it is read:

* files that do not exist yet read as "nothing yet";
* JSON Lines files are *tailed*: :class:`JsonlTailer` keeps a byte offset, hands out only complete
  lines and keeps a partial last line until its newline arrives (or the run has ended);
* a JSON file caught half-written (a writer that did not rename) keeps its last good value;
* unknown or missing fields read as ``None`` instead of raising.

:class:`RunView` owns one tailer per JSONL file, accumulates parsed rows (never re-reading a file
from the start unless it was replaced or truncated) and caches each derived frame until new data
arrives, so refreshing it every second costs only the bytes appended since the last refresh.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

__all__ = [
    "JsonlTailer",
    "JsonFile",
    "RunView",
    "shared_view",
    "STAGES",
    "TERMINAL_STATES",
    "downsample",
    "format_r",
    "format_duration",
]

#: stage names of the all-pairs dataflow in pipeline order (others are shown after these)
STAGES = ("load", "parse", "preprocess", "compare", "postprocess", "write")
TERMINAL_STATES = ("finished", "failed", "interrupted")
#: state shown before anything of the run exists
WAITING = "waiting for run"


# --------------------------------------------------------------------------- low-level readers


class JsonlTailer:
    """Incremental reader of an append-only JSON Lines file.

    ``poll()`` returns the objects of the lines completed since the previous call.  It keeps the
    byte offset of what it has consumed and the bytes of an incomplete last line; a file that does
    not exist (yet) yields nothing.  If the file is replaced (different inode) or truncated, the
    tailer starts again from the beginning and increments :attr:`resets` so that its owner can
    drop what it accumulated.  Lines that are complete but not valid JSON (or not objects) are
    counted in :attr:`bad_lines` and skipped.
    """

    def __init__(self, path: str | os.PathLike, chunk_bytes: int = 8 << 20):
        self.path = Path(path)
        self.offset = 0  # bytes consumed, including the partial line held in _partial
        self.chunk_bytes = chunk_bytes
        self.resets = 0
        self.bad_lines = 0
        self.lines_read = 0
        self._partial = b""
        self._head = b""  # first bytes of the file, to notice it was recreated
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file being tailed

    @property
    def exists(self) -> bool:
        return self.path.exists()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete last line held back."""
        return len(self._partial)

    def _reset(self) -> None:
        self.offset = 0
        self._partial = b""
        self._head = b""
        self.lines_read = 0
        self.resets += 1

    def _same_head(self) -> bool:
        """The first bytes are still those read first (a file recreated under a reused inode is not)."""
        if not self._head:
            return True
        try:
            with open(self.path, "rb") as f:
                return f.read(len(self._head)) == self._head
        except OSError:
            return True

    def poll(self, final: bool = False, max_bytes: int | None = None) -> list[dict]:
        """Return the records of newly completed lines.

        ``final=True`` (the run has ended) also accepts a last line without its newline if it
        parses as JSON.  ``max_bytes`` bounds how much is read in this call (the rest is read by
        the next calls), which keeps the first refresh of a huge file responsive.
        """
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if self._ident is not None:  # it existed and went away: whatever came from it is void
                self._reset()
                self._ident = None
            return []
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and (ident != self._ident or st.st_size < self.offset
                                         or not self._same_head()):
            self._reset()
        self._ident = ident
        out: list[dict] = []
        want = st.st_size - self.offset
        if max_bytes is not None:
            want = min(want, max_bytes)
        if want > 0:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read(want)
            except (FileNotFoundError, PermissionError):
                return []
            if self.offset == 0:
                self._head = data[:64]
            self.offset += len(data)
            buf = self._partial + data if self._partial else data
            cut = buf.rfind(b"\n")
            if cut < 0:
                self._partial = buf
            else:
                self._partial = buf[cut + 1 :]
                for line in buf[:cut].split(b"\n"):
                    self._parse_into(line, out)
        if final and self._partial.strip() and self.offset >= st.st_size:
            try:
                obj = json.loads(self._partial)
            except ValueError:
                pass  # still incomplete (or garbage): keep it, it may yet be completed
            else:
                if isinstance(obj, dict):
                    out.append(obj)
                    self.lines_read += 1
                self._partial = b""
        return out

    def _parse_into(self, line: bytes, out: list[dict]) -> None:
        line = line.strip()
        if not line:
            return
        try:
            obj = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        if isinstance(obj, dict):
            out.append(obj)
            self.lines_read += 1
        else:
            self.bad_lines += 1


class JsonFile:
    """A JSON (or text) file that is replaced as a whole; re-read only when it changes.

    Keeps the last value that parsed, so a reader racing a non-atomic writer sees the previous
    content rather than an error.  ``get()`` returns ``None`` while the file does not exist.
    """

    def __init__(self, path: str | os.PathLike, text: bool = False):
        self.path = Path(path)
        self.text = text
        self._sig: tuple | None = None
        self._value: Any = None
        self.version = 0  # incremented whenever the value changes

    def get(self) -> Any:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if self._sig is not None:  # the file went away (e.g. directory reused): forget it
                self._sig, self._value = None, None
                self.version += 1
            return None
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._sig:
            return self._value
        try:
            raw = self.path.read_bytes()
            value = raw.decode("utf-8", "replace") if self.text else json.loads(raw)
        except (OSError, ValueError):
            return self._value  # half-written: keep the previous good value, try again later
        self._sig, self._value = sig, value
        self.version += 1
        return value


# --------------------------------------------------------------------------- helpers


def _num(x: Any) -> float | None:
    """A finite float or None."""
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _int(x: Any) -> int | None:
    v = _num(x)
    return int(v) if v is not None else None


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


def _stage_order(stages: Iterable[str]) -> list[str]:
    known = [s for s in STAGES if s in set(stages)]
    return known + sorted(set(stages) - set(STAGES))


# --------------------------------------------------------------------------- the run view


@dataclass
class _Stream:
    """One tailed JSONL file, its accumulated rows and a version bumped on every change."""

    tailer: JsonlTailer
    ingest: Callable[[list[dict]], None]
    clear: Callable[[], None]
    seen_resets: int = 0
    version: int = 0


@dataclass
class _Cache:
    key: Any = None
    value: Any = None


class RunView:
    """Everything the dashboard shows, derived from one run directory.

    Call :meth:`refresh` (cheap: reads only what was appended) and then any of the view methods;
    each returns plain dicts / pandas frames and caches its result until its inputs change.
    Thread-safe: one view can be shared by several browser sessions.

    Time axes are seconds since the run started (``meta.started``, else the first metrics
    snapshot's ``t - elapsed``, else the earliest timestamp seen).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        *,
        eta_window_s: float = 30.0,
        stale_after_s: float = 30.0,
        max_spans: int = 500_000,
        max_snapshots: int = 10_000,
        clock: Callable[[], float] = time.time,
    ):
        self.run_dir = Path(run_dir)
        self.eta_window_s = eta_window_s
        self.stale_after_s = stale_after_s
        self.max_spans = max_spans
        self.max_snapshots = max_snapshots
        self.clock = clock
        self._lock = threading.RLock()
        d = self.run_dir
        self._meta = JsonFile(d / "meta.json")
        self._status = JsonFile(d / "status.json")
        self._summary = JsonFile(d / "summary.json")
        self._tiles_plan = JsonFile(d / "tiles.json")
        self._config = JsonFile(d / "config.yaml", text=True)
        self._trace_parquet_sig: tuple | None = None
        self._caches: dict[str, _Cache] = {}
        self.last_refresh: float | None = None
        self.refresh_seconds: float = 0.0

        # accumulated rows
        self._metrics: list[dict] = []  # flat rows (one per snapshot)
        self._metrics_raw_last: dict | None = None
        self._actor_rows: list[dict] = []  # long: one per snapshot x actor
        self._tier_rows: list[dict] = []  # long: one per snapshot x tier x counter
        self._stage_rows: list[dict] = []  # long: one per snapshot x stage
        self._done_tiles: dict[Any, dict] = {}  # tile id -> last tiles.jsonl record
        self._span_chunks: list[pd.DataFrame] = []
        self._span_count = 0
        self._pipeline: list[dict] = []
        self._farm: list[dict] = []  # farm.jsonl: one line per tool run of a unit
        self._spans_from_parquet = False

        self._streams = {
            "metrics": _Stream(JsonlTailer(d / "metrics.jsonl"), self._ingest_metrics, self._clear_metrics),
            "tiles": _Stream(JsonlTailer(d / "tiles.jsonl"), self._ingest_tiles, self._done_tiles.clear),
            "trace": _Stream(JsonlTailer(d / "trace.jsonl"), self._ingest_spans, self._clear_spans),
            "pipeline": _Stream(JsonlTailer(d / "pipeline.jsonl"), self._pipeline.extend, self._pipeline.clear),
            "farm": _Stream(JsonlTailer(d / "farm.jsonl"), self._farm.extend, self._farm.clear),
        }

    # ---------------------------------------------------------------- refresh

    def refresh(self, max_bytes_per_file: int | None = 64 << 20) -> "RunView":
        """Read what was appended since the last call.  Never raises on a malformed directory."""
        with self._lock:
            t0 = time.perf_counter()
            status = self._status.get() or {}
            final = status.get("state") in TERMINAL_STATES
            for stream in self._streams.values():
                recs = stream.tailer.poll(final=final, max_bytes=max_bytes_per_file)
                if stream.tailer.resets != stream.seen_resets:
                    stream.seen_resets = stream.tailer.resets
                    stream.clear()
                    stream.version += 1
                if recs:
                    stream.ingest(recs)
                    stream.version += 1
            self._maybe_read_trace_parquet()
            self.last_refresh = self.clock()
            self.refresh_seconds = time.perf_counter() - t0
        return self

    def _versions(self, *names: str) -> tuple:
        out = []
        for n in names:
            if n in self._streams:
                out.append(self._streams[n].version)
            else:
                f = {"meta": self._meta, "status": self._status, "summary": self._summary,
                     "plan": self._tiles_plan}[n]
                f.get()
                out.append(f.version)
        return tuple(out)

    def _cached(self, name: str, key: Any, build: Callable[[], Any]) -> Any:
        c = self._caches.setdefault(name, _Cache())
        if c.key != key or c.value is None:
            c.value = build()
            c.key = key
        return c.value

    # ---------------------------------------------------------------- ingestion

    def _clear_metrics(self) -> None:
        self._metrics.clear()
        self._actor_rows.clear()
        self._tier_rows.clear()
        self._stage_rows.clear()
        self._metrics_raw_last = None

    def _ingest_metrics(self, recs: list[dict]) -> None:
        for r in recs:
            t = _num(r.get("t"))
            if t is None:
                continue
            self._metrics_raw_last = r
            row = {"t": t, "elapsed": _num(r.get("elapsed"))}
            for k, v in r.items():
                if k in ("t", "elapsed"):
                    continue
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    row[k] = _num(v)
            self._metrics.append(row)
            for actor, a in (r.get("actors") or {}).items():
                if isinstance(a, dict):
                    self._actor_rows.append({
                        "t": t, "actor": str(actor), "tiles": _num(a.get("tiles")),
                        "pairs": _num(a.get("pairs")), "busy_s": _num(a.get("busy_s")),
                    })
            for tier, c in (r.get("tiers") or {}).items():
                if not isinstance(c, dict):
                    continue
                for counter, v in c.items():
                    val = _num(v)
                    if val is not None:
                        self._tier_rows.append({"t": t, "tier": str(tier), "counter": str(counter), "value": val})
            for stage, v in (r.get("stage_seconds") or {}).items():
                val = _num(v)
                if val is not None:
                    self._stage_rows.append({"t": t, "stage": str(stage), "seconds": val})
        while len(self._metrics) > max(self.max_snapshots, 4):
            self._thin_metrics()

    def _thin_metrics(self) -> None:
        """Keep memory bounded on long runs: drop every other snapshot of the older half (counters
        are cumulative, so rates over the remaining snapshots stay right, only coarser)."""
        cut = len(self._metrics) // 2
        keep = {m["t"] for i, m in enumerate(self._metrics) if i >= cut or i % 2 == 0}
        for rows in (self._metrics, self._actor_rows, self._tier_rows, self._stage_rows):
            rows[:] = [r for r in rows if r["t"] in keep]

    def _ingest_tiles(self, recs: list[dict]) -> None:
        for r in recs:
            if "id" in r:
                self._done_tiles[_tile_key(r["id"])] = r

    def _clear_spans(self) -> None:
        self._span_chunks.clear()
        self._span_count = 0
        self._spans_from_parquet = False

    def _ingest_spans(self, recs: list[dict]) -> None:
        if self._spans_from_parquet:  # a new trace.jsonl after a converted one: a new run
            self._clear_spans()
            self._trace_parquet_sig = None
        rows = []
        for r in recs:
            t0, t1 = _num(r.get("t0")), _num(r.get("t1"))
            if t0 is None or t1 is None:
                continue
            rows.append({"actor": str(r.get("actor", "?")), "stage": str(r.get("stage", "?")),
                         "what": str(r.get("what", "")), "t0": t0, "t1": t1})
        if rows:
            self._add_span_chunk(pd.DataFrame(rows))

    def _add_span_chunk(self, df: pd.DataFrame) -> None:
        self._span_chunks.append(df)
        self._span_count += len(df)
        if self._span_count > self.max_spans:  # keep the most recent spans, with some slack
            keep = max(1, int(self.max_spans * 0.8))
            all_ = pd.concat(self._span_chunks, ignore_index=True).iloc[-keep:]
            self._span_chunks[:] = [all_.reset_index(drop=True)]
            self._span_count = len(all_)

    def _maybe_read_trace_parquet(self) -> None:
        """Use trace.parquet when the run converted its trace and trace.jsonl is gone."""
        p = self.run_dir / "trace.parquet"
        if self._streams["trace"].tailer.exists:
            return  # the JSONL trace is being tailed: it holds the same spans
        try:
            st = os.stat(p)
        except OSError:
            return
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._trace_parquet_sig:
            return
        try:
            df = pd.read_parquet(p)
        except Exception:  # noqa: BLE001 - partially written or unreadable: try again later
            return
        self._trace_parquet_sig = sig
        cols = {"actor", "stage", "t0", "t1"}
        if not cols <= set(df.columns):
            return
        if "what" not in df.columns:
            df["what"] = ""
        df = df[["actor", "stage", "what", "t0", "t1"]].astype(
            {"actor": str, "stage": str, "what": str, "t0": float, "t1": float})
        self._clear_spans()
        self._spans_from_parquet = True
        self._add_span_chunk(df)
        self._streams["trace"].version += 1

    # ---------------------------------------------------------------- raw accessors

    @property
    def meta(self) -> dict:
        m = self._meta.get()
        return m if isinstance(m, dict) else {}

    @property
    def status(self) -> dict:
        s = self._status.get()
        return s if isinstance(s, dict) else {}

    @property
    def summary(self) -> dict:
        s = self._summary.get()
        return s if isinstance(s, dict) else {}

    @property
    def config_text(self) -> str | None:
        return self._config.get()

    @property
    def last_metrics(self) -> dict:
        """The last metrics snapshot as written (nested), or {}."""
        return dict(self._metrics_raw_last or {})

    def tiles_plan(self) -> pd.DataFrame:
        """tiles.json as a frame: id, r0, r1, c0, c1, pairs, depth, order (planned position)."""
        def build():
            plan = self._tiles_plan.get()
            cols = ["id", "r0", "r1", "c0", "c1", "pairs", "depth", "order"]
            if not isinstance(plan, list):
                return pd.DataFrame(columns=cols)
            rows = []
            for i, t in enumerate(plan):
                if not isinstance(t, dict) or "id" not in t:
                    continue
                rows.append({"id": _tile_key(t["id"]), "r0": _num(t.get("r0")), "r1": _num(t.get("r1")),
                             "c0": _num(t.get("c0")), "c1": _num(t.get("c1")),
                             "pairs": _num(t.get("pairs")), "depth": _int(t.get("depth")), "order": i})
            return pd.DataFrame(rows, columns=cols)
        return self._cached("plan", self._versions("plan"), build)

    @property
    def started(self) -> float | None:
        s = _num(self.meta.get("started"))
        if s is not None:
            return s
        if self._metrics:
            m = self._metrics[0]
            if m.get("elapsed") is not None:
                return m["t"] - m["elapsed"]
            return m["t"]
        if self._span_count:
            return float(min(c["t0"].min() for c in self._span_chunks))
        return None

    def is_empty(self) -> bool:
        """Nothing of the run exists yet (new or empty directory)."""
        return not (self.meta or self.status or self._metrics or self._done_tiles or self.summary)

    # ---------------------------------------------------------------- overview

    def state(self) -> str:
        st = self.status.get("state")
        if isinstance(st, str) and st:
            return st
        if self.summary:
            return "finished"
        if self.is_empty():
            return WAITING
        return "starting" if not self._metrics else "running"

    def progress(self) -> dict:
        """Done/total counts: tiles, pairs, and any other ``X_done``/``X_total`` counters."""
        meta, last = self.meta, (self._metrics[-1] if self._metrics else {})
        summ = self.summary
        plan = self.tiles_plan()
        out: dict[str, dict] = {}

        tiles_total = _first(last.get("tiles_total"), meta.get("tiles_total"), len(plan) or None)
        pairs_total = _first(last.get("pairs_total"), meta.get("pairs_total"),
                             plan["pairs"].sum() if len(plan) and plan["pairs"].notna().all() else None)
        done_ids = self._done_tiles
        tiles_done = _max(last.get("tiles_done"), len(done_ids) if done_ids else None, summ.get("tiles_done"))
        pairs_jsonl = sum(_num(r.get("pairs")) or 0 for r in done_ids.values()) if done_ids else None
        pairs_done = _max(last.get("pairs_done"), pairs_jsonl, summ.get("pairs_done"))
        out["tiles"] = _prog(tiles_done, tiles_total)
        out["pairs"] = _prog(pairs_done, pairs_total)
        for k in last:
            if k.endswith("_done") and k not in ("tiles_done", "pairs_done"):
                name = k[: -len("_done")]
                out[name] = _prog(last.get(k), last.get(name + "_total"))
        return out

    def throughput(self, window_s: float | None = None) -> dict:
        """Recent and average rates (per second) of pairs and tiles, from the metrics snapshots."""
        window_s = self.eta_window_s if window_s is None else window_s
        m = self._metrics
        res = {"pairs_per_s": None, "tiles_per_s": None, "pairs_per_s_avg": None, "tiles_per_s_avg": None,
               "window_s": None}
        if not m:
            return res
        last = m[-1]
        t_end = last["t"]
        # earliest snapshot within the window (at least the previous one)
        j = len(m) - 1
        while j > 0 and t_end - m[j - 1]["t"] <= window_s:
            j -= 1
        if j == len(m) - 1 and j > 0:
            j -= 1
        first = m[j]
        dt = t_end - first["t"]
        if dt > 0:
            res["window_s"] = dt
            for key in ("pairs", "tiles"):
                a, b = first.get(key + "_done"), last.get(key + "_done")
                if a is not None and b is not None:
                    res[key + "_per_s"] = (b - a) / dt
        el = last.get("elapsed")
        if el:
            for key in ("pairs", "tiles"):
                b = last.get(key + "_done")
                if b is not None:
                    res[key + "_per_s_avg"] = b / el
        return res

    def eta(self) -> float | None:
        """Seconds to completion from recent throughput; 0 when finished, None when unknown."""
        state = self.state()
        prog = self.progress()
        if state == "finished":
            return 0.0
        if state == "failed":
            return None
        thr = self.throughput()
        for key in ("pairs", "tiles"):
            p, rate = prog.get(key, {}), thr.get(key + "_per_s")
            if p.get("done") is None or p.get("total") is None:
                continue
            remaining = p["total"] - p["done"]
            if remaining <= 0:
                return 0.0
            if rate and rate > 0:
                return remaining / rate
            avg = thr.get(key + "_per_s_avg")
            if avg and avg > 0:
                return remaining / avg
        return None

    def r_value(self) -> dict:
        """R so far (summary's R once written, else the latest snapshot's) and its bound."""
        summ, meta = self.summary, self.meta
        last = self._metrics[-1] if self._metrics else {}
        r = _first(summ.get("R"), last.get("R"))
        source = "summary" if summ.get("R") is not None else ("metrics" if last.get("R") is not None else None)
        if r is None:
            loads, n = _num(last.get("loads")), _first(last.get("n_items"), meta.get("n_items"))
            if loads is not None and n:
                r, source = loads / n, "loads/n"
        return {"R": _num(r), "bound_R": _num(_first(meta.get("bound_R"), last.get("bound_R"), summ.get("bound_R"))),
                "source": source, "loads": _num(_first(summ.get("loads"), last.get("loads"))),
                "n_items": _num(_first(last.get("n_items"), meta.get("n_items")))}

    def overview(self) -> dict:
        with self._lock:
            meta, status = self.meta, self.status
            now = self.clock()
            last = self._metrics[-1] if self._metrics else None
            updated = _max(status.get("updated"), last["t"] if last else None)
            state = self.state()
            started = self.started
            finished_at = _num(status.get("finished"))
            if last and last.get("elapsed") is not None:
                elapsed = last["elapsed"]
                if state not in TERMINAL_STATES and not self.is_stale() and last.get("t"):
                    elapsed += max(0.0, now - last["t"])
            elif started is not None:
                elapsed = (finished_at or now) - started
            else:
                elapsed = None
            if state in TERMINAL_STATES and finished_at and started:
                elapsed = finished_at - started
            wall = self.summary.get("wall_s")
            if state == "finished" and wall is not None:
                elapsed = _num(wall)
            return {
                **self.r_value(),
                "run_dir": str(self.run_dir),
                "state": state,
                "error": status.get("error"),
                "kind": meta.get("kind"),
                "app": meta.get("app"),
                "space": meta.get("space"),
                "n_items": _first(meta.get("n_items"), self.r_value()["n_items"]),
                "leaf_items": meta.get("leaf_items"),
                # the planner's choice and the simulated R of every candidate, as the run printed it
                "plan": (meta.get("plan_choice") or {}).get("line") or meta.get("plan"),
                "actors": [a.get("id") for a in meta.get("actors") or [] if isinstance(a, dict)],
                "started": started,
                "updated": updated,
                "age_s": (now - updated) if updated else None,
                "stale": self.is_stale(),
                "elapsed_s": elapsed,
                "progress": self.progress(),
                "throughput": self.throughput(),
                "eta_s": self.eta(),
                "bad_lines": sum(s.tailer.bad_lines for s in self._streams.values()),
            }

    def is_stale(self) -> bool:
        """A run that says it is running but has written nothing for ``stale_after_s``
        (it died without saying so, or this is a copy of an unfinished run)."""
        if self.state() in TERMINAL_STATES or self.is_empty():
            return False
        last_t = _max(self.status.get("updated"), self._metrics[-1]["t"] if self._metrics else None,
                      _num(self.meta.get("started")))
        return last_t is not None and self.clock() - last_t > self.stale_after_s

    # ---------------------------------------------------------------- frames

    def metrics_frame(self) -> pd.DataFrame:
        """One row per snapshot: t, elapsed, sec (since start), tiles_done, pairs_done, loads, R, ..."""
        def build():
            df = pd.DataFrame(self._metrics)
            if df.empty:
                return pd.DataFrame(columns=["t", "sec", "elapsed", "tiles_done", "pairs_done", "R"])
            df["sec"] = df["t"] - (self.started or df["t"].iloc[0])
            return df
        return self._cached("metrics", self._versions("metrics", "meta"), build)

    def actor_series(self, smooth_s: float = 3.0) -> pd.DataFrame:
        """Per actor over time: cumulative tiles/pairs/busy_s and the rates derived from them.

        Columns: sec, actor, tiles, pairs, busy_s, pairs_per_s, tiles_per_s, busy_frac.  Rates are
        differences between snapshots at least ``smooth_s`` apart (smoother than 0.5 s steps).
        Falls back to binning tiles.jsonl when the metrics carry no per-actor counters.
        """
        def build():
            cols = ["sec", "actor", "tiles", "pairs", "busy_s", "pairs_per_s", "tiles_per_s", "busy_frac"]
            start = self.started
            if self._actor_rows:
                df = pd.DataFrame(self._actor_rows).sort_values(["actor", "t"], kind="stable")
                df = df.drop_duplicates(["actor", "t"], keep="last")
                parts = []
                for actor, g in df.groupby("actor", sort=True):
                    g = g.reset_index(drop=True)
                    parts.append(_rates(g, smooth_s))
                out = pd.concat(parts, ignore_index=True)
                out["sec"] = out["t"] - (start if start is not None else out["t"].min())
                return out[cols]
            tiles = self.tiles_done_frame()
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
        return self._cached(("actors", smooth_s), self._versions("metrics", "tiles", "meta"), build)

    def actor_summary(self) -> pd.DataFrame:
        """Per actor: tiles, pairs, busy_s, idle_s, idle_frac, node, device."""
        def build():
            cols = ["actor", "node", "device", "tiles", "pairs", "busy_s", "idle_s", "idle_frac"]
            meta_actors = {str(a.get("id")): a for a in self.meta.get("actors") or [] if isinstance(a, dict)}
            last = self._metrics_raw_last or {}
            elapsed = _num(last.get("elapsed"))
            rows: dict[str, dict] = {}
            for aid, a in (last.get("actors") or {}).items():
                if isinstance(a, dict):
                    busy = _num(a.get("busy_s"))
                    idle = (elapsed - busy) if (elapsed is not None and busy is not None) else None
                    rows[str(aid)] = {"actor": str(aid), "tiles": _num(a.get("tiles")), "pairs": _num(a.get("pairs")),
                                      "busy_s": busy, "idle_s": None if idle is None else max(0.0, idle),
                                      "idle_frac": None if idle is None or not elapsed else max(0.0, idle) / elapsed}
            if not rows and self._done_tiles:
                t = self.tiles_done_frame()
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
        return self._cached("actor_summary", self._versions("metrics", "tiles", "meta"), build)

    def tier_series(self, smooth_s: float = 2.0) -> pd.DataFrame:
        """Long frame: sec, tier, counter (hits, misses, bytes_in, evictions, loads, bytes...), value
        (cumulative), rate (per second over the last ``smooth_s``), and for tiers that count hits and
        misses a pseudo-counter ``hit_ratio`` (value: cumulative ratio, rate: ratio over the window)."""
        def build():
            import numpy as np

            cols = ["sec", "tier", "counter", "value", "rate"]
            if not self._tier_rows:
                return pd.DataFrame(columns=cols)
            df = pd.DataFrame(self._tier_rows)
            df = df.drop_duplicates(["t", "tier", "counter"], keep="last").sort_values(["tier", "counter", "t"])
            parts = []
            for (tier, counter), g in df.groupby(["tier", "counter"], sort=True):
                dv, dt = _window_delta(g["t"], g["value"], smooth_s)
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.where(dt > 0, dv / np.where(dt > 0, dt, 1), np.nan)
                parts.append(g.assign(rate=r))
            for tier, g in df[df["counter"].isin(["hits", "misses"])].groupby("tier"):
                w = g.pivot_table(index="t", columns="counter", values="value", aggfunc="last").dropna()
                if not {"hits", "misses"} <= set(w.columns) or w.empty:
                    continue
                h, m, t = w["hits"].to_numpy(), w["misses"].to_numpy(), w.index.to_numpy()
                dh, _ = _window_delta(t, h, smooth_s)
                dm, _ = _window_delta(t, m, smooth_s)
                with np.errstate(divide="ignore", invalid="ignore"):
                    cum = np.where(h + m > 0, h / np.where(h + m > 0, h + m, 1), np.nan)
                    win = np.where(dh + dm > 0, dh / np.where(dh + dm > 0, dh + dm, 1), np.nan)
                parts.append(pd.DataFrame({"t": t, "tier": tier, "counter": "hit_ratio", "value": cum, "rate": win}))
            out = pd.concat(parts, ignore_index=True)
            out["sec"] = out["t"] - (self.started or out["t"].min())
            return out[cols]
        return self._cached(("tiers", smooth_s), self._versions("metrics", "meta"), build)

    def tier_totals(self) -> pd.DataFrame:
        """Latest cumulative counters per tier with hit ratio: tier, hits, misses, hit_ratio, ..."""
        def build():
            last = self._metrics_raw_last or {}
            tiers = last.get("tiers") or self.summary.get("tiers") or {}
            rows = []
            for tier, c in sorted(tiers.items(), key=lambda kv: (kv[0] == "source", str(kv[0]))):
                if not isinstance(c, dict):
                    continue
                row = {"tier": str(tier)}
                for k, v in c.items():
                    if _num(v) is not None:
                        row[k] = _num(v)
                h, m = row.get("hits"), row.get("misses")
                row["hit_ratio"] = h / (h + m) if h is not None and m is not None and (h + m) > 0 else None
                rows.append(row)
            df = pd.DataFrame(rows)
            first = [c for c in ("tier", "hits", "misses", "hit_ratio", "bytes_in", "evictions", "loads", "bytes")
                     if c in df.columns]
            return df[first + [c for c in df.columns if c not in first]]
        return self._cached("tier_totals", self._versions("metrics", "summary"), build)

    def l3_hops(self) -> pd.DataFrame:
        """The L3 directory's hits per hop, per node, from summary.json (``l3``): node, hop
        (1 = the most recent holder), hits; plus one row per node with hop ``miss`` (items no
        peer handed over: loaded from storage) and ``failed`` (hand-overs that failed). Empty
        when the run had no L3 (or has not finished)."""
        def build():
            cols = ["node", "hop", "hits"]
            l3 = self.summary.get("l3")
            if not isinstance(l3, dict) or not l3.get("enabled"):
                return pd.DataFrame(columns=cols)
            rows = []
            for node, part in sorted((l3.get("nodes") or {}).items()):
                if not isinstance(part, dict):
                    continue
                for k, hits in enumerate(part.get("hits_per_hop") or []):
                    rows.append({"node": str(node), "hop": str(k + 1), "hits": _num(hits)})
                rows.append({"node": str(node), "hop": "miss", "hits": _num(part.get("misses"))})
                rows.append({"node": str(node), "hop": "failed", "hits": _num(part.get("failed"))})
            return pd.DataFrame(rows, columns=cols)
        return self._cached("l3_hops", self._versions("summary"), build)

    def l3_totals(self) -> dict:
        """summary.json's ``l3`` totals: hops, hits_per_hop, hits, misses, failed (or {})."""
        l3 = self.summary.get("l3")
        if not isinstance(l3, dict) or not l3.get("enabled"):
            return {}
        return {k: l3.get(k) for k in ("hops", "hits_per_hop", "hits", "misses", "failed",
                                       "stale", "lookup_calls", "take_calls")}

    def r_series(self) -> pd.DataFrame:
        """sec, R over time (from snapshots; R = loads / n_items when R is absent)."""
        df = self.metrics_frame()
        if df.empty:
            return pd.DataFrame(columns=["sec", "R"])
        if "R" in df.columns and df["R"].notna().any():
            return df[["sec", "R"]].dropna()
        if "loads" in df.columns:
            n = _first(df["n_items"].iloc[-1] if "n_items" in df.columns else None, self.meta.get("n_items"))
            if n:
                return pd.DataFrame({"sec": df["sec"], "R": df["loads"] / n}).dropna()
        return pd.DataFrame(columns=["sec", "R"])

    def stage_totals(self) -> pd.DataFrame:
        """Latest cumulative seconds per stage (from the metrics), in pipeline order."""
        last = (self._metrics_raw_last or {}).get("stage_seconds") or {}
        rows = [{"stage": s, "seconds": _num(last[s])} for s in _stage_order(last) if _num(last[s]) is not None]
        return pd.DataFrame(rows, columns=["stage", "seconds"])

    def tiles_done_frame(self) -> pd.DataFrame:
        """tiles.jsonl deduplicated by tile id (last record wins): id, actor, t_start, t_end, pairs."""
        def build():
            cols = ["id", "actor", "t_start", "t_end", "pairs"]
            rows = [{"id": k, "actor": str(r.get("actor", "?")), "t_start": _num(r.get("t_start")),
                     "t_end": _num(r.get("t_end")), "pairs": _num(r.get("pairs"))}
                    for k, r in self._done_tiles.items()]
            return pd.DataFrame(rows, columns=cols)
        return self._cached("tiles_done", self._versions("tiles"), build)

    def tile_states(self) -> pd.DataFrame:
        """The quadtree leaves with their state, for the matrix view.

        Columns: id, r0, r1, c0, c1, pairs, depth, order, state (done | running | pending),
        actor (who did it / is doing it), t_end, sec_end.  Running tiles come from the optional
        per-actor ``running`` lists in the latest metrics snapshot.  Finished tiles that are not in
        the plan (a plan not written yet) are omitted.
        """
        def build():
            plan = self.tiles_plan().copy()
            done = self.tiles_done_frame()
            running: dict[Any, str] = {}
            last = self._metrics_raw_last or {}
            if self.state() not in TERMINAL_STATES:
                for aid, a in (last.get("actors") or {}).items():
                    if isinstance(a, dict):
                        for tid in a.get("running") or []:
                            running[_tile_key(tid)] = str(aid)
            if plan.empty:
                return plan.assign(state=pd.Series(dtype=str), actor=pd.Series(dtype=str),
                                   t_end=pd.Series(dtype=float), sec_end=pd.Series(dtype=float))
            if not done.empty:
                plan = plan.merge(done[["id", "actor", "t_end"]], on="id", how="left")
            else:
                plan["actor"], plan["t_end"] = None, float("nan")
            is_done = plan["t_end"].notna() | plan["actor"].notna()
            run_actor = plan["id"].map(running)
            plan["state"] = "pending"
            plan.loc[run_actor.notna() & ~is_done, "state"] = "running"
            plan.loc[is_done, "state"] = "done"
            plan["actor"] = plan["actor"].where(is_done, run_actor).fillna("—").astype(str)
            plan["t_end"] = pd.to_numeric(plan["t_end"], errors="coerce")
            start = self.started
            plan["sec_end"] = plan["t_end"] - start if start is not None else float("nan")
            return plan
        return self._cached("tile_states", self._versions("plan", "tiles", "metrics", "status"), build)

    def matrix_bins(self, max_cells_per_side: int = 64) -> pd.DataFrame:
        """The leaves summed into a coarse grid, for a pair space with too many leaves to draw.

        Columns: r0, r1, c0, c1 (bin bounds), leaves, pairs, pairs_done, fraction_done, running.
        A leaf counts in the bin holding its centre."""
        tiles = self.tile_states()
        cols = ["r0", "r1", "c0", "c1", "leaves", "pairs", "pairs_done", "fraction_done", "running"]
        if tiles.empty:
            return pd.DataFrame(columns=cols)
        space = self.meta.get("space") or {}
        n_rows = float(_first(space.get("n_rows"), tiles["r1"].max()))
        n_cols = float(_first(space.get("n_cols"), tiles["c1"].max()))
        import numpy as np

        g = max_cells_per_side
        bh, bw = max(1.0, math.ceil(n_rows / g)), max(1.0, math.ceil(n_cols / g))
        br = np.floor(((tiles["r0"] + tiles["r1"]) / 2) / bh)
        bc = np.floor(((tiles["c0"] + tiles["c1"]) / 2) / bw)
        pairs = tiles["pairs"].fillna(1.0)
        df = pd.DataFrame({"br": br, "bc": bc, "pairs": pairs,
                           "pairs_done": pairs.where(tiles["state"] == "done", 0.0),
                           "running": (tiles["state"] == "running").astype(int)})
        agg = df.groupby(["br", "bc"]).agg(leaves=("pairs", "size"), pairs=("pairs", "sum"),
                                           pairs_done=("pairs_done", "sum"), running=("running", "sum"))
        agg = agg.reset_index()
        agg["r0"], agg["r1"] = agg["br"] * bh, np.minimum((agg["br"] + 1) * bh, n_rows)
        agg["c0"], agg["c1"] = agg["bc"] * bw, np.minimum((agg["bc"] + 1) * bw, n_cols)
        agg["fraction_done"] = (agg["pairs_done"] / agg["pairs"]).where(agg["pairs"] > 0, 0.0)
        return agg[cols]

    def spans(self, window: tuple[float, float] | None = None, max_rows: int | None = 20_000) -> pd.DataFrame:
        """Stage spans for the timeline: actor, stage, what, t0, t1, s0, s1 (seconds since start),
        duration.  ``window=(a, b)`` in seconds since start keeps spans overlapping [a, b]; at most
        ``max_rows`` spans are returned (the most recent)."""
        def build_all():
            cols = ["actor", "stage", "what", "t0", "t1"]
            if not self._span_chunks:
                return pd.DataFrame(columns=cols + ["s0", "s1", "duration"])
            df = pd.concat(self._span_chunks, ignore_index=True) if len(self._span_chunks) > 1 else self._span_chunks[0]
            if len(self._span_chunks) > 1:
                self._span_chunks[:] = [df]  # compact: the next concat is cheap
            df = df.copy()
            origin = self.started if self.started is not None else df["t0"].min()
            df["s0"], df["s1"] = df["t0"] - origin, df["t1"] - origin
            df["duration"] = df["t1"] - df["t0"]
            return df
        with self._lock:
            df = self._cached("spans", self._versions("trace", "meta"), build_all)
        if window is not None and not df.empty:
            a, b = window
            df = df[(df["s1"] >= a) & (df["s0"] <= b)]
        if max_rows is not None and len(df) > max_rows:
            df = df.nlargest(max_rows, "t1")
        return df

    def span_extent(self) -> tuple[float, float] | None:
        df = self.spans(max_rows=None)
        if df.empty:
            return None
        return float(df["s0"].min()), float(df["s1"].max())

    def order_report(self) -> pd.DataFrame:
        """A finished pipeline's orders (summary.json ``order_report``): written, chosen and the
        run as it went, with the cost per event expected and measured; empty before the end."""
        rep = self.summary.get("order_report")
        cols = ["", "order", "expected per event", "measured per event", "events"]
        if not isinstance(rep, dict):
            return pd.DataFrame(columns=cols)
        rows = []
        for key, label in (("written", "written"), ("chosen", "chosen"), ("as_run", "as run")):
            e = rep.get(key)
            if not isinstance(e, dict):
                continue
            order = e.get("order")
            rows.append({"": label,
                         "order": " → ".join(map(str, order)) if order else
                         f"{e.get('orders')} order(s)",
                         "expected per event": format_seconds(e.get("expected_s")),
                         "measured per event": format_seconds(e.get("measured_s")),
                         "events": _num(e.get("events"))})
        return pd.DataFrame(rows, columns=cols)

    def pipeline_frames(self) -> tuple[list[str], pd.DataFrame, pd.DataFrame]:
        """(current operator order, latest per-op table, per-op series over time).

        table columns: position, op, cost_s, pass_rate, records_in; series: sec, op, cost_s,
        pass_rate, records_in."""
        def build():
            cols = ["sec", "op", "cost_s", "pass_rate", "records_in"]
            if not self._pipeline:
                return [], pd.DataFrame(columns=["position"] + cols[1:]), pd.DataFrame(columns=cols)
            rows = []
            for rec in self._pipeline:
                t = _num(rec.get("t"))
                for op, s in (rec.get("ops") or {}).items():
                    if isinstance(s, dict):
                        rows.append({"t": t, "op": str(op), "cost_s": _num(s.get("cost_s")),
                                     "pass_rate": _num(s.get("pass_rate")), "records_in": _num(s.get("records_in"))})
            series = pd.DataFrame(rows, columns=["t", "op", "cost_s", "pass_rate", "records_in"])
            start = self.started
            if start is None and series["t"].notna().any():
                start = series["t"].min()
            series["sec"] = series["t"] - (start or 0.0)
            last = self._pipeline[-1]
            order = [str(o) for o in last.get("order") or []]
            ops = last.get("ops") or {}
            names = order + [o for o in ops if o not in order]
            table = pd.DataFrame([
                {"position": i + 1, "op": o, "cost_s": _num((ops.get(o) or {}).get("cost_s")),
                 "pass_rate": _num((ops.get(o) or {}).get("pass_rate")),
                 "records_in": _num((ops.get(o) or {}).get("records_in"))}
                for i, o in enumerate(names)])
            return order, table, series[cols]
        return self._cached("pipeline", self._versions("pipeline", "meta"), build)

    def has_pipeline(self) -> bool:
        return bool(self._pipeline)

    def farm_frames(self) -> dict:
        """A tool farm's view: per-worker units, busy seconds and throughput, the failed tool
        runs (each attempt, with stderr), the units given up, retries.

        ``workers`` columns: worker, node, units, failed_runs, busy_s, units_per_s (units per
        second of the run so far); ``failed_runs`` columns: unit, worker, attempt, error,
        returncode, stderr; ``given_up``: summary's failures once the run ends, else the units
        whose last run failed with no retry left is not knowable here, so []."""
        def build():
            runs = pd.DataFrame(self._farm)
            wcols = ["worker", "node", "units", "failed_runs", "busy_s", "units_per_s"]
            fcols = ["unit", "worker", "attempt", "error", "returncode", "stderr"]
            if runs.empty or "worker" not in runs:
                workers, failed = pd.DataFrame(columns=wcols), pd.DataFrame(columns=fcols)
            else:
                for c in ("ok", "seconds", "node", "t_end", "attempt", "error", "returncode",
                          "stderr"):
                    if c not in runs:
                        runs[c] = None
                ok = runs["ok"].fillna(False).astype(bool)
                last = self._metrics[-1] if self._metrics else {}
                elapsed = _first(self.summary.get("run_s"), last.get("elapsed"))
                g = runs.groupby("worker")
                workers = pd.DataFrame({
                    "node": g["node"].first(),
                    "units": ok.groupby(runs["worker"]).sum(),
                    "failed_runs": (~ok).groupby(runs["worker"]).sum(),
                    "busy_s": g["seconds"].sum(min_count=1),
                }).reset_index()
                workers["units_per_s"] = workers["units"] / elapsed if elapsed else None
                workers = workers[wcols]
                failed = runs.loc[~ok, [c for c in fcols]].reset_index(drop=True)
            summ = self.summary
            last = self._metrics[-1] if self._metrics else {}
            return {"workers": workers, "failed_runs": failed,
                    "given_up": list(summ.get("failures") or []),
                    "retries": _first(summ.get("retries"), last.get("retries")),
                    "units_failed": _first(summ.get("units_failed"), last.get("units_failed")),
                    "node_bytes": summ.get("node_bytes") or {}}
        return self._cached("farm", self._versions("farm", "metrics", "summary"), build)

    def scheduling_frames(self) -> dict:
        """Hierarchical scheduling of a finished run (summary.json ``scheduling``): totals, a
        row per node (tiles granted by the head, tiles handed out inside the node, round trips
        to the head, steals made and suffered) and the steals in time order with their running
        count. Empty frames before the summary exists or for a run without it."""
        def build():
            sch = self.summary.get("scheduling") or {}
            ncols = ["node", "granted", "local_handouts", "head_round_trips", "steals",
                     "stolen_from"]
            rows = []
            for node, v in sorted((sch.get("per_node") or {}).items()):
                rows.append({"node": node, "granted": _int(v.get("granted")),
                             "local_handouts": _int(v.get("local_handouts")),
                             "head_round_trips": _int(v.get("head_round_trips")),
                             "steals": _int(v.get("steals")),
                             "stolen_from": _int(v.get("stolen_from"))})
            nodes = pd.DataFrame(rows, columns=ncols)
            steals = pd.DataFrame(sch.get("steal_log") or [],
                                  columns=["t", "thief", "victim", "tiles"])
            steals = steals.rename(columns={"t": "sec"}).sort_values("sec").reset_index(drop=True)
            steals["steals_so_far"] = range(1, len(steals) + 1)
            return {"hierarchical": sch.get("hierarchical"), "steals": _int(sch.get("steals")),
                    "local_handouts": _int(sch.get("local_handouts")),
                    "head_round_trips": _int(sch.get("head_round_trips")),
                    "round_trips_per_tile": _num(sch.get("round_trips_per_tile")),
                    "tiles": _int(sch.get("tiles")), "nodes": nodes, "steal_log": steals,
                    "known": bool(sch)}
        return self._cached("scheduling", self._versions("summary"), build)

    def has_farm(self) -> bool:
        return bool(self._farm) or self.meta.get("kind") == "farm"


def _locked(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(self, *a, **kw):
        with self._lock:
            return fn(self, *a, **kw)
    return wrapper


# every public reader takes the view's lock: browser sessions share one view and refresh it
for _name in ("overview", "progress", "throughput", "eta", "r_value", "state", "is_empty", "is_stale",
              "metrics_frame", "actor_series", "actor_summary", "tier_series", "tier_totals", "r_series",
              "stage_totals", "tiles_done_frame", "tile_states", "matrix_bins", "spans",
              "span_extent", "pipeline_frames", "has_pipeline", "tiles_plan"):
    setattr(RunView, _name, _locked(getattr(RunView, _name)))
del _name


# --------------------------------------------------------------------------- small pure helpers


def _tile_key(x: Any) -> Any:
    """Tile ids compare equal whether written as 7 or "7" (JSON writers differ)."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float)) and float(x).is_integer():
        return str(int(x))
    return str(x)


def _first(*xs: Any) -> Any:
    for x in xs:
        if x is not None and not (isinstance(x, float) and math.isnan(x)):
            return x
    return None


def _max(*xs: Any) -> float | None:
    vals = [_num(x) for x in xs]
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def _prog(done: Any, total: Any) -> dict:
    d, t = _num(done), _num(total)
    if d is not None and t is not None and t > 0:
        d = min(d, t)
    frac = (d / t) if (d is not None and t) else None
    return {"done": None if d is None else int(round(d)), "total": None if t is None else int(round(t)),
            "fraction": frac}


def _window_delta(t, v, smooth_s: float):
    """(dv, dt) of cumulative series v(t) against the last sample at least ``smooth_s`` earlier
    (the first sample for early rows); dt = 0 where there is no earlier sample."""
    import numpy as np

    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    j = np.clip(np.searchsorted(t, t - smooth_s, side="right") - 1, 0, None)
    return v - v[j], t - t[j]


def _rates(g: pd.DataFrame, smooth_s: float) -> pd.DataFrame:
    """Rates of one actor's cumulative counters between snapshots >= smooth_s apart."""
    import numpy as np

    out = g.copy()
    for col, rate in (("pairs", "pairs_per_s"), ("tiles", "tiles_per_s"), ("busy_s", "busy_frac")):
        dv, dt = _window_delta(g["t"], g[col], smooth_s)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = dv / dt
        r[dt <= 0] = np.nan
        out[rate] = r
    out["busy_frac"] = out["busy_frac"].clip(lower=0.0, upper=1.0)
    return out


_SHARED: dict[str, RunView] = {}
_SHARED_LOCK = threading.Lock()


def shared_view(run_dir: str | os.PathLike, **kw: Any) -> RunView:
    """The process-wide :class:`RunView` of a run directory (one per resolved path), shared by all
    browser sessions of a dashboard server and pre-filled by dashboard/serve.py at start."""
    key = str(Path(run_dir).expanduser().resolve())
    with _SHARED_LOCK:
        v = _SHARED.get(key)
        if v is None:
            v = _SHARED[key] = RunView(key, **kw)
        return v
