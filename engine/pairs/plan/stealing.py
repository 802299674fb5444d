"""Hierarchical scheduling with work stealing: the policy, free of Ray.

Why: with one pull queue on the head node every tile is a round trip to it, and every node draws
from the same plan front, so a node's consecutive tiles are scattered over the plan and its host
tier's reuse is lost. Here the run's plan is cut into runs of consecutive tiles (subtrees: in
Z- or Hilbert order an aligned run of leaves is a quadtree subtree; in the stripe plan a run is a
stretch of one stripe's stream), which are dealt to nodes:

* Each node's share is an equal contiguous run of the plan (``contiguous_shares``: the stripe
  plan's reuse holds inside it), or with L3 (``deal``), stripes as wide as every node's host
  tier together, which the nodes stream in step (``StripePlan.deal``).
* ``StealingPolicy`` (head side) starts each node on its share. A node asks for a batch of tiles at
  once (``take``): from its own share first, then from the shares of lost nodes (``orphans``),
  then by stealing the LARGEST remaining run from a RANDOM other node (seeded), cut in half when
  it is more than one tile (the thief takes the back half, the victim keeps the front it is
  working towards). A node unknown to the policy joins on its first ``take`` (it receives work by
  stealing); ``lose`` gives a lost node's share and its unfinished tiles back. Grants shrink near
  the end of the run so that no node hoards the last tiles while another idles.
* ``Frontier`` (node side) holds the tiles granted to one node and hands them to that node's
  device actors without a round trip to the head; it buffers their completions and sends them with
  its next refill, so one round trip carries a batch of completions and brings a batch of tiles.

Counters: steals (per thief and victim), tiles granted per node, tiles handed out locally, round
trips to the head.
"""
from __future__ import annotations

import math
import random
from collections import deque
from typing import Iterable, Sequence


