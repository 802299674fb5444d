"""Hierarchical scheduling with work stealing (engine/pairs/plan/stealing.py), without Ray.

A small discrete-time cluster drives the policy: each node has device slots and a speed (ticks
per tile); a slot that is free asks its node's frontier, which refills from the head's policy
when empty. The oracle is the set of tile ids itself: every tile must be completed exactly once,
whatever joins, losses and steals happen.
"""
from __future__ import annotations

from pairflow.engine.pairs.plan.stealing import Frontier, StealingPolicy


def simulate(n_tiles, speeds, devices=1, batch=4, seed=0, join=None, lose=None, max_ticks=10_000):
    """``speeds``: node -> ticks per tile; ``join``: (tick, node, speed) added mid-run;
    ``lose``: (tick, node) removed mid-run (its running and queued tiles are lost).
    Returns (policy, frontiers, completions per tile, hand-outs per tile)."""
    order = list(range(n_tiles))
    speeds = dict(speeds)
    policy = StealingPolicy(order, list(speeds), seed=seed)
    frontiers = {n: Frontier(n, batch) for n in speeds}
    slots = {n: [None] * devices for n in speeds}  # (tile, ticks left) or None
    completions: dict[int, int] = {}
    handouts: dict[int, int] = {}
    quiet: dict[str, int] = {}  # a node the head had nothing for asks again after 5 ticks
    for tick in range(max_ticks):
        if join and tick == join[0]:
            speeds[join[1]] = join[2]
            frontiers[join[1]] = Frontier(join[1], batch)
            slots[join[1]] = [None] * devices
        if lose and tick == lose[0]:
            node = lose[1]
            del speeds[node], frontiers[node], slots[node]
            policy.lose(node)
        for node in list(speeds):
            fr = frontiers[node]
            for d in range(devices):
                cur = slots[node][d]
                if cur is not None:
                    t, left = cur
                    if left > 1:
                        slots[node][d] = (t, left - 1)
                        continue
                    fr.complete(f"{node}/{d}", t)
                    slots[node][d] = None
                t = fr.next_tile(f"{node}/{d}")
                if t is None and quiet.get(node, -1) < tick:  # one round trip: completions
                    # up, a batch down
                    for done, _, _ in fr.take_completions():
                        policy.complete(done)
                        completions[done] = completions.get(done, 0) + 1
                    fr.refill(policy.take(node, fr.batch, least=devices))
                    t = fr.next_tile(f"{node}/{d}")
                    if t is None:
                        quiet[node] = tick + 5
                if t is not None:
                    handouts[t] = handouts.get(t, 0) + 1
                    slots[node][d] = (t, speeds[node])
        busy = any(s is not None for ss in slots.values() for s in ss)
        if not busy and policy.remaining() == 0 and not any(f.queue for f in frontiers.values()) \
                and not policy.held.keys() - {t for f in frontiers.values()
                                              for t, _, _ in f.buffered}:
            for node, fr in frontiers.items():
                for done, _, _ in fr.take_completions():
                    policy.complete(done)
                    completions[done] = completions.get(done, 0) + 1
            return policy, frontiers, completions, handouts
    raise AssertionError("the simulated run did not finish")


def test_shares_are_contiguous_runs_of_the_plan_dealt_equally():
    p = StealingPolicy([5, 3, 8, 1, 0, 2, 7, 4, 6], ["a", "b", "c"])
    assert p.shares == {"a": [[5, 3, 8]], "b": [[1, 0, 2]], "c": [[7, 4, 6]]}
    assert p.take("a", 2) == [5, 3]  # plan order inside a share: the stripe's reuse is kept
    assert p.steals == []


def test_done_tiles_are_not_dealt():
    p = StealingPolicy(range(6), ["a", "b"], done=[0, 1, 4])
    assert p.shares == {"a": [[2]], "b": [[3, 5]]}


def test_an_idle_node_steals_the_back_half_of_the_largest_run_of_a_random_node():
    p = StealingPolicy(range(12), ["a", "b"], seed=1)
    assert p.take("a", 6, least=6) == [0, 1, 2, 3, 4, 5]  # a's whole share
    got = p.take("a", 2, least=2)
    # b's share 6..11 is cut: a takes the back half, b keeps the front it works towards
    assert p.steals == [{"thief": "a", "victim": "b", "tiles": 3}]
    assert got == [9, 10]
    assert p.shares["b"] == [[6, 7, 8]]
    assert p.take("b", 10, least=3) == [6, 7, 8]


