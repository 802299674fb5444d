"""The matrix view's data as columns (issue 58 part 3): the plan read as numbers and the finished
tiles as typed columns give the frames a reader building a dict per tile gives (the oracle
here: ``json`` and plain dicts), for plans written as the engine writes them and otherwise."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest

from pairflow.dashboard.rundir.matrix import PLAN_COLUMNS, DoneTiles, read_plan


def oracle_plan(raw: bytes) -> pd.DataFrame:
    rows = []
    for i, t in enumerate(json.loads(raw)):
        if not isinstance(t, dict) or "id" not in t:
            continue

        def f(x):
            return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) \
                and math.isfinite(x) else None
        tid = t["id"]
        key = str(int(tid)) if isinstance(tid, (int, float)) and not isinstance(tid, bool) \
            and float(tid).is_integer() else str(tid)
        depth = t.get("depth")
        rows.append({"id": key, "r0": f(t.get("r0")), "r1": f(t.get("r1")), "c0": f(t.get("c0")),
                     "c1": f(t.get("c1")), "pairs": f(t.get("pairs")),
                     "depth": int(depth) if f(depth) is not None else None, "order": i})
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def tiles(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        r0, c0 = rng.randrange(10 ** 6), rng.randrange(10 ** 6)
        out.append({"id": rng.randrange(10 ** 7), "r0": r0, "r1": r0 + 2, "c0": c0,
                    "c1": c0 + 2, "pairs": rng.randrange(5), "depth": rng.randrange(3)})
    return out


def same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) == PLAN_COLUMNS
    assert a["id"].tolist() == b["id"].tolist()
    for c in ("r0", "r1", "c0", "c1", "pairs", "depth", "order"):
        np.testing.assert_array_equal(pd.to_numeric(a[c]).to_numpy(float),
                                      pd.to_numeric(b[c]).to_numpy(float))


@pytest.mark.parametrize("seed", range(4))
def test_a_plan_as_the_engine_writes_it_reads_as_json_reads_it(seed):
    rng = random.Random(seed)
    plan = tiles(rng, rng.randrange(0, 300))
    for raw in (json.dumps(plan).encode(),  # as json.dump writes it
                ("[\n" + ",\n".join(json.dumps(t, separators=(",", ":")) for t in plan)
                 + "\n]\n").encode()):  # as the engine's write_json_rows does
        same(read_plan(raw), oracle_plan(raw))


@pytest.mark.parametrize("change", ["string id", "key order", "float", "extra key", "no depth",
                                    "null", "not a dict"])
def test_any_other_plan_reads_as_json_reads_it(change):
    plan = tiles(random.Random(9), 40)
    if change == "string id":
        plan[3]["id"] = "tile-3"
    elif change == "key order":
        plan = [dict(reversed(list(t.items()))) for t in plan]
    elif change == "float":
        plan[5]["pairs"] = 2.5
    elif change == "extra key":
        plan[7]["weight"] = 3
    elif change == "no depth":
        del plan[2]["depth"]
    elif change == "null":
        plan[1]["r0"] = None
    else:
        plan.insert(4, [1, 2])
    raw = json.dumps(plan).encode()
    same(read_plan(raw), oracle_plan(raw))


def test_a_half_written_plan_is_refused():
    raw = json.dumps(tiles(random.Random(1), 10)).encode()
    with pytest.raises(ValueError):
        read_plan(raw[: len(raw) // 2])


def test_finished_tiles_by_id_the_last_record_winning():
    rng = random.Random(2)
    recs = []
    for _ in range(500):
        r = {"id": rng.choice([rng.randrange(60), str(rng.randrange(60))]),
             "actor": rng.choice(["dev-0", "dev-1", "node-1/dev-0"]),
             "t_start": rng.random(), "t_end": rng.choice([rng.random(), None]),
             "pairs": rng.choice([rng.randrange(9), None, "x"])}
        recs.append(r)
    done = DoneTiles()
    for r in recs:
        done.add(r)
    last = {}
    for r in recs:  # the oracle: a dict by id as "7" and 7 name the same tile
        last.pop(str(r["id"]), None)
        last[str(r["id"])] = r
    got = done.frame()
    assert got["id"].tolist() == sorted(last, key=lambda k: max(
        i for i, r in enumerate(recs) if str(r["id"]) == k))
    for _, row in got.iterrows():
        r = last[row["id"]]
        assert row["actor"] == r["actor"]
        for k in ("t_start", "t_end", "pairs"):
            v = r[k] if isinstance(r[k], (int, float)) else None
            assert (math.isnan(row[k]) if v is None else row[k] == v)
