"""The journal: what a run has safely written, and the only thing a resume trusts.

One append-only JSON Lines file (``journal.jsonl`` in the run directory). Every finished tile adds
one line per sink entry, ``{"tile", "actor", "sink", "location"[, "region"], "length",
"crc32"}``: where the sink wrote, how many bytes, and the CRC32 of those bytes (``sink_entry``
builds the sink's part, so the format lives here only). Lines are written and flushed per tile, so
a killed process loses nothing the OS has; a background thread fsyncs at most every
``fsync_s`` while appends happen, so a machine crash loses at most that long of journal and the
hand-out path never waits for the disk.

A resume replays the journal (``replay``): the last entry per tile, sink and location counts, a
tile is done when every sink has an entry for it and each still verifies against its CRC (the
sinks read back what they wrote), and everything else is recomputed. A truncated last line (a
writer killed mid-append) is ignored, and so is a line that does not parse. The journal is read
once, as columns (``JournalIndex``: Arrow's JSON reader a block at a time), so a resume of 10^6
tiles replays in seconds and holds arrays, never a dict per line. ``check_same_work`` refuses a
resume that would compute something else than the run it continues.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Iterable, Mapping

import numpy as np

from ..errors import PairflowError
from .rundir import JsonlWriter, read_jsonl


def sink_entry(sink: str, location: str, length: int, crc32: int,
               region: list[int] | None = None) -> dict:
    """A sink's part of a journal line: ``region`` ([r0, r1, c0, c1]) for sinks that write
    into a shared array, none for sinks that write a file per tile."""
    entry = {"sink": sink, "location": location}
    if region is not None:
        entry["region"] = list(region)
    entry.update(length=int(length), crc32=int(crc32) & 0xFFFFFFFF)
    return entry


class JournalWriter:
    """Appends tiles' entries, flushed per tile, fsynced in the background."""

    def __init__(self, path: str, fsync_s: float = 1.0):
        self.out = JsonlWriter(path)
        self.fsync_s = fsync_s
        self.append_seconds = 0.0  # on the caller's path: what the journal adds to a run
        self.fsync_seconds = 0.0   # in the background thread
        self._dirty = threading.Event()  # appended since the last fsync
        self._closing = threading.Event()
        self._fsyncer = threading.Thread(target=self._fsync_loop, daemon=True,
                                         name="journal-fsync")
        self._fsyncer.start()

    def append(self, tile: int, actor: str, entries: Iterable[dict]) -> None:
        t0 = time.perf_counter()
        self.out.write([{"tile": tile, "actor": actor, **e} for e in entries])
        self._dirty.set()
        self.append_seconds += time.perf_counter() - t0

    def _fsync_loop(self) -> None:
        # an fsync can wait for the disk, and on ext4 for other files' data: never on the
        # hand-out path
        while not self._closing.wait(self.fsync_s):
            if self._dirty.is_set():
                self._dirty.clear()
                t0 = time.perf_counter()
                try:
                    os.fsync(self.out.fh.fileno())
                except (OSError, ValueError):  # closed under us at the end of the run
                    return
                self.fsync_seconds += time.perf_counter() - t0

    def close(self) -> None:
        """Stop the background thread, fsync what is left and close the file."""
        self._closing.set()
        self._fsyncer.join()
        t0 = time.perf_counter()
        os.fsync(self.out.fh.fileno())
        self.out.close()
        self.append_seconds += time.perf_counter() - t0


def read_entries(path: str) -> list[dict]:
    """Every complete line of a journal (a partial last line is ignored)."""
    return read_jsonl(path)


#: the journal is read in blocks of about this many bytes (whole lines): memory stays a few
#: blocks and the columns, whatever the journal's length
BLOCK_BYTES = 8 << 20
#: a journal smaller than this is read line by line: importing Arrow costs more than it saves
ARROW_MIN_BYTES = 4 << 20
_FIELDS = ("tile", "sink", "location", "region", "length", "crc32")


def _blocks(path: str):
    """The journal's complete lines, in blocks of whole lines (a partial last line, a writer
    killed mid-append, is left out)."""
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        rest = b""
        while True:
            raw = fh.read(BLOCK_BYTES)
            if not raw:
                return
            raw = rest + raw
            cut = raw.rfind(b"\n") + 1
            rest = raw[cut:]
            if cut:
                yield raw[:cut]


def _lines(path: str):
    """(line number, parsed entry) of every complete line that parses, streamed."""
    no = 0
    for block in _blocks(path):
        for line in block.splitlines():
            e = _entry(line)
            if e is not None:
                yield no, e
            no += 1