def test_the_victim_is_random_and_seeded():
    def victims(seed):
        p = StealingPolicy(range(40), ["a", "b", "c", "d"], seed=seed)
        p.take("a", 10, least=10)
        out = []
        for _ in range(3):
            p.take("a", 1)
            out.append(p.steals[-1]["victim"])
            p.shares["a"].clear()  # forget the stolen work: steal again
        return out
    assert victims(3) == victims(3)
    assert {v for s in range(10) for v in victims(s)} == {"b", "c", "d"}


def test_every_tile_once_and_steals_when_nodes_are_unequal():
    policy, frontiers, completions, handouts = simulate(
        200, {"n1": 1, "n2": 1, "n3": 1, "slow": 6}, devices=2, batch=8)
    assert sorted(completions) == list(range(200))
    assert set(completions.values()) == {1} and set(handouts.values()) == {1}
    c = policy.counters()
    assert c["steals"] > 0
    assert c["per_node"]["slow"]["stolen_from"] > 0  # the fast nodes took the slow one's work
    assert c["per_node"]["slow"]["steals"] == 0 or c["per_node"]["slow"]["granted"] < 50
    local = sum(f.local_handouts for f in frontiers.values())
    trips = sum(f.head_round_trips for f in frontiers.values())
    assert local == 200 and trips == c["head_round_trips"]
    assert trips * 4 < local  # batches of 8: a round trip carries several tiles


def test_equal_nodes_finish_their_shares_without_many_steals():
    policy, _, completions, _ = simulate(96, {"a": 2, "b": 2, "c": 2, "d": 2}, batch=4)
    assert sorted(completions) == list(range(96))
    # equal speeds: each node works its own share; a steal only happens in the last grants
    assert all(v["granted"] >= 20 for v in policy.counters()["per_node"].values())


def test_a_node_joining_mid_run_receives_work_by_stealing():
    policy, _, completions, handouts = simulate(120, {"a": 3, "b": 3}, batch=4,
                                                join=(10, "new", 1))
    assert sorted(completions) == list(range(120)) and set(handouts.values()) == {1}
    c = policy.counters()["per_node"]["new"]
    assert c["granted"] > 0 and c["steals"] > 0


def test_a_lost_nodes_share_and_tiles_are_granted_again_elsewhere():
    policy, _, completions, handouts = simulate(120, {"a": 2, "b": 2, "c": 2}, devices=2,
                                                batch=6, lose=(8, "b"))
    # completions buffered on the lost node never reached the head: those tiles run again
    assert sorted(completions) == list(range(120))
    assert set(completions.values()) == {1}
    assert "b" not in policy.counters()["per_node"] or policy.remaining("b") == 0
    assert any(n > 1 for n in handouts.values())  # the lost node's tiles were rerun


def test_grants_shrink_at_the_end_so_no_node_hoards_the_last_tiles():
    p = StealingPolicy(range(8), ["a", "b"])
    p.take("a", 3)
    p.take("b", 3)
    # 2 tiles left over 2 nodes: a fair part is one tile
    assert len(p.take("a", 3)) == 1


def test_a_device_lost_on_a_live_node_puts_its_tile_first_in_the_queue():
    f = Frontier("a", batch=4)
    f.refill([4, 5, 6])
    assert f.next_tile("a/0") == 4 and f.next_tile("a/1") == 5
    assert f.actor_lost("a/0") == [4]
    assert f.upcoming() == [4, 6]
    assert f.counters()["local_handouts"] == 2 and f.counters()["head_round_trips"] == 1


