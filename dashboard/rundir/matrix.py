"""The matrix view's data: the pair space's quadtree leaves (tiles.json) and each one's state.

An all-pairs run writes its plan at start and one line per finished tile (tiles.jsonl); a leaf is
*done* once a line names it (the last line wins: a re-run tile counts once, under its last
actor), *running* while the latest snapshot lists it under an actor, else *pending*. A space with
too many leaves to draw one by one is summed into a coarse grid.

Both are held as columns: the plan read as numbers (``read_plan``), the finished tiles' records
appended to typed columns (``DoneTiles``). At 10^6 tiles a list of dicts from tiles.json and a
dict per tiles.jsonl record held ~1 GiB in the dashboard's process and took seconds to build.
"""

from __future__ import annotations

import json
import math
from array import array
from typing import Any

import numpy as np
import pandas as pd

from .base import Reader, locked
from .state import TERMINAL_STATES
from .values import first, int_or_none, num, tile_key

__all__ = ["Matrix", "DoneTiles", "read_plan"]

PLAN_COLUMNS = ["id", "r0", "r1", "c0", "c1", "pairs", "depth", "order"]
_TILE_KEYS = ("id", "r0", "r1", "c0", "c1", "pairs", "depth")  # Tile.to_dict's, in its order


def read_plan(raw: bytes) -> pd.DataFrame:
    """tiles.json (a JSON list of tiles) as the plan frame: id (``tile_key``: a string), r0, r1,
    c0, c1, pairs (floats), depth, order (planned position). A plan written as the engine
    writes it (every tile the same keys, in ``Tile.to_dict``'s order, whole numbers) is read
    as numbers in four passes (``_plan_numbers``), no dict per tile; any other through ``json``.
    Raises ValueError on a file that is not JSON (a half-written one: the caller keeps the
    last good plan)."""
    a = _plan_numbers(raw)
    if a is not None:
        df = pd.DataFrame({"id": pd.Series(list(map(str, a[:, 0].tolist())), dtype=object)})
        for i, k in enumerate(_TILE_KEYS[1:6], start=1):
            df[k] = a[:, i].astype(np.float64)
        df["depth"], df["order"] = a[:, 6], np.arange(len(a))
        return df[PLAN_COLUMNS]
    plan = json.loads(raw)
    rows = []
    for i, t in enumerate(plan if isinstance(plan, list) else []):
        if not isinstance(t, dict) or "id" not in t:
            continue
        rows.append({"id": tile_key(t["id"]), "r0": num(t.get("r0")), "r1": num(t.get("r1")),
                     "c0": num(t.get("c0")), "c1": num(t.get("c1")),
                     "pairs": num(t.get("pairs")), "depth": int_or_none(t.get("depth")),
                     "order": i})
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


_NOT_SKELETON = b"0123456789- \n\r\t"
_DIGITS_ONLY = bytes(b if chr(b) in "0123456789-" else 32 for b in range(256))


def _plan_numbers(raw: bytes) -> np.ndarray | None:
    """(tiles, 7) numbers of a plan that is a JSON list of objects with exactly
    ``_TILE_KEYS``, in order, and whole numbers; else None. Four passes over the text: without
    digits and spaces it must be that object's skeleton n times in a list; with only digits
    and signs it reads as 11 numbers a tile (r0, r1, c0, c1 give their digits 0, 1, 0, 1)."""
    n = raw.count(b"{")
    one = ("{" + ",".join(f'"{k}":' for k in _TILE_KEYS) + "}").encode().translate(
        None, _NOT_SKELETON)
    skeleton = raw.translate(None, _NOT_SKELETON)
    if not n or len(skeleton) != n * (len(one) + 1) + 1 or skeleton[:1] != b"[" or \
            skeleton[-1:] != b"]" or skeleton.count(one) != n or \
            skeleton.count(b"},{") != n - 1:
        return None
    a = np.fromstring(raw.translate(_DIGITS_ONLY), dtype=np.int64, sep=" ")  # noqa: NPY201
    if len(a) != n * 11:
        return None
    a = a.reshape(n, 11)
    if not (a[:, [1, 3, 5, 7]] == [0, 1, 0, 1]).all():
        return None
    return a[:, [0, 2, 4, 6, 8, 9, 10]]


