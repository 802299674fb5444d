"""The tile side (engine/pairs/plan/leaf.py), pure: the cost model, the tiers' bounds, even blocks
and the candidates searched under a host tier short of items, each against a hand-computed
case, without Ray."""
import math

import pytest

from pairflow.engine.pairs.plan.leaf import (choose_leaf, even_side, leaf_candidates,
                                             modelled_seconds, pick_leaf)
from pairflow.engine.pairs.space import Rectangle, Triangle, leaves


def test_leaf_aims_at_the_overhead_and_tail_optimum():
    # Triangle(200): 19900 pairs at 1 ms, 200 items at 44 ms, 2 actors:
    # W = (200 * 0.044 + 19900 * 0.001) / 2 = 14.35 s; t* = sqrt(2 * 0.02 * 14.35) = 0.7576 s;
    # side = ceil(sqrt(0.7576 / 0.001)) = 28: 200 items in 8 blocks (the last of 4); 7 blocks
    # of ceil(200 / 7) = 29 (within 5 % of 28) cut them with no sliver
    leaf = choose_leaf(0.001, Triangle(200), host_items=10_000, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02)
    assert leaf == 29
    # a host tier of all 200 items needs no stripe: the same 29
    assert choose_leaf(0.001, Triangle(200), host_items=200, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02) == 29
    # one item fewer, and a stripe of >= 4 blocks plus the 4 tiles under way must fit:
    # 199 // (4 + 4) = 24, which cuts 9 blocks (the last of 8); 9 equal ones: ceil(200 / 9) = 23
    assert choose_leaf(0.001, Triangle(200), host_items=199, per_node_tiles=4, n_actors=2,
                       target_s=0.05, t_item=0.044, n_items=200, overhead_s=0.02) == 23


def test_leaf_cuts_no_sliver():
    # 9,980 reads, 2 actors, cheap pairs: the >= 4 tiles per actor cap is
    # floor(sqrt(49,795,210 / 8)) = 2,494, four blocks and one of 4 reads; 2,495 (within 5 %)
    # makes four equal blocks: 10 tiles, not 15
    leaf = choose_leaf(3e-9, Triangle(9980), host_items=10_000, per_node_tiles=4, n_actors=2,
                       target_s=0.05, n_items=9980, overhead_s=0.02)
    assert leaf == 2495
    assert sum(1 for _ in leaves(Triangle(9980), leaf)) == 10
    # where no leaf within 5 % saves a block, the blocks are made equal: 1,000 items at a
    # side of 300 are 4 blocks (the last of 100), so 4 of ceil(1000 / 4) = 250
    assert even_side(300, 1000, slack=0.05) == 250
    assert even_side(8, 2000, slack=0.05) == 8  # 250 blocks of 8 exactly


def test_leaf_never_aims_below_the_target_tile():
    # a tiny run: t* = sqrt(2 * 0.02 * (45 * 1e-3) / 1) = 0.042 s < 0.05 s, so 0.05 s is aimed
    # at: side = ceil(sqrt(0.05 / 0.001)) = 8, then capped to >= 4 tiles per actor:
    # floor(sqrt(45 / 4)) = 3
    leaf = choose_leaf(0.001, Triangle(10), host_items=1000, per_node_tiles=2, n_actors=1,
                       target_s=0.05, overhead_s=0.02)
    assert leaf == 3
    big = choose_leaf(0.001, Triangle(2000), host_items=2000, per_node_tiles=2, n_actors=1,
                      target_s=0.05, overhead_s=0.0)
    assert big == math.ceil(math.sqrt(0.05 / 0.001))


def test_leaf_grows_with_the_work_and_respects_the_host_tier():
    small = choose_leaf(0.01, Rectangle(100, 100), 1000, 4, 2, t_item=0.0, n_items=200)
    large = choose_leaf(0.01, Rectangle(1000, 1000), 1000, 4, 2, t_item=0.0, n_items=2000)
    assert large > small
    # a host tier of 40 items with 4 tiles under way: a stripe of >= 4 blocks must fit
    capped = choose_leaf(0.01, Rectangle(1000, 1000), 40, 4, 2, t_item=0.0, n_items=2000)
    assert capped == 40 // (4 + 4)


def test_leaf_candidates_double_up_to_what_the_tiers_hold():
    # forensics at a quarter host tier: the stripe rule's 20, the model's 46, 80 host items
    # (a tile of 2 x 40 at most), L1s holding leaves up to 57: 20 and min(46, 40, 57) = 40
    assert leaf_candidates(20, 46, 80, 57, 320) == [20, 40]
    # 1,000 items: 10 doubled to 20, 40, 80 (13 blocks of ceil(1000 / 13) = 77), then the
    # most, min(100, 500, 90) = 90 (12 blocks of 84)
    assert leaf_candidates(10, 100, 1000, 90, 1000) == [10, 20, 40, 77, 84]
    # an L1 that holds no larger leaf, or a model that wants none: the stripe rule's alone
    assert leaf_candidates(5, 100, 1000, 2, 200) == [5]
    assert leaf_candidates(20, 12, 1000, 90, 1000) == [20]


def test_modelled_seconds_and_the_leaf_picked():
    # R 2 of 10 items at 0.1 s, 45 pairs at 10 ms, 3 tiles at 20 ms, 2 actors, leaf 5:
    # (2 + 0.45 + 0.06) / 2 + 25 x 0.01 / 2 = 1.255 + 0.125
    assert modelled_seconds(2.0, 10, 0.1, 45, 0.01, 3, 0.02, 2, 5) == pytest.approx(1.38)
    assert pick_leaf({20: 13.2, 36: 11.2}) == 36
    assert pick_leaf({40: 5.0, 20: 5.0}) == 20  # a tie: the smaller leaf