def contiguous_shares(order: Sequence[int], nodes: int,
                      starts: Sequence[int] = ()) -> list[list[int]]:
    """Equal contiguous runs of the plan's order, one per node. ``starts``: positions where
    the plan's stripes begin (``stripe_starts``); each cut then moves to the nearest of them,
    so no stripe is split between two nodes, which would both load its rows. Stealing evens
    out what the moved cuts leave unequal."""
    order = [int(t) for t in order]
    cuts = [len(order) * i // nodes for i in range(1, nodes)]
    at = sorted({int(s) for s in starts if 0 < int(s) < len(order)})
    if at:
        moved = [min(at, key=lambda s: (abs(s - c), s)) for c in cuts]
        if all(a < b for a, b in zip(moved, moved[1:])):  # else too few stripes: equal runs
            cuts = moved
    bounds = [0, *cuts, len(order)]
    return [order[bounds[i]:bounds[i + 1]] for i in range(nodes)]


def stripe_starts(plan, tiles, items) -> list[int]:
    """Where the plan's stripes begin in its order (none for plans without stripes)."""
    return plan.stripe_starts(tiles, items) if hasattr(plan, "stripe_starts") else []


def deal(plan, tiles, items, nodes: int, l3: bool,
         room: int | None = None) -> list[list[int]] | None:
    """Each node's share of the run, in order, when the run is dealt in stripes; None when its
    shares are contiguous runs of the one plan (``contiguous_shares``, what ``StealingPolicy``
    cuts by default). Without L3 a node's host tier serves only that node, so a contiguous run
    keeps the plan's reuse. With L3 the host tiers together act as one, so a plan that can
    (``StripePlan.deal``) deals stripes as wide as all of them, the nodes streaming the same
    columns in step (``room``: the leaves kept beside each node's rows for them,
    ``StripePlan.deal_room``)."""
    if l3 and nodes > 1 and hasattr(plan, "deal"):
        return plan.deal(tiles, items, nodes, room=room)
    return None


class Pace:
    """A soft pace for dealt shares: no node is granted a tile of its own share more than
    ``lead`` tiles ahead of the peer least far along its own share (among the peers with tiles
    of their share left). Why: dealt nodes stream the same columns, and a column one node
    loaded stays in its host tier only for its stripe's room of columns; a node that runs
    further ahead than that loads each column again for the ones behind it (issue 57). The
    least advanced node is never held, so a pace cannot stall a run; a node whose share is
    done, stolen, lost or re-dealt holds no one back. ``lead``: a node's rows of the dealt
    stripe (``StripePlan.deal_rows``), i.e. one streamed column ahead."""

    def __init__(self, lead: int):
        self.lead = max(1, int(lead))
        self.taken: dict = {}
        self.held = 0  # times a node asked and was held back

    def room(self, node, left: dict) -> int:
        """Tiles of its own share ``node`` may take now; ``left``: each node's tiles of its own
        share not yet taken."""
        mine = self.taken.get(node, 0)
        peers = [self.taken.get(p, 0) for p, k in left.items() if p != node and k > 0]
        if not peers:
            return left.get(node, 0)
        return max(0, min(left.get(node, 0), min(peers) + self.lead - mine))

    def allowed(self, node, left: dict) -> bool:
        ok = left.get(node, 0) <= 0 or self.room(node, left) > 0
        self.held += not ok
        return ok

    def took(self, node, k: int = 1) -> None:
        self.taken[node] = self.taken.get(node, 0) + k


class Course:
    """When a run dealt in stripes loads more than its simulation said, change course, if
    contiguous shares would then load less.

    Why: the planner's simulation models the nodes' drift (``drift.Timing``), but a cluster
    may drift more (a busier machine, a slower network); a dealt run whose nodes are more than
    their room apart loads every streamed column on several nodes, and may load more than
    contiguous shares would (issue 57; RESULTS.md, "Scaling grid"). ``curve``: the simulation's
    R after each of its equal steps of tiles (``SimResult.curve``). Once ``start`` of the tiles
    are done, a measured R above ``margin`` times the curve at that point, plus ``slack`` items
    (the first stripe's rows arrive in a burst), says the run drifted. ``alternative``: the
    simulated curve of contiguous shares. Rule: the drift seen so far is taken to hold to the
    end; the head re-deals what is left in contiguous shares (``StealingPolicy.redeal``), once,
    only if what contiguous shares load over the tiles left (by their curve) is less than what
    the drifting dealt run would; else the run keeps its shares and the drift is recorded
    (``drift``). Without ``alternative`` a drift always changes course. Measured: every course
    change of the grid's tier-4 cells ended above the dealt run's own drifted projection
    (4-node records: R 4.85 after a change at 18 %, where the deal drifting 1.36x projects
    3.3; RESULTS.md, "Scaling grid")."""

    MARGIN = 1.25

    def __init__(self, curve, units: int, margin: float = MARGIN, start: float = 0.15,
                 slack: float = 2.0, alternative=None):
        self.curve = [float(r) for r in curve]
        self.units, self.margin, self.start, self.slack = max(1, int(units)), margin, start, slack
        self.alternative = [float(r) for r in alternative] if alternative else None
        self.changed: dict | None = None
        self.drift: dict | None = None  # the latest drift past the margin that kept course

    @staticmethod
    def _at(curve, done: float) -> float:
        """A curve's R after ``done`` (a fraction) of the tiles, between its steps."""
        if not curve:
            return 0.0
        x = min(1.0, max(0.0, done)) * len(curve)
        k = int(x)
        lo = curve[k - 1] if k >= 1 else 0.0
        hi = curve[min(k, len(curve) - 1)]
        return lo + (hi - lo) * (x - k)

    def expected_R(self, done: float) -> float:
        """The simulated R after ``done`` (a fraction) of the tiles, between its steps."""
        return self._at(self.curve, done)

    @staticmethod
    def describe(changed: dict) -> str:
        """The course change as the progress line says it."""
        return (f"course change at {changed['at_done']:.0%} of the tiles: R {changed['R']:.2f} "
                f"passed {changed['margin']}x the simulation's {changed['simulated_R']:.2f}; "
                f"{changed.get('tiles', 'the')} tiles left re-dealt in {changed['to']} shares")

    def check(self, done: float, loads: int) -> dict | None:
        """The course change (a record for summary.json), the first time the measured loads
        after ``done`` of the tiles pass the bound and contiguous shares would load less over
        the tiles left; else None."""
        if self.changed is not None or done < self.start or not self.curve:
            return None
        expected = self.expected_R(done)
        R = loads / self.units
        if R <= self.margin * expected + self.slack / self.units:
            return None
        record = {"at_done": round(done, 4), "R": round(R, 4),
                  "simulated_R": round(expected, 4), "margin": self.margin}
        if self.alternative is not None:
            drift = R / max(expected, 1e-9)
            dealt_left = (self.curve[-1] - expected) * drift
            contiguous_left = self.alternative[-1] - self._at(self.alternative, done)
            record.update(projected_R=round(R + dealt_left, 4),
                          contiguous_R=round(R + contiguous_left, 4))
            if dealt_left <= contiguous_left:
                self.drift = {**record, "kept": "dealt"}
                return None
        self.changed = {**record, "to": "contiguous"}
        return self.changed


class StealingPolicy:
    """Which tiles a node gets next: its share, then lost nodes' work, then stolen work.
    ``shares``: each node's tiles in order (``deal``); default: contiguous runs of ``order``."""

    def __init__(self, order: Sequence[int], nodes: Sequence[str] = (), seed: int = 0,
                 done: Iterable[int] = (), shares: Sequence[Sequence[int]] | None = None,
                 pace: int | None = None):
        done = set(done)
        # dealt shares: a node is granted at most ``pace`` tiles of its own share ahead of the
        # least advanced peer (``Pace``); ``own``: each node's tiles of its share not granted
        self.pace = Pace(pace) if pace and shares is not None else None
        self.own: dict[str, int] = {}
        self.paced: set = set()  # nodes whose last ask the pace held back
        self.pace_was: dict | None = None  # the pace's counters, once a course change ends it
        pending = [int(t) for t in order if t not in done]
        self.rng = random.Random(seed)
        self.shares: dict[str, list[list[int]]] = {}
        self.orphans: list[list[int]] = []
        self.held: dict[int, str] = {}  # tile -> the node it was granted to, until completed
        self.steals: list[dict] = []    # {"thief", "victim", "tiles"} in the order they happened
        self.granted: dict[str, int] = {}
        self.requests: dict[str, int] = {}
        self.completed: set[int] = set()
        nodes = list(dict.fromkeys(nodes))
        if not nodes:
            if pending:
                self.orphans.append(pending)
            return
        if shares is None or len(shares) != len(nodes):
            shares = contiguous_shares(pending, len(nodes))
        for node, share in zip(nodes, shares):
            share = [int(t) for t in share if int(t) not in done]
            self.shares[node] = [share] if share else []
            self.own[node] = len(share)

    # -- state --------------------------------------------------------------------------------
    def remaining(self, node: str | None = None) -> int:
        """Tiles not yet granted: of one node's share, or of the whole run."""
        if node is not None:
            return sum(len(s) for s in self.shares.get(node, ()))
        return sum(len(s) for segs in self.shares.values() for s in segs) + \
            sum(len(s) for s in self.orphans)

    def nodes(self) -> list[str]:
        return list(self.shares)

    # -- hand-out -------------------------------------------------------------------------------
    def take(self, node: str, want: int, least: int = 1, count: bool = True) -> list[int]:
        """Up to ``want`` tiles for ``node``'s frontier, in plan order. Near the end a grant is
        cut to this node's fair part of what is left (never below ``least``, the node's device
        count), so the last tiles spread over the nodes. ``count``: a request of the node's
        (False: the head looking again on its behalf)."""
        self.requests[node] = self.requests.get(node, 0) + count
        share = self.shares.setdefault(node, [])  # a node joining mid-run starts empty
        if not share:
            if self.orphans:
                self.orphans.sort(key=len)
                share.append(self.orphans.pop())
            else:
                self._steal(node)
        if not share:
            return []
        fair = math.ceil(self.remaining() / max(1, len(self.shares)))
        n = max(1, min(want, max(least, fair)))
        self.paced.discard(node)
        paced = self.pace is not None and self.own.get(node, 0) > 0
        if paced:
            if not self.pace.allowed(node, self.own):
                self.paced.add(node)
                return []
            n = min(n, self.pace.room(node, self.own))
        out: list[int] = []
        while share and len(out) < n:
            seg = share[0]
            k = n - len(out)
            out.extend(seg[:k])
            del seg[:k]
            if not seg:
                share.pop(0)
        for t in out:
            self.held[t] = node
        self.granted[node] = self.granted.get(node, 0) + len(out)
        if paced:
            self.pace.took(node, len(out))
            self.own[node] = max(0, self.own[node] - len(out))
        return out

    def _steal(self, thief: str) -> None:
        victims = sorted(n for n in self.shares if n != thief and self.remaining(n) > 0)
        if not victims:
            return
        victim = self.rng.choice(victims)
        segs = self.shares[victim]
        big = max(range(len(segs)), key=lambda i: len(segs[i]))
        seg = segs[big]
        if len(seg) > 1:  # the thief takes the back half: the victim works from the front
            half = len(seg) // 2
            stolen = seg[half:]
            del seg[half:]
        else:
            stolen = segs.pop(big)
        self.shares[thief].append(stolen)
        if victim in self.own:  # what was stolen no longer paces the victim
            self.own[victim] = min(self.own[victim], self.remaining(victim))
        self.steals.append({"thief": thief, "victim": victim, "tiles": len(stolen)})

    def redeal(self, order: Sequence[int]) -> int:
        """Change course: every node's tiles not yet granted are cut again into contiguous
        runs of ``order`` (the one plan's), one per node in the same order of nodes, so each
        node streams its own columns instead of sharing a stream it has drifted off. Returns
        the tiles re-dealt."""
        nodes = list(self.shares)
        left = {t for n in nodes for seg in self.shares[n] for t in seg}
        rest = [int(t) for t in order if int(t) in left]
        if self.pace is not None:  # contiguous shares stream apart: no pace from here
            self.pace_was = {"lead": self.pace.lead, "held": self.pace.held,
                             "until": "course change"}
        self.pace, self.own = None, {}
        for node, share in zip(nodes, contiguous_shares(rest, len(nodes))):
            self.shares[node] = [share] if share else []
        return len(rest)

    def next_uses(self, node: str, items, tile_items, horizon: int = 512) -> dict:
        """Next use of each item in ``node``'s own work not yet granted (its share, in order),
        for its host tier's eviction: the position of the first tile needing it within
        ``horizon`` tiles (past it, and for items none of them needs: INF). The run's one plan
        would also count the other nodes' tiles, which with L3 stream the same columns: a node
        would then keep a column its peers still need over its own stripe rows, and load those
        again at the next column. Granted tiles are left out: the head learns they are done
        only at the node's next refill, so counting them would keep what finished tiles needed
        and evict what comes next."""
        want = {int(i) for i in items}
        first: dict = {}
        pos = 0
        for t in (t for seg in self.shares.get(node, ()) for t in seg):
            if pos >= horizon or len(first) == len(want):
                break
            for i in tile_items[t]:
                if i in want and i not in first:
                    first[i] = float(pos)
            pos += 1
        return {i: first.get(i, math.inf) for i in want}

    # -- completion and loss --------------------------------------------------------------------
    def complete(self, t: int) -> None:
        self.held.pop(int(t), None)
        self.completed.add(int(t))

    def give_back(self, tiles: Iterable[int]) -> None:
        """Tiles granted but not done (their actor or frontier lost): handed out again first."""
        back = [int(t) for t in tiles if int(t) not in self.completed]
        for t in back:
            self.held.pop(t, None)
        if back:
            self.orphans.append(back)

    def lose(self, node: str) -> list[int]:
        """A node is gone: its share and the tiles it held go back to be granted elsewhere.
        Returns the held tiles (for the scheduler's in-flight bookkeeping)."""
        for seg in self.shares.pop(node, []):
            if seg:
                self.orphans.append(seg)
        self.own.pop(node, None)
        held = sorted(t for t, n in self.held.items() if n == node)
        self.give_back(held)
        return held

    def counters(self) -> dict:
        per_node: dict[str, dict] = {}
        for n in set(self.granted) | set(self.shares) | set(self.requests):
            per_node[n] = {"granted": self.granted.get(n, 0), "requests": self.requests.get(n, 0),
                           "steals": sum(1 for s in self.steals if s["thief"] == n),
                           "stolen_from": sum(1 for s in self.steals if s["victim"] == n)}
        return {"steals": len(self.steals), "tiles_granted": sum(self.granted.values()),
                "paced": self.pace_was if self.pace is None else
                {"lead": self.pace.lead, "held": self.pace.held},
                "head_round_trips": sum(self.requests.values()), "per_node": per_node}


class Frontier:
    """One node's granted tiles, handed to its device actors without a round trip to the head.

    ``next_tile`` answers from the local queue; when it is empty the node's mechanism makes one
    round trip to the head (``refill``), carrying the completions buffered since the last one
    (``take_completions``). A device actor lost on a live node gives its tiles back to the front
    of the queue (``actor_lost``).
    """

    def __init__(self, node: str, batch: int = 16):
        self.node = node
        self.batch = max(1, batch)
        self.queue: deque[int] = deque()
        self.running: dict[int, str] = {}   # tile -> device actor
        self.buffered: list = []            # completions not yet sent to the head
        self.local_handouts = 0
        self.head_round_trips = 0
        self.tiles_received = 0
        self.finished = False               # the head said every tile is granted and done

    def next_tile(self, actor: str) -> int | None:
        if not self.queue:
            return None
        t = self.queue.popleft()
        self.running[t] = actor
        self.local_handouts += 1
        return t

    def complete(self, actor: str, t: int, payload=None) -> None:
        self.running.pop(t, None)
        self.buffered.append((t, actor, payload))

    def take_completions(self) -> list:
        out, self.buffered = self.buffered, []
        return out

    def refill(self, tiles: Sequence[int]) -> None:
        """Tiles from one round trip to the head."""
        self.head_round_trips += 1
        self.tiles_received += len(tiles)
        self.queue.extend(int(t) for t in tiles)

    def actor_lost(self, actor: str) -> list[int]:
        lost = sorted(t for t, a in self.running.items() if a == actor)
        for t in lost:
            del self.running[t]
        self.queue.extendleft(reversed(lost))
        return lost

    def upcoming(self) -> list[int]:
        """Queued tiles in the order they will be handed out (next-use advice)."""
        return list(self.queue)

    def counters(self) -> dict:
        return {"node": self.node, "local_handouts": self.local_handouts,
                "head_round_trips": self.head_round_trips, "tiles_received": self.tiles_received}