def _entry(line: bytes) -> dict | None:
    try:
        e = json.loads(line)
    except ValueError:
        return None
    return e if isinstance(e, dict) and "tile" in e and "sink" in e else None


def _arrow_block(block: bytes) -> dict | None:
    """A block's entries as columns, parsed by Arrow's JSON reader (C++: a journal of 10^6
    tiles in seconds, where ``json.loads`` per line took most of a minute). None when Arrow
    refuses the block (a damaged line, a value of another type): the block is then read line
    by line, and a line that does not parse costs only itself."""
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    schema = pa.schema([("tile", pa.int64()), ("sink", pa.string()), ("location", pa.string()),
                        ("region", pa.list_(pa.int64())), ("length", pa.int64()),
                        ("crc32", pa.int64())])
    try:
        t = pj.read_json(pa.BufferReader(block), read_options=pj.ReadOptions(
            block_size=len(block) + 1, use_threads=False), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, ValueError):
        return None
    cols = {f: t[f].combine_chunks() for f in _FIELDS}
    keep = _valid(cols["tile"]) & _valid(cols["sink"])
    region = _regions(cols["region"])
    if region is None:  # a region of another shape: the lines decide
        return None
    return {"tile": _ints(cols["tile"], 0), "sink": _codes(cols["sink"]),
            "location": _codes(cols["location"]), "region": region,
            "length": _ints(cols["length"], -1), "crc32": _ints(cols["crc32"], -1),
            "keep": keep}


# Arrow arrays read through their buffers: Arrow's compute functions and ``to_numpy`` import
# pandas (a second of a resume's start, and its memory), which nothing else here needs.

def _valid(arr) -> np.ndarray:
    if not arr.null_count:
        return np.ones(len(arr), bool)
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].astype(bool)


def _ints(arr, fill: int) -> np.ndarray:
    """An int64 column, nulls as ``fill``."""
    if arr.null_count == len(arr):
        return np.full(len(arr), fill, np.int64)
    vals = np.frombuffer(arr.buffers()[1], np.int64, len(arr), arr.offset * 8)
    return np.where(_valid(arr), vals, fill) if arr.null_count else vals.copy()


def _regions(arr) -> np.ndarray | None:
    """A list<int64> column as (rows, 4), -1s where a row has none; None when some row has
    another length or a null inside."""
    n = len(arr)
    out = np.full((n, 4), -1, np.int64)
    if not n or arr.null_count == n or arr.values is None or not len(arr.values):
        return out if not n or arr.null_count == n or not np.any(
            np.diff(np.frombuffer(arr.buffers()[1], np.int32, n + 1, arr.offset * 4))) \
            else None
    offsets = np.frombuffer(arr.buffers()[1], np.int32, n + 1, arr.offset * 4)
    lens = np.diff(offsets) * _valid(arr)
    values = arr.values
    if values.null_count or ((lens != 4) & (lens != 0)).any():
        return None
    flat = np.frombuffer(values.buffers()[1], np.int64, len(values), values.offset * 8)
    four = np.flatnonzero(lens == 4)
    out[four] = flat[offsets[four][:, None] + np.arange(4)]
    return out


def _codes(arr) -> tuple[np.ndarray, list]:
    """A string column as (codes, values): ``values[codes[i]]`` is row i's (None: null).
    Rows are grouped by their bytes (a journal names a few sinks and locations)."""
    n = len(arr)
    values: list = []
    codes = np.zeros(n, np.int64)
    valid = _valid(arr)
    if n and valid.any():
        offsets = np.frombuffer(arr.buffers()[1], np.int32, n + 1, arr.offset * 4)
        data = np.frombuffer(arr.buffers()[2] or b"", np.uint8)
        lens = np.diff(offsets)
        for length in np.unique(lens[valid]).tolist():
            rows = np.flatnonzero(valid & (lens == length))
            text = data[offsets[rows][:, None] + np.arange(length)]
            if (text == text[0]).all():  # one value (the usual case): no sort
                uniq, inverse = text[:1], np.zeros(len(rows), np.int64)
            else:
                uniq, inverse = np.unique(text, axis=0, return_inverse=True)
            codes[rows] = len(values) + inverse.reshape(-1)
            values.extend(bytes(u).decode() for u in uniq)
    codes[~valid] = len(values)
    return codes, values + [None]


