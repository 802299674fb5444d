"""Compact tile bookkeeping (issue 58, part 3): the leaf grid cut from arrays, the tiles as
columns, and the tile policy's integer indexes, each against a brute-force oracle written here
from the definitions (every wanted pair in one tile; a tile's items; an item's next use)."""
from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.plan import tile_index
from pairflow.engine.pairs.plan.policy import TilePolicy
from pairflow.engine.pairs.space import Rectangle, Tile, TileArray, Triangle, leaves


def _z(br: int, bc: int) -> int:
    """Morton code, row bit above column bit (the quadtree's TL, TR, BL, BR order)."""
    code = 0
    for bit in range(32):
        code |= ((br >> bit) & 1) << (2 * bit + 1) | ((bc >> bit) & 1) << (2 * bit)
    return code


def _oracle_tiles(n_rows, n_cols, leaf, tri):
    out = []
    for br in range(-(-n_rows // leaf)):
        for bc in range(-(-n_cols // leaf)):
            r0, c0 = br * leaf, bc * leaf
            r1, c1 = min(r0 + leaf, n_rows), min(c0 + leaf, n_cols)
            pairs = sum(1 for i in range(r0, r1) for j in range(c0, c1) if not tri or i < j)
            if pairs:
                out.append((_z(br, bc), r0, r1, c0, c1, pairs))
    return [t[1:] for t in sorted(out)]


@pytest.mark.parametrize("space", [Triangle(0), Triangle(1), Triangle(2), Triangle(13),
                                   Triangle(40), Rectangle(7, 30), Rectangle(25, 3),
                                   Rectangle(16, 16)])
@pytest.mark.parametrize("leaf", [1, 2, 3, 7, 64])
def test_grid_leaves_are_every_block_with_a_pair_in_z_order(space, leaf):
    tri = isinstance(space, Triangle)
    tiles = leaves(space, leaf)
    assert isinstance(tiles, TileArray)
    want = _oracle_tiles(space.n_rows, space.n_cols, leaf, tri)
    assert [(t.r0, t.r1, t.c0, t.c1, t.pairs) for t in tiles] == want
    assert [t.id for t in tiles] == list(range(len(want)))
    side, depth = leaf, 0
    while side < max(space.n_rows, space.n_cols, 1):
        side, depth = side * 2, depth + 1
    assert all(t.depth == depth for t in tiles)


def test_tile_array_indexes_slices_pickles_and_reads_dicts():
    tiles = leaves(Triangle(20), 3)
    again = pickle.loads(pickle.dumps(tiles))
    assert again == tiles and list(again) == list(tiles)
    t = tiles[5]
    assert isinstance(t, Tile) and t.to_dict() == dict(zip(TileArray.FIELDS, tiles.a[5].tolist()))
    assert list(tiles[2:4]) == [tiles[2], tiles[3]]
    assert TileArray.of([x.to_dict() for x in tiles]) == tiles
    assert TileArray.of(list(tiles)) == tiles
    assert list(tiles.to_dicts([3, 1])) == [tiles[3].to_dict(), tiles[1].to_dict()]


@pytest.mark.parametrize("as_lists", [True, False])
def test_policy_indexes_match_brute_force(monkeypatch, as_lists):
    """The tile's items and each item's next use, as the CSR arrays (``as_lists`` False) and as
    lists, against sets and scans over the plan, through hand-outs, requeues and completions."""
    monkeypatch.setattr(tile_index, "LIST_ENTRIES", 1 << 30 if as_lists else 0)
    rng = random.Random(3)
    for space, items, leaf in [(Triangle(23), ItemMap.shared(23), 3),
                               (Rectangle(9, 14), ItemMap.disjoint(9, 14), 2)]:
        tiles = leaves(space, leaf)
        order = list(range(len(tiles)))
        rng.shuffle(order)
        pol = TilePolicy(tiles, items, order, window=4)
        need = [sorted(set(items.row_items[t.r0:t.r1].tolist())
                       | set(items.col_items[t.c0:t.c1].tolist())) for t in tiles]
        assert [list(pol.tile_items[t]) for t in range(len(tiles))] == need
        handed = set()
        for _ in range(4 * len(tiles)):
            r = rng.random()
            if r < 0.5:
                t = pol.next_tile(set(), set())
                if t is not None:
                    handed.add(t)
            elif r < 0.7 and handed - {t for t in handed if pol.done[t]}:
                t = rng.choice(sorted(t for t in handed if not pol.done[t]))
                pol.requeue(t)
                handed.discard(t)
            elif handed:
                t = rng.choice(sorted(handed))
                pol.complete(t)
            for item in range(items.n_items + 1):
                uses = [pos for pos, t in enumerate(order)
                        if item in need[t] and t not in handed]
                assert pol.next_use(item) == (float(uses[0]) if uses else float("inf"))


def test_a_saved_plan_reads_back_as_numbers_in_either_layout(tmp_path):
    """tiles.json as the driver writes it (compact) and as json.dump(indent=1) wrote it, in
    plan order; a file whose keys come in another order is read through json."""
    import json

    from pairflow.engine.run.rundir import write_json_rows
    tiles = leaves(Triangle(50), 3)
    order = list(range(len(tiles)))[::-1]
    compact, indented, other = (str(tmp_path / f) for f in ("a.json", "b.json", "c.json"))
    write_json_rows(compact, tiles.to_json(order))
    with open(indented, "w") as fh:
        json.dump([tiles[t].to_dict() for t in order], fh, indent=1)
    want = [tiles[t] for t in order]
    assert list(TileArray.read_json(compact)) == want
    assert list(TileArray.read_json(indented)) == want
    with open(other, "w") as fh:
        json.dump([{"r0": 1, "id": 0, "r1": 2, "c0": 3, "c1": 4, "pairs": 1, "depth": 0}], fh)
    assert list(TileArray.read_json(other)) == [Tile(0, 1, 2, 3, 4, 1, 0)]
    assert TileArray.read_json(str(tmp_path / "missing.json")) is None


@pytest.mark.parametrize("change", ["none", "spaces", "negative", "float", "null", "key order",
                                    "swapped r0 r1 keys", "extra key", "missing key",
                                    "truncated", "no list", "empty"])
def test_a_plan_reads_as_json_reads_it_or_not_at_all(tmp_path, change):
    """``read_json``'s one-pass reading gives what ``json`` gives, tile by tile, for plans as
    the engine writes them and for any other text: another shape goes through ``json`` (and
    a file ``json`` cannot read gives None)."""
    import json
    rng = random.Random(change)
    tiles = [{"id": i, "r0": rng.randrange(99), "r1": rng.randrange(99), "c0": rng.randrange(99),
              "c1": rng.randrange(99), "pairs": rng.randrange(9), "depth": rng.randrange(4)}
             for i in range(50)]
    text = "[\n" + ",\n".join(json.dumps(t, separators=(",", ":")) for t in tiles) + "\n]\n"
    if change == "spaces":
        text = json.dumps(tiles, indent=3)
    elif change == "negative":
        text = text.replace('"depth":1', '"depth":-1')
    elif change == "float":
        text = text.replace('"pairs":3', '"pairs":3.0')
    elif change == "null":
        text = text.replace('"pairs":3', '"pairs":null', 1)
    elif change == "key order":
        text = text.replace('"id":7,', '').replace('"depth"', '"id":7,"depth"', 1)
    elif change == "swapped r0 r1 keys":
        text = text.replace('"r0":', '"rX":').replace('"r1":', '"r0":').replace('"rX":', '"r1":')
    elif change == "extra key":
        text = text.replace('"depth"', '"w":1,"depth"', 1)
    elif change == "missing key":
        text = text.replace('"pairs":', '"pair":', 1)
    elif change == "truncated":
        text = text[: text.rfind("}") + 1]
    elif change == "no list":
        text = text.replace("[", "", 1)
    elif change == "empty":
        text = "[]"
    path = tmp_path / "tiles.json"
    path.write_text(text)
    try:
        want = [Tile(**{k: int(t.get(k, 0)) for k in Tile.__dataclass_fields__})
                for t in json.loads(text)]  # (a value that is no number: no plan)
    except (ValueError, TypeError):
        want = None
    got = TileArray.read_json(str(path))
    if want is None:
        assert got is None
    else:
        assert got is not None and list(got) == want


@pytest.mark.parametrize("maps", ["identity", "disjoint", "shuffled", "repeated"])
@pytest.mark.parametrize("block", [16, 1 << 23])
def test_tile_items_are_each_tiles_items_sorted_once(monkeypatch, maps, block):
    """``_tile_items_csr`` against a set union per tile, for tiles whose row and column ranges
    overlap, touch or lie apart either way round, and item maps that increase (the sort of a
    tile is skipped when its parts are in order) or not (every tile sorted); in blocks of
    tiles or at once."""
    monkeypatch.setattr(tile_index, "BUILD_ENTRIES", block)
    rng = np.random.default_rng(len(maps))
    n = 60
    rows = np.arange(n)
    cols = {"identity": np.arange(n), "disjoint": np.arange(n) + n,
            "shuffled": rng.permutation(n), "repeated": np.arange(n) // 3}[maps]
    r0 = rng.integers(0, n, 400)
    c0 = rng.integers(0, n, 400)
    r1 = np.minimum(n, r0 + rng.integers(0, 6, 400))
    c1 = np.minimum(n, c0 + rng.integers(0, 6, 400))
    offsets, flat = tile_index._tile_items_csr(r0, r1, c0, c1, rows, cols)
    for t in range(400):
        want = sorted(set(rows[r0[t]:r1[t]].tolist()) | set(cols[c0[t]:c1[t]].tolist()))
        assert flat[offsets[t]:offsets[t + 1]].tolist() == want, t