def test_the_scheduler_journals_each_tile_once_through_refills_and_a_lost_node(tmp_path):
    """``Scheduler.refill`` (the head's side of a frontier's round trip): completions carried up
    are recorded once, a lost node's held tiles and share go to the node still there."""
    from pairflow.engine.pairs.plan.scheduler import Scheduler
    from pairflow.engine.pairs.space import Triangle, leaves

    tiles = [t.to_dict() for t in leaves(Triangle(16), 2)]  # 8 x 9 / 2 = 36 tiles
    n = len(tiles)
    sch = Scheduler(str(tmp_path), tiles, list(range(16)), list(range(16)), list(range(n)),
                    journal=False, hierarchical={"nodes": ["node-0", "node-1"], "seed": 0})
    a = sch.refill("node-0", [], 4)["tiles"]
    b = sch.refill("node-1", [], 4)["tiles"]
    assert a == [0, 1, 2, 3] and b == [18, 19, 20, 21]  # the start of each node's share
    sch.forget_node("node-1")  # node-1 is gone with its four tiles
    seen, calls = [], 2
    pending = a
    while True:
        calls += 1
        reply = sch.refill("node-0", [(t, "node-0/dev-0", ([], None)) for t in pending], 8)
        if reply.get("done"):
            break
        pending = reply["tiles"]
        assert 0 < len(pending) <= 8
        seen += pending
    assert sorted(a + seen) == list(range(n))  # every tile, node-1's included, once
    assert sch.completed == n and not sch.in_flight
    assert sch.scheduling()["head_round_trips"] == calls


def test_dealt_shares_are_each_nodes_start_and_done_tiles_are_dropped():
    p = StealingPolicy(range(8), ["a", "b"], shares=[[0, 2, 4, 6], [1, 3, 5, 7]], done=[2, 5])
    # a grant is at most the node's fair part of what is left: 6 left over 2 nodes, then 3
    assert p.take("a", 10) == [0, 4, 6]
    assert p.take("b", 10) == [1, 3]
    assert p.take("b", 10) == [7]


def test_next_uses_count_only_the_nodes_own_work_not_yet_granted():
    # tile t needs items tile_items[t]; node a was granted tile 0 and has tiles 2, 4 left,
    # node b has 1, 3. Item 9 is needed by b's tiles only: for a it has no next use; item 0
    # only by the granted tile 0 (it may be done already: the head hears so at the next refill).
    tile_items = [(0, 1), (9, 2), (1, 2), (9, 3), (3, 4)]
    p = StealingPolicy(range(5), ["a", "b"], shares=[[0, 2, 4], [1, 3]])
    assert p.take("a", 1) == [0]
    assert p.next_uses("a", [0, 1, 2, 3, 9], tile_items) == \
        {0: float("inf"), 1: 0.0, 2: 0.0, 3: 1.0, 9: float("inf")}
    assert p.next_uses("b", [9, 3, 0], tile_items) == {9: 0.0, 3: 1.0, 0: float("inf")}
    # a horizon of one tile: what comes later counts as no use
    assert p.next_uses("a", [1, 3], tile_items, horizon=1) == {1: 0.0, 3: float("inf")}


def test_a_closed_scheduler_journals_nothing_more_and_hands_out_nothing(tmp_path):
    """A stopped run (cancel, Ctrl-C) closes the scheduler before it kills the actors, whose
    kill lands later: a tile finished after the close is not journaled (a resume recomputes
    it), and no actor gets another tile, through either hand-out path."""
    import json
    import os
    from pairflow.engine.pairs.plan.scheduler import Scheduler
    from pairflow.engine.pairs.space import Triangle, leaves

    tiles = [t.to_dict() for t in leaves(Triangle(16), 2)]
    for hierarchical in (None, {"nodes": ["node-0"], "seed": 0}):
        run_dir = tmp_path / ("h" if hierarchical else "flat")
        run_dir.mkdir()
        sch = Scheduler(str(run_dir), tiles, list(range(16)), list(range(16)),
                        list(range(len(tiles))), hierarchical=hierarchical)
        if hierarchical:
            first, second = sch.refill("node-0", [], 2)["tiles"]
            sch.refill("node-0", [(first, "node-0/dev-0", ([{"sink": "s"}], None))], 0)
            sch.close()
            assert sch.refill("node-0", [(second, "node-0/dev-0", ([{"sink": "s"}], None))],
                              4) == {"tiles": [], "done": True}
        else:
            first = sch.request("a", "node-0")["tile"]
            second = sch.complete_and_request("a", first, [{"sink": "s"}], None, "node-0")["tile"]
            sch.close()
            assert sch.complete_and_request("a", second, [{"sink": "s"}], None,
                                            "node-0") == {"done": True}
        with open(os.path.join(run_dir, "journal.jsonl")) as fh:
            assert [json.loads(line)["tile"] for line in fh] == [first]
        assert sch.progress()["done"] == 1