class DoneTiles:
    """tiles.jsonl's records as typed columns, in the order read: id (``tile_key``), actor (a
    number; ``actors`` names them), t_start, t_end, pairs (NaN: none)."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.ids: list[str] = []
        self.actor = array("i")
        self.actors: dict[str, int] = {}
        self.t_start, self.t_end, self.pairs = array("d"), array("d"), array("d")

    def add(self, r: dict) -> None:
        nan = float("nan")
        self.ids.append(tile_key(r["id"]))
        self.actor.append(self.actors.setdefault(str(r.get("actor", "?")), len(self.actors)))
        for col, key in ((self.t_start, "t_start"), (self.t_end, "t_end"), (self.pairs, "pairs")):
            v = num(r.get(key))
            col.append(nan if v is None else v)

    def __len__(self) -> int:
        return len(self.ids)

    def frame(self) -> pd.DataFrame:
        """Deduplicated by id, the last record winning: id, actor, t_start, t_end, pairs."""
        names = np.array(list(self.actors) or ["?"], dtype=object)
        df = pd.DataFrame({"id": pd.Series(self.ids, dtype=object),
                           "actor": names[np.frombuffer(self.actor, np.int32)] if len(self) else
                           pd.Series(dtype=object),
                           "t_start": np.frombuffer(self.t_start, np.float64),
                           "t_end": np.frombuffer(self.t_end, np.float64),
                           "pairs": np.frombuffer(self.pairs, np.float64)})
        return df.drop_duplicates("id", keep="last").reset_index(drop=True)


class Matrix(Reader):
    """tiles.json (the plan) and tiles.jsonl (the finished tiles, by id)."""

    view = "matrix"
    streams = ("tiles",)

    def __init__(self, run):
        super().__init__(run)
        self.done = DoneTiles()  # tiles.jsonl's records

    def ingest(self, stream: str, recs: list[dict]) -> None:
        for r in recs:
            if "id" in r:
                self.done.add(r)

    def clear(self, stream: str) -> None:
        self.done.clear()

    def applies(self, kind: str | None) -> bool:
        return kind == "allpairs" or bool(self.done) or not self.plan().empty

    @locked
    def plan(self) -> pd.DataFrame:
        """tiles.json as a frame: id, r0, r1, c0, c1, pairs, depth, order (planned position)."""
        def build():
            plan = self.run.files["plan"].get()  # read_plan's frame (core.FILES)
            if not isinstance(plan, pd.DataFrame):
                return pd.DataFrame(columns=PLAN_COLUMNS)
            return plan
        return self.cached("plan", ("plan",), build)

    @locked
    def done_frame(self) -> pd.DataFrame:
        """tiles.jsonl deduplicated by tile id (last record wins): id, actor, t_start, t_end, pairs."""
        def build():
            return self.done.frame()
        return self.cached("done", ("tiles",), build)

    @locked
    def tile_states(self) -> pd.DataFrame:
        """The quadtree leaves with their state, for the matrix view.

        Columns: id, r0, r1, c0, c1, pairs, depth, order, state (done | running | pending),
        actor (who did it / is doing it), t_end, sec_end.  Running tiles come from the optional
        per-actor ``running`` lists in the latest metrics snapshot.  Finished tiles that are not in
        the plan (a plan not written yet) are omitted.
        """
        def build():
            plan = self.plan().copy()
            done = self.done_frame()
            running: dict[Any, str] = {}
            last = self.run.snapshots.raw_last or {}
            if self.run.state() not in TERMINAL_STATES:
                for aid, a in (last.get("actors") or {}).items():
                    if isinstance(a, dict):
                        for tid in a.get("running") or []:
                            running[tile_key(tid)] = str(aid)
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
            start = self.run.started
            plan["sec_end"] = plan["t_end"] - start if start is not None else float("nan")
            return plan
        return self.cached("tile_states", ("plan", "tiles", "metrics", "status"), build)

    @locked
    def bins(self, max_cells_per_side: int = 64) -> pd.DataFrame:
        """The leaves summed into a coarse grid, for a pair space with too many leaves to draw.

        Columns: r0, r1, c0, c1 (bin bounds), leaves, pairs, pairs_done, fraction_done, running.
        A leaf counts in the bin holding its centre."""
        tiles = self.tile_states()
        cols = ["r0", "r1", "c0", "c1", "leaves", "pairs", "pairs_done", "fraction_done", "running"]
        if tiles.empty:
            return pd.DataFrame(columns=cols)
        space = self.run.meta.get("space") or {}
        n_rows = float(first(space.get("n_rows"), tiles["r1"].max()))
        n_cols = float(first(space.get("n_cols"), tiles["c1"].max()))
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
