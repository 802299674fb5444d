"""The simulator's multi-node runs with an L3 directory (engine/pairs/plan/simulate.py), on cases
computed by hand and on an invariant: with the same tiles dealt to the same nodes, L3 changes
where an item comes from, never what enters a node's L2, so loads + L3 hits = the loads without
L3. With L3 the stripe plan deals stripes as wide as every host tier together
(``StripePlan.deal``), which loads fewer."""
import pytest

from pairflow.engine.pairs.plan.simulate import simulate
from pairflow.engine.pairs.space import Rectangle, Triangle


def test_two_nodes_sharing_one_row_item_by_hand():
    # one row item (0) against two column items (1, 2): a tile each; node 0 takes (0,1), node 1
    # takes (0,2). Without L3 both load item 0: 4 loads of 3 items. With L3 node 1 takes item 0
    # from node 0 at hop 0: 3 loads, R = 1.
    off = simulate(Rectangle(1, 2), 1, 4, nodes=2)
    on = simulate(Rectangle(1, 2), 1, 4, nodes=2, l3=True)
    assert (off.loads, off.n_items, off.tiles) == (4, 3, 2)
    assert (on.loads, on.l3_hits, on.R) == (3, [1], 1.0)


def test_with_room_for_every_item_each_is_loaded_once_in_the_whole_cluster():
    for nodes in (2, 4, 8):
        on = simulate(Triangle(24), 2, 24, nodes=nodes, l3=True)
        assert on.loads == 24 and on.R == 1.0
        off = simulate(Triangle(24), 2, 24, nodes=nodes)
        assert off.loads == 24 + sum(on.l3_hits) and off.loads > 24


@pytest.mark.parametrize("nodes,host,hops,plan,deal", [
    (2, 6, 1, "stripe", False), (4, 8, 1, "zorder", False), (4, 8, 2, "hilbert", False),
    (8, 6, 1, "stripe", "contiguous"), (3, 10, 3, "zorder", True)])
def test_l3_only_moves_loads_to_peers(nodes, host, hops, plan, deal):
    kw = dict(nodes=nodes, plan=plan, deal=deal)
    off = simulate(Triangle(40), 2, host, **kw)
    on = simulate(Triangle(40), 2, host, l3=True, l3_hops=hops, **kw)
    assert (on.tiles, on.pairs, on.l2_hits, on.l1_hits) == \
        (off.tiles, off.pairs, off.l2_hits, off.l1_hits)
    assert len(on.l3_hits) == hops and sum(on.l3_hits) > 0
    assert on.loads + sum(on.l3_hits) == off.loads
    assert on.loads >= 40  # each item at least once


def test_one_node_has_no_peers():
    off = simulate(Triangle(30), 2, 6)
    on = simulate(Triangle(30), 2, 6, l3=True)
    assert (on.loads, on.l3_hits) == (off.loads, [])


def test_dealt_shares_cover_every_tile_once():
    for nodes in (1, 3, 7):
        r = simulate(Triangle(30), 2, 6, nodes=nodes, deal=True)
        assert r.tiles == 15 * 16 // 2 and r.pairs == 30 * 29 // 2


@pytest.mark.parametrize("nodes", [2, 4])
def test_stripes_as_wide_as_the_cluster_load_fewer(nodes):
    # n = 96, S = 16: one node's stripe model is 1 + n/(2S) = 4; with the host tiers of all the
    # nodes together the stripe is nodes times as wide: 1 + n/(2 S nodes), 1.75 at 4 nodes
    # (the target: within 10 % of it)
    n, leaf, host = 96, 4, 16
    one = simulate(Triangle(n), leaf, host)
    runs = {deal: simulate(Triangle(n), leaf, host, nodes=nodes, l3=True, deal=deal)
            for deal in ("contiguous", True)}
    assert runs[True].loads < runs["contiguous"].loads
    if nodes == 4:
        assert runs[True].R <= 1.1 * (1 + n / (8 * host)) < one.R
    assert (runs[True].tiles, runs[True].pairs) == (one.tiles, one.pairs)