def _python_block(block: bytes) -> dict:
    """A block's entries as columns, line by line (what Arrow refused)."""
    cols = {f: [] for f in _FIELDS}
    keep = []
    for line in block.splitlines():
        e = _entry(line)
        try:
            tile = int(e["tile"]) if e is not None else 0
        except (TypeError, ValueError):
            e = None
        keep.append(e is not None)
        e = {**e, "tile": tile} if e is not None else {}
        r = e.get("region")
        ok = isinstance(r, (list, tuple)) and len(r) == 4
        for f, v in (("tile", e.get("tile", 0)), ("sink", e.get("sink")),
                     ("location", e.get("location")),
                     ("region", [int(x) for x in r] if ok else [-1] * 4),
                     ("length", e.get("length", -1)), ("crc32", e.get("crc32", -1))):
            cols[f].append(v)
    sink, loc = (_list_codes(cols[f]) for f in ("sink", "location"))
    return {"tile": np.asarray(cols["tile"], np.int64).reshape(-1),
            "sink": sink, "location": loc,
            "region": np.asarray(cols["region"], np.int64).reshape(-1, 4),
            "length": np.asarray(cols["length"], np.int64).reshape(-1),
            "crc32": np.asarray(cols["crc32"], np.int64).reshape(-1),
            "keep": np.asarray(keep, bool).reshape(-1)}


def _list_codes(values: list) -> tuple[np.ndarray, list]:
    """``_codes`` of a list of values."""
    seen: dict = {}
    codes = np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values))
    return codes, list(seen)


class Entries:
    """Some journal lines as columns: tile, (sink, location), region (-1s: none), length and
    CRC32; what a sink's ``verify_many`` reads, and ``entry(i)`` a line as its dict (a sink
    that verifies one entry at a time)."""

    def __init__(self, tile, sink, location, region, length, crc32):
        self.tile, self.sink, self.location = tile, sink, location
        self.region, self.length, self.crc32 = region, length, crc32

    def __len__(self) -> int:
        return len(self.tile)

    def entry(self, i: int) -> dict:
        e = {"tile": int(self.tile[i]), "sink": self.sink[i], "location": self.location[i]}
        if self.region[i, 0] >= 0:
            e["region"] = self.region[i].tolist()
        e.update(length=int(self.length[i]), crc32=int(self.crc32[i]))
        return e