def test_the_course_rule_by_hand():
    from pairflow.engine.pairs.plan.stealing import Course
    # the simulation's R after each quarter of the tiles: 2, 3, 4, 5; 10 items
    c = Course([2.0, 3.0, 4.0, 5.0], units=10, margin=1.25, start=0.15, slack=2)
    assert c.expected_R(0.125) == 1.0 and c.expected_R(0.5) == 3.0
    assert c.expected_R(0.625) == 3.5 and c.expected_R(1.0) == 5.0
    assert c.check(0.1, 1000) is None  # before a sixth-ish of the tiles nothing is judged
    # at half the tiles: 1.25 x 3 + 2 / 10 = 3.95 loads per item allowed
    assert c.check(0.5, 39) is None
    assert c.check(0.5, 40) == {"at_done": 0.5, "R": 4.0, "simulated_R": 3.0,
                                "margin": 1.25, "to": "contiguous"}
    assert c.check(0.75, 100) is None and c.changed["R"] == 4.0  # once


def test_a_course_change_re_deals_what_is_left_in_contiguous_runs_of_the_one_plan():
    p = StealingPolicy(range(12), ["a", "b", "c"],
                       shares=[[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]])
    assert p.take("a", 2) == [0, 3] and p.take("b", 1) == [1]
    # left: 6, 9 | 4, 7, 10 | 2, 5, 8, 11 -> in the one plan's order, cut in three runs
    assert p.redeal(range(12)) == 9
    assert [s for n in "abc" for s in p.shares[n]] == [[2, 4, 5], [6, 7, 8], [9, 10, 11]]
    granted = [0, 3, 1]
    while p.remaining():
        granted += [t for n in "abc" for t in p.take(n, 10)]
    assert sorted(granted) == list(range(12))


