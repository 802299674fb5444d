"""``StripePlan.deal`` (engine/pairs/plan/policy.py): stripes as wide as every node's host tier,
checked against a hand-built case and against the properties the engine relies on: every tile dealt
once, and the work split evenly enough that the nodes stream in step."""
from collections import Counter

import pytest

from pairflow.engine.pairs.items import ItemMap
from pairflow.engine.pairs.plan.policy import StripePlan, interleave
from pairflow.engine.pairs.space import Rectangle, Triangle, leaves


def _blocks(tiles, share, leaf):
    return [(tiles[t].r0 // leaf, tiles[t].c0 // leaf) for t in share]


def test_two_nodes_by_hand():
    # 8 items, a leaf of one item (pairs i < j), S = 4 items, one tile under way: a node's stripe
    # is 2 rows (a leaf of room for the streamed column and one for a peer a column behind),
    # so two nodes make stripes of 4 rows:
    # rows 0-3, then 4-7. Node 0 owns rows 0-1, node 1 rows 2-3. Inside the stripe each takes
    # its own block first, then the blocks between the groups: node 1 is half the ring ahead of
    # node 0, so that block is split like a chessboard ((0,2) and (1,3) to node 0, (0,3) and
    # (1,2) to node 1). Then both stream columns 7, 6, 5, 4 (the snake's first pass runs down)
    # against their own rows. The second stripe holds the rows with pairs left, 4-6: node 0
    # owns row 4, node 1 rows 5-6; column 7 is no node's row there, so its blocks go to the
    # row's node; (4,6) and (4,5) are split like a chessboard again; nothing is left to stream.
    tiles = leaves(Triangle(8), 1)
    shares = StripePlan(4, 1).deal(tiles, ItemMap.shared(8), 2)
    assert _blocks(tiles, shares[0], 1) == [
        (0, 1), (0, 2), (1, 3), (0, 7), (1, 7), (0, 6), (1, 6), (0, 5), (1, 5), (0, 4), (1, 4),
        (4, 7), (4, 6)]
    assert _blocks(tiles, shares[1], 1) == [
        (2, 3), (0, 3), (1, 2), (2, 7), (3, 7), (2, 6), (3, 6), (2, 5), (3, 5), (2, 4), (3, 4),
        (5, 6), (5, 7), (6, 7), (4, 5)]


def test_two_tiles_under_way_keep_two_columns_of_room():
    # as above with two tiles under way per node: three leaves of room (two columns under way,
    # one for the peer behind), so a node's stripe is one row and the cluster's two; the stream
    # runs down from column 7
    tiles = leaves(Triangle(8), 1)
    shares = StripePlan(4, 2).deal(tiles, ItemMap.shared(8), 2)
    assert _blocks(tiles, shares[0], 1)[:6] == [(0, 7), (0, 6), (0, 5), (0, 4), (0, 3), (0, 2)]
    assert _blocks(tiles, shares[1], 1)[:7] == [(0, 1), (1, 7), (1, 6), (1, 5), (1, 4), (1, 3),
                                                (1, 2)]


@pytest.mark.parametrize("space,leaf,host,nodes", [
    (Triangle(96), 4, 16, 4), (Triangle(50), 3, 12, 3), (Rectangle(40, 70), 4, 16, 2),
    (Triangle(30), 2, 40, 5), (Triangle(31), 1, 5, 3), (Triangle(8), 1, 3, 2)])
def test_every_tile_once_and_the_stream_in_step(space, leaf, host, nodes):
    tiles = leaves(space, leaf)
    items = ItemMap.shared(space.n_rows) if space.symmetric else \
        ItemMap.disjoint(space.n_rows, space.n_cols)
    shares = StripePlan(host, 1).deal(tiles, items, nodes)
    assert len(shares) == nodes
    assert sorted(t for s in shares for t in s) == list(range(len(tiles)))
    assert sorted(interleave(shares)) == list(range(len(tiles)))
    work = Counter()
    for m, s in enumerate(shares):
        work[m] = sum(tiles[t].pairs for t in s)
    busy = [w for w in work.values() if w]
    assert max(busy) <= 1.6 * min(busy)  # nodes reach the end of a stripe near together


def test_one_node_is_the_plain_order():
    tiles = leaves(Triangle(40), 2)
    plan = StripePlan(8, 1)
    assert plan.deal(tiles, ItemMap.shared(40), 1) == [plan.order(tiles, ItemMap.shared(40))]