class JournalIndex:
    """The journal as arrays, one row per complete line, read once (Arrow's JSON reader, a
    block at a time; line by line only where it refuses a block): its tile, its (sink,
    location) key, its row (the order lines were written) and what a verify reads (region,
    length, CRC32). ``last`` keeps the rows a resume trusts (the last per tile, sink and
    location). At 10^6 tiles a few tens of MiB, not a dict per line, and seconds, not the
    minute that parsing each line with ``json`` took."""

    def __init__(self, path: str):
        self.path = path
        keys: dict[tuple, int] = {}
        parts: dict[str, list] = {f: [] for f in ("tile", "key", "region", "length", "crc32")}
        try:
            arrow = os.path.getsize(path) >= ARROW_MIN_BYTES
        except OSError:
            arrow = False
        for block in _blocks(path):
            cols = _arrow_block(block) if arrow else None
            if cols is None:
                cols = _python_block(block)
            keep = cols["keep"]
            # the (sink, location) pairs of the block, numbered run-wide
            (sc, sv), (lc, lv) = cols["sink"], cols["location"]
            pair, inverse = np.unique(sc[keep] * len(lv) + lc[keep], return_inverse=True)
            number = np.array([keys.setdefault((sv[p // len(lv)], lv[p % len(lv)]), len(keys))
                               for p in pair.tolist()], np.int64)
            ids = np.full(len(keep), -1, np.int64)
            ids[keep] = number[inverse.reshape(-1)] if len(pair) else -1
            parts["tile"].append(cols["tile"][keep])
            parts["key"].append(ids[keep])
            for f in ("region", "length", "crc32"):
                parts[f].append(cols[f][keep])
        if arrow:  # Arrow's allocator keeps what the blocks used (~60 MiB at 400k tiles)
            import pyarrow as pa
            pa.default_memory_pool().release_unused()
        self.keys = list(keys)  # key id -> (sink, location)
        cat = {f: (np.concatenate(v) if v else None) for f, v in parts.items()}
        n = len(cat["tile"]) if cat["tile"] is not None else 0
        self.tile = cat["tile"] if n else np.zeros(0, np.int64)
        self.key = cat["key"] if n else np.zeros(0, np.int64)
        self.region = cat["region"] if n else np.zeros((0, 4), np.int64)
        self.length = cat["length"] if n else np.zeros(0, np.int64)
        self.crc32 = cat["crc32"] if n else np.zeros(0, np.int64)
        self.line = np.arange(n, dtype=np.int64)  # the order they were written

    def tiles(self) -> np.ndarray:
        """Every tile the journal names, ascending, once."""
        return np.unique(self.tile)

    def last(self) -> np.ndarray:
        """Row indices of the last entry per (tile, key), sorted by tile then key."""
        if not len(self.tile):
            return np.zeros(0, np.int64)
        order = np.lexsort((self.line, self.key, self.tile))
        t, k = self.tile[order], self.key[order]
        end = np.ones(len(order), bool)
        end[:-1] = (t[1:] != t[:-1]) | (k[1:] != k[:-1])
        return order[end]

    def entries(self, rows: np.ndarray) -> Entries:
        """The rows ``rows`` as ``Entries``."""
        k = self.key[rows].tolist()
        return Entries(self.tile[rows], [self.keys[i][0] for i in k],
                       [self.keys[i][1] for i in k], self.region[rows], self.length[rows],
                       self.crc32[rows])


def tiles_journaled(path: str) -> int:
    return len(JournalIndex(path).tiles())


def _verify(sink, entries: Entries) -> np.ndarray:
    """Which of ``entries`` still read back with their CRC: all at once where the sink can
    (``verify_many``: a dense sink's staged tiles are matched as arrays), else one by one."""
    many = getattr(sink, "verify_many", None)
    if many is not None:
        return np.asarray(many(entries), bool)
    return np.fromiter((bool(sink.verify(entries.entry(i))) for i in range(len(entries))),
                       bool, len(entries))


def replay(path: str, sinks: Mapping[str, object], n_tiles: int) -> tuple[list[int], dict]:
    """Tiles whose every sink entry still verifies (CRC), and a report of what a resume does.

    ``sinks``: name -> an object with ``verify(entry) -> bool`` (the run's open sinks; with
    ``verify_many(entries) -> bools`` too where it checks many at once). The last entry per
    tile, sink and location counts: a tile written again after a repair supersedes its first
    write. Reads the journal once (``JournalIndex``), so its memory is a few arrays whatever
    the number of tiles."""
    index = JournalIndex(path)
    rows = index.last()
    tiles, keys = index.tile[rows], index.key[rows]
    starts = np.flatnonzero(np.r_[True, tiles[1:] != tiles[:-1]]) if len(rows) else \
        np.zeros(0, np.int64)
    # a tile is complete when every sink of the run has an entry for it
    complete = np.ones(len(starts), bool)
    for name in sinks:
        has = np.isin(keys, [i for i, k in enumerate(index.keys) if k[0] == name])
        complete &= np.maximum.reduceat(has, starts) if len(rows) else complete
    ok = np.repeat(complete, np.diff(np.r_[starts, len(rows)]))  # rows worth verifying
    for name, sink in sinks.items():  # the kept entries of complete tiles, sink by sink
        mine = np.isin(keys, [i for i, k in enumerate(index.keys) if k[0] == name])
        sel = np.flatnonzero(ok & mine)
        if len(sel):
            ok[sel] = _verify(sink, index.entries(rows[sel]))
    done: list[int] = []
    corrupt: list[int] = []
    if len(rows):  # a tile is done when it is complete and all its kept entries verify
        tile_ok = np.minimum.reduceat(ok, starts) & complete
        done, corrupt = tiles[starts][tile_ok].tolist(), tiles[starts][~tile_ok].tolist()
    report = {"reused": len(done), "repaired": len(corrupt),
              "recomputed": n_tiles - len(done) - len(corrupt), "corrupt_tiles": corrupt}
    return done, report


def check_same_work(run_dir: str, old: dict, new: dict) -> None:
    """Refuse to resume when anything that decides the results differs; say what.

    ``old``/``new``: the fingerprints of the journaled run and of the run asked for
    (``BasePairApp.fingerprint``); ``"inputs"`` maps each input to its sha256."""
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and key == "inputs":
            for u in sorted(set(a) | set(b)):
                if u not in a:
                    diffs.append(f"input {u} was added")
                elif u not in b:
                    diffs.append(f"input {u} was removed")
                elif a[u] != b[u]:
                    diffs.append(f"input {u} changed (sha256 {a[u][:12]}.. -> {b[u][:12]}..)")
        else:
            diffs.append(f"{key}: {a!r} -> {b!r}")
    if diffs:
        raise PairflowError(f"cannot resume {run_dir}: the run would compute something else: "
                            + "; ".join(diffs))