def test_the_scheduler_changes_course_when_loads_pass_the_simulation(tmp_path):
    """A dealt run whose loads (carried by the frontiers' refills) pass the simulated curve by
    the margin: what is left is re-dealt contiguously, once, and summary.json's scheduling
    says so."""
    from pairflow.engine.pairs.plan.scheduler import Scheduler
    from pairflow.engine.pairs.space import Triangle, leaves

    tiles = [t.to_dict() for t in leaves(Triangle(16), 2)]  # 36 tiles
    n = len(tiles)
    dealt = [list(range(n))[k::2] for k in range(2)]
    hier = {"nodes": ["node-0", "node-1"], "seed": 0, "shares": dealt,
            "fallback": list(range(n)), "course": {"curve": [1.0] * 20, "units": 16}}
    sch = Scheduler(str(tmp_path), tiles, list(range(16)), list(range(16)), list(range(n)),
                    journal=False, hierarchical=hier)
    a = sch.refill("node-0", [], 9, loads=0)["tiles"]
    assert a == dealt[0][:9]
    done = [(t, "node-0/dev-0", ([], None)) for t in a]
    # 9 of 36 done (a quarter): 1.25 x 1 + 2 / 16 allowed, 1.5 loads per item measured
    b = sch.refill("node-0", done, 4, loads=24)["tiles"]
    change = sch.scheduling()["course_change"]
    assert change["to"] == "contiguous" and change["tiles"] == n - 9 and change["R"] == 1.5
    left = [t for t in range(n) if t not in a]  # node-0 now streams the front of the rest
    assert b == left[:4]
    assert sch.refill("node-1", [], 4, loads=24)["tiles"] == left[len(left) // 2:][:4]


def test_the_scheduler_keeps_a_drifting_deal_that_still_loads_less_and_says_so(tmp_path):
    """As above, but contiguous shares were simulated to end at R 8 (0.4 a step): at a quarter
    of the tiles 1.5 loads an item against 1.0 drift 1.5x, and the deal drifting so would end
    at 1.5, contiguous shares at 1.5 + 8 - 2 = 7.5: the deal is kept (no re-deal: node-0 goes
    on with its own share) and scheduling's course_drift records it."""
    from pairflow.engine.pairs.plan.scheduler import Scheduler
    from pairflow.engine.pairs.space import Triangle, leaves

    tiles = [t.to_dict() for t in leaves(Triangle(16), 2)]  # 36 tiles
    n = len(tiles)
    dealt = [list(range(n))[k::2] for k in range(2)]
    hier = {"nodes": ["node-0", "node-1"], "seed": 0, "shares": dealt,
            "fallback": list(range(n)),
            "course": {"curve": [1.0] * 20, "units": 16,
                       "alternative": [0.4 * (k + 1) for k in range(20)]}}
    sch = Scheduler(str(tmp_path), tiles, list(range(16)), list(range(16)), list(range(n)),
                    journal=False, hierarchical=hier)
    a = sch.refill("node-0", [], 9, loads=0)["tiles"]
    done = [(t, "node-0/dev-0", ([], None)) for t in a]
    b = sch.refill("node-0", done, 4, loads=24)["tiles"]
    s = sch.scheduling()
    assert s["course_change"] is False and b == dealt[0][9:13]
    assert s["course_drift"]["kept"] == "dealt" and s["course_drift"]["R"] == 1.5
    assert s["course_drift"]["projected_R"] == 1.5
    assert abs(s["course_drift"]["contiguous_R"] - 7.5) < 1e-9


# -- the soft pace of dealt shares (stealing.Pace) ---------------------------------------------

def test_a_paced_node_is_never_granted_more_than_the_lead_ahead_of_its_slowest_peer():
    """Random asks of three dealt nodes of unequal speed. The oracle is kept here from the
    grants alone: a node's tiles of its own share granted so far never exceed the least of its
    peers' (those with tiles of their share left) by more than the lead; the least advanced
    node is never refused; every tile is granted exactly once."""
    import random
    shares = [list(range(m * 30, (m + 1) * 30)) for m in range(3)]
    owner = {t: f"n{m}" for m, s in enumerate(shares) for t in s}
    nodes = ["n0", "n1", "n2"]
    policy = StealingPolicy(range(90), nodes, shares=shares, pace=4)
    rng = random.Random(7)
    own = {n: 0 for n in nodes}
    granted: list[int] = []
    refused = 0
    while len(granted) < 90:
        node = rng.choices(nodes, weights=[5, 2, 1])[0]
        left = {n: 30 - own[n] for n in nodes}
        peers = [own[p] for p in nodes if p != node and left[p] > 0]
        least = left[node] > 0 and (not peers or own[node] <= min(peers))
        got = policy.take(node, rng.randint(1, 6))
        if not got:
            refused += 1
            assert not least and node in policy.paced
            continue
        for t in got:
            own[owner[t]] += owner[t] == node
        if left[node] > 0 and peers:
            assert own[node] <= min(peers) + 4, (node, own)
        granted.extend(got)
    assert sorted(granted) == list(range(90))
    assert refused > 0 and policy.counters()["paced"] == {"lead": 4, "held": refused}


def test_a_lost_or_re_dealt_node_holds_no_one_back():
    shares = [list(range(0, 10)), list(range(10, 20))]
    policy = StealingPolicy(range(20), ["a", "b"], shares=shares, pace=2)
    assert policy.take("a", 8) == [0, 1] and policy.take("a", 8) == []
    policy.lose("b")  # b's share goes to the orphans: a runs on
    assert policy.take("a", 8) == [2, 3, 4, 5, 6, 7, 8, 9]
    again = StealingPolicy(range(20), ["a", "b"], shares=shares, pace=2)
    assert again.take("a", 8) == [0, 1] and again.take("a", 8) == []
    again.redeal(range(20))  # a course change: contiguous shares, no pace
    assert len(again.take("a", 8)) == 8
    assert again.counters()["paced"] == {"lead": 2, "held": 1, "until": "course change"}


def test_unpaced_and_contiguous_shares_are_not_held():
    shares = [list(range(0, 10)), list(range(10, 20))]
    assert len(StealingPolicy(range(20), ["a", "b"], shares=shares).take("a", 8)) == 8
    assert len(StealingPolicy(range(20), ["a", "b"], pace=2).take("a", 8)) == 8


def test_a_course_change_is_described_for_the_progress_line():
    from pairflow.engine.pairs.plan.stealing import Course
    course = Course([1.0] * 20, units=40)
    changed = course.check(0.5, 120)  # R 3.0 against 1.25 x 1.0 + 2/40
    changed["tiles"] = 30
    assert Course.describe(changed) == ("course change at 50% of the tiles: R 3.00 passed "
                                        "1.25x the simulation's 1.00; 30 tiles left re-dealt "
                                        "in contiguous shares")


def test_a_paced_node_waits_at_the_coordinator_and_is_never_told_done(tmp_path):
    """Dealt shares paced one tile: node-0 runs ahead while node-1 has not asked yet. With no
    tile under way anywhere the scheduler alone would answer done; the coordinator holds the
    paced node (up to ``hold_s``) and answers wait, and once node-1 is granted a tile node-0
    gets its next one. Every tile is granted once."""
    import asyncio
    from pairflow.engine.pairs.space import Triangle, leaves
    from pairflow.engine.pairs.workers.coordinator import CoordinatorCore

    tiles = [t.to_dict() for t in leaves(Triangle(8), 2)]  # 4 x 5 / 2 = 10 tiles
    shares = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    core = CoordinatorCore(
        dict(run_dir=str(tmp_path), tiles=tiles, row_items=list(range(8)),
             col_items=list(range(8)), order=list(range(10)), journal=False,
             hierarchical={"nodes": ["node-0", "node-1"], "seed": 0, "shares": shares,
                           "pace": 1}),
        dict(run_dir=str(tmp_path), n_items=8, tiles_total=10, pairs_total=28, bound_R=None))

    async def go():
        first = await core.refill("node-0", [], 4, 1)
        done = [(t, "node-0/dev-0", ([], None)) for t in first["tiles"]]
        held = await core.refill("node-0", done, 4, 1, hold_s=0.05)
        other = await core.refill("node-1", [], 4, 1)
        after = await core.refill("node-0", [], 4, 1, hold_s=0.05)
        return first, held, other, after

    first, held, other, after = asyncio.run(go())
    assert first["tiles"] == [0]
    assert held == {"tiles": [], "wait": 0.02}  # not done: its share is left
    assert other["tiles"] == [5, 6] and after["tiles"] == [1, 2]
    assert core.scheduler.stealing.counters()["paced"]["held"] >= 1


def test_a_drift_keeps_the_deal_while_contiguous_shares_would_load_more():
    """The dealt simulation ends at R 4 (curve 1, 2, 3, 4 by quarters), contiguous shares at
    R 8 (2, 4, 6, 8); 10 items. At half the tiles a measured R of 4.0 is 2x the simulated 2.0:
    drifting so to the end the deal loads 2 x (4 - 2) = 4 more, contiguous shares 8 - 4 = 4
    more: the deal is kept (a tie keeps it), the drift recorded. At 3/4 an R of 6.0 is 2x the
    simulated 3.0: the deal would load 2 more, contiguous 2 more: kept. With contiguous shares
    of R 5 (1.25 a quarter) the same drift at half the tiles changes course (4 > 2.5)."""
    from pairflow.engine.pairs.plan.stealing import Course
    c = Course([1.0, 2.0, 3.0, 4.0], units=10, alternative=[2.0, 4.0, 6.0, 8.0])
    assert c.check(0.5, 40) is None and c.changed is None
    assert c.drift == {"at_done": 0.5, "R": 4.0, "simulated_R": 2.0, "margin": 1.25,
                       "projected_R": 8.0, "contiguous_R": 8.0, "kept": "dealt"}
    assert c.check(0.75, 60) is None and c.drift["projected_R"] == 8.0
    cheap = Course([1.0, 2.0, 3.0, 4.0], units=10, alternative=[1.25, 2.5, 3.75, 5.0])
    assert cheap.check(0.5, 40) == {"at_done": 0.5, "R": 4.0, "simulated_R": 2.0,
                                    "margin": 1.25, "projected_R": 8.0, "contiguous_R": 6.5,
                                    "to": "contiguous"}
    assert cheap.drift is None
