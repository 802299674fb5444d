"""Membership: the workers of one run, node by node, and every change to them while it runs.

The driver starts the coordinator (scheduler, metrics and, when the head runs device actors,
the head node's cache); everything else that works for the run is started and kept here: each
node's cache (an actor of its own off the head node), its frontier (hierarchical hand-out,
frontier.py) and its device actors. While the run goes on, membership changes here only:

* an actor lost (its ``run()`` call ended in one of the executor's ``lost_errors``): its tiles
  go back to the scheduler (and, on a live node, first in its frontier's queue); on a live node
  a replacement takes its place (``replace_lost_actors``), a dead node is forgotten;
* an actor killed so its tiles rerun elsewhere: one of its tiles passed its deadline, or it sent
  no heartbeat for ``silent_after_s``; the reason is kept and becomes the loss's reason (an
  in-process run cannot kill a thread: it fails, saying why);
* a node that joined the cluster mid-run: a node cache, a frontier and device actors of its own,
  which pull tiles like the others (the tiles were cut for the nodes at the start).

At the end it gathers the workers' counters for summary.json (node caches, hand-outs) and stops
them (or gives the device actors and the coordinator back to a session).

Why one class the driver owns: the tables it keeps (handles, each actor's node, the pending
``run()`` calls, kill reasons, the lost actors, meta.json's list of actors) change together,
on every turn of the driver's wait loop, and the driver reads them at the end (validation
spawns a validator, the summary lists the lost actors, shutdown stops every actor). Owned by
one object, they have one writer, and the driver's loop shows only the order of its calls.
The object never calls back into the driver but for ``on_joined`` (meta.json rewritten when
nodes joined).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ..errors import PairflowError
from .workers.actors import NodeCacheSpec
from .workers.device_worker import DeviceSpec
from .workers.clients import NodeCacheClient, SchedulerClient
from .workers.frontier import FrontierClient, FrontierSpec
from .preflight import RunInputs
from .plan.sizing import RunPlan, one_object_loads, plan_nodes


class Membership:
    """The run's node caches, frontiers and device actors (see the module docstring).

    ``plan``: the run's plan (budgets; its nodes are the first ones); ``item_bytes``: the
    measured size of an item (node cache budgets); ``head``: the executor's head node;
    ``hierarchical``: a frontier per node with device actors; ``on_joined``: called after the
    actors of a node that joined mid-run are added to ``described``; ``read_ahead``: the items
    the node with actors loads before they are asked for (``policy.read_ahead``), or None."""

    def __init__(self, ex, cfg, plan: RunPlan, inputs: RunInputs, *, app, app_ref, sinks,
                 tile_dicts: list[dict], item_bytes: float | None, shipment, store,
                 head: dict, hierarchical: bool, on_joined: Callable[[], None],
                 read_ahead: list[int] | None = None):
        self.ex, self.cfg, self.plan, self.inputs = ex, cfg, plan, inputs
        self.app, self.app_ref, self.sinks, self.tile_dicts = app, app_ref, sinks, tile_dicts
        self.item_bytes, self.shipment, self.store = item_bytes, shipment, store
        self.head, self.hierarchical, self.on_joined = head, hierarchical, on_joined
        self.read_ahead = read_ahead           # for the one node with actors (policy.py)
        self.nodes = list(plan.nodes)          # NodePlan by node index; joined nodes appended
        self.handles: dict[str, Any] = {}      # actor id -> handle
        self.actor_node: dict[str, int] = {}   # actor id -> node index
        self.refs: dict = {}                   # run() ref -> actor id
        self.kill_reasons: dict[str, str] = {}
        self.kill_blame: dict[str, list[int]] = {}  # an actor killed for a tile: that tile
        self.lost_actors: list[dict] = []      # summary.json's "lost_actors"
        self.node_caches: list[NodeCacheClient] = []  # by node index
        self.cache_actors: list = []           # the node caches that are actors of their own
        self.frontiers: dict[int, Any] = {}    # node index -> its frontier (hierarchical)
        self.described: list[dict] = []        # meta.json's "actors"
        self.next_node_check = 0.0
        self.scheduler = self.metrics = None   # the coordinator's clients (start)
        self.stopped = False                   # stop() ran: every actor let go or killed

    # -- start ------------------------------------------------------------------------------
    def start(self, scheduler, metrics, head_cache: NodeCacheClient | None) -> list[dict]:
        """A cache actor on every node but the head when ``head_cache`` (the coordinator's)
        serves it, a frontier per node (hierarchical) and the device actors; returns their
        descriptions for meta.json."""
        self.scheduler, self.metrics = scheduler, metrics
        for n_idx, node_plan in enumerate(self.nodes):
            if n_idx == 0 and head_cache is not None:
                self.node_caches.append(head_cache)
            else:
                self._start_cache(n_idx)
            self._start_frontier(n_idx)
            for d in range(node_plan.actors):
                actor_id = self.spawn(n_idx, f"dev-{d}")
                self.described.append(self._describe(actor_id, n_idx, d))
        return self.described

    def run_devices(self) -> None:
        """Start every device actor's ``run()`` loop (the run's clock has started)."""
        for actor_id, handle in self.handles.items():
            self.refs[handle.run.remote()] = actor_id

    def cache_spec(self, n_idx: int) -> NodeCacheSpec:
        cfg, plan, node_plan = self.cfg, self.plan, self.nodes[n_idx]
        return NodeCacheSpec(
            node=f"node-{n_idx}", node_id=node_plan.node["node_id"], app=self.app,
            item_keys=self.inputs.keys,
            budget_bytes=None if cfg.host_cache_items else plan.host_bytes,
            budget_items=plan.l2_items if cfg.host_cache_items else None,
            eviction=plan.eviction,
            preprocess_on=node_plan.device if node_plan.preprocess_on_host else None,
            load_batch=plan.load_batch, load_slots=max(1, node_plan.node["cpus"]),
            inline_bytes=cfg.inline_item_bytes,
            expected_item_bytes=self.item_bytes, shipment=self.shipment,
            store=self.store,
            read_ahead=self.read_ahead if n_idx < len(self.plan.nodes) and node_plan.actors
            else None,
            one_object=one_object_loads(plan))

    def _start_cache(self, n_idx: int) -> None:
        actor = self.ex.node_cache(self.nodes[n_idx].node, self.cache_spec(n_idx),
                                   self.scheduler, self.metrics)
        self.cache_actors.append(actor)
        self.node_caches.append(NodeCacheClient(actor))

    def _start_frontier(self, n_idx: int) -> None:
        node_plan = self.nodes[n_idx]
        if not self.hierarchical or not node_plan.actors:
            return
        self.frontiers[n_idx] = self.ex.frontier(node_plan.node, FrontierSpec(
            node=f"node-{n_idx}", scheduler=self.scheduler, tiles=self.tile_dicts,
            row_items=self.inputs.items.row_items, col_items=self.inputs.items.col_items,
            batch=self.cfg.steal_batch, devices=node_plan.actors))

    def _describe(self, actor_id: str, n_idx: int, d: int) -> dict:
        node_plan = self.nodes[n_idx]
        return {"id": actor_id, "node": f"node-{n_idx}", "device": node_plan.device_of(d),
                "address": node_plan.node["address"], "node_id": node_plan.node["node_id"]}

    def spawn(self, n_idx: int, name: str) -> str:
        """Start one device actor on node ``n_idx`` (also a replacement, or a validator)."""
        node_plan, cfg, plan, items = self.nodes[n_idx], self.cfg, self.plan, self.inputs.items
        actor_id = f"node-{n_idx}/{name}"
        spec = DeviceSpec(
            actor_id=actor_id, node=f"node-{n_idx}", space=self.inputs.space,
            row_items=items.row_items, col_items=items.col_items,
            row_offsets=items.row_offsets, col_offsets=items.col_offsets,
            item_keys=self.inputs.keys, tiles=self.tile_dicts, sinks=self.sinks,
            node_cache=self.node_caches[n_idx], metrics=self.metrics,
            scheduler=FrontierClient(self.frontiers[n_idx], self.scheduler)
            if n_idx in self.frontiers else self.scheduler,
            device=node_plan.device_of(int(name.split("-")[1].split(".")[0])
                                       if name.startswith("dev-") else 0),
            in_flight=cfg.in_flight, l1_bytes=plan.l1_bytes,
            l1_items=plan.l1_items, eviction=plan.eviction,
            preprocessed_on_host=node_plan.preprocess_on_host,
            ship_results=self.shipment is not None, heartbeat_s=plan.heartbeat_s)
        self.handles[actor_id] = self.ex.device(node_plan.node, spec, self.app_ref)
        self.actor_node[actor_id] = n_idx
        return actor_id

    # -- changes while the run goes on -------------------------------------------------------
    def wait_runs(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for device actors' ``run()`` calls to end; one that ended
        in a lost actor is handled (``_on_actor_lost``)."""
        for ref in self.ex.wait(list(self.refs), timeout=timeout):
            actor_id = self.refs.pop(ref)
            try:
                self.ex.get(ref)
            except self.ex.lost_errors as exc:
                self._on_actor_lost(actor_id, exc)

    def all_gone(self) -> bool:
        """No device actor left and none running."""
        return not self.handles and self.refs == {}

    def _on_actor_lost(self, actor_id: str, exc: BaseException) -> None:
        reason = self.kill_reasons.get(actor_id) or f"actor {actor_id} died: {exc}"
        lost = self.ex.get(self.scheduler.actor_lost(actor_id, reason,
                                                     self.kill_blame.get(actor_id)))
        self.handles.pop(actor_id, None)
        n_idx = self.actor_node[actor_id]
        alive = {n["node_id"] for n in self.ex.nodes()}
        node_alive = self.nodes[n_idx].node["node_id"] in alive
        if node_alive:  # the GCS may not know yet: is the node's cache still answering?
            try:
                self.ex.get(self.node_caches[n_idx].ready(), timeout=5)
            except Exception:
                node_alive = False
        self.lost_actors.append({"actor": actor_id, "reason": reason, "tiles_requeued": lost,
                                 "node_alive": node_alive})
        if not node_alive:
            self.scheduler.forget_node(f"node-{n_idx}")
            return
        if n_idx in self.frontiers:  # its tiles go first in its node's queue
            self.lost_actors[-1]["tiles_requeued"] = self.ex.get(
                self.frontiers[n_idx].actor_lost.remote(actor_id), timeout=30)
        if self.cfg.replace_lost_actors:
            base = actor_id.split("/", 1)[1].split(".", 1)[0]
            new_id = self.spawn(n_idx, f"{base}.{len(self.lost_actors)}")
            self.refs[self.handles[new_id].run.remote()] = new_id

    def kill_overdue(self, overdue: list) -> None:
        """Kill the actors running a tile past its deadline (the scheduler's ``watch``)."""
        for t, actor_id, elapsed, deadline in overdue:
            if actor_id in self.kill_reasons or actor_id not in self.handles:
                continue
            self.kill_blame[actor_id] = [t]
            self._replace(actor_id, f"tile {t} passed its deadline of {deadline:.1f} s on "
                                    f"{actor_id} (running for {elapsed:.1f} s)")

    def kill_silent(self, silent: list, limit: float) -> None:
        """Kill the actors that sent no heartbeat for ``limit`` s."""
        for actor_id, quiet in silent:
            if actor_id in self.kill_reasons or actor_id not in self.handles:
                continue
            self._replace(actor_id, f"actor {actor_id} silent for {quiet:.1f} s (no heartbeat; "
                                    f"the limit is {limit:.1f} s)")

    def _replace(self, actor_id: str, reason: str) -> None:
        """Kill an actor (overdue or silent) so its tiles rerun and a new one takes its place;
        a thread cannot be killed, so an in-process run fails, saying why."""
        self.kill_reasons[actor_id] = reason
        if not self.ex.can_kill:
            raise PairflowError(f"{reason}; an in-process run cannot replace a worker (run it "
                                "on Ray: cluster=local)")
        self.ex.kill(self.handles[actor_id])

    def adopt_new_nodes(self, now: bool = False, every_s: float = 2.0) -> None:
        """A node that joined the cluster mid-run gets a node cache and device actors, which
        pull tiles like the others (the tiles were cut for the nodes at the start). Looks at
        most every ``every_s`` s, unless ``now``."""
        if now:
            self.next_node_check = 0.0
        if not self.ex.can_kill or time.time() < self.next_node_check:
            return  # (an in-process run has its one node)
        self.next_node_check = time.time() + every_s
        known = {p.node["node_id"] for p in self.nodes} | {self.head["node_id"]}
        joined = [n for n in self.ex.nodes() if n["node_id"] not in known]
        added = plan_nodes(joined, self.cfg) if any(n["cpus"] or n["gpus"] for n in joined) \
            else ()
        for node_plan in added:
            self.nodes.append(node_plan)
            n_idx = len(self.nodes) - 1
            self._start_cache(n_idx)
            self._start_frontier(n_idx)  # it joins the head's policy on its first refill
            for d in range(node_plan.actors):
                actor_id = self.spawn(n_idx, f"dev-{d}")
                self.described.append({**self._describe(actor_id, n_idx, d),
                                       "joined": time.time()})
                handle = self.handles[actor_id]
                handle.ready.remote()  # warm-up first: calls to an actor run in order
                self.refs[handle.run.remote()] = actor_id
            self.on_joined()

    # -- end ---------------------------------------------------------------------------------
    def cache_stats(self) -> list[dict]:
        """Every node cache's counters by node index; a cache on a lost node is gone with its
        counters (``{"lost": the error}``)."""
        out = []
        for cache in self.node_caches:
            try:
                out.append(self.ex.get(cache.stats(), timeout=30))
            except Exception as exc:
                out.append({"lost": f"{type(exc).__name__}"})
        return out

    def scheduling(self) -> dict:
        """Steals, hand-outs local to a node and round trips to the head (summary.json): the
        scheduler's counters with every frontier's (``{"lost": ...}``: lost with its node)."""
        out = self.ex.get(self.scheduler.scheduling())
        local = 0
        for n_idx, frontier in self.frontiers.items():
            try:
                stats = self.ex.get(frontier.stats.remote(), timeout=30)
            except Exception as exc:
                stats = {"lost": type(exc).__name__}
            local += stats.get("local_handouts", 0)
            out["per_node"].setdefault(f"node-{n_idx}", {}).update(stats)
        out["local_handouts"] = local
        out["round_trips_per_tile"] = out["head_round_trips"] / max(1, out["tiles"])
        return out

    def stop(self, coordinator, keep: bool = False, wait_s: float = 0.0) -> None:
        """Kill every worker and the run's ``coordinator``; ``keep`` (a run that finished
        cleanly): an executor that reuses actors (Ray's, warm.py) takes them back instead,
        waiting up to ``wait_s`` for them to let go of the run. Once: a later call (the
        driver's shutdown after its release) does nothing."""
        if self.stopped:
            return
        self.stopped = True
        actors = [*self.handles.values(), *self.cache_actors, *self.frontiers.values(),
                  coordinator]
        if keep and hasattr(self.ex, "keep"):
            actors = self.ex.keep(actors, wait_s)
        for a in actors:
            if a is not None:
                try:
                    self.ex.kill(a)
                except Exception:
                    pass
        if not keep and coordinator is not None and self.ex.name == "ray":
            self._await_gone(SchedulerClient(coordinator))

    def _await_gone(self, scheduler: SchedulerClient, timeout_s: float = 10.0) -> None:
        """``ray.kill`` returns before the actor is gone. The driver's ``_seal`` already closed
        the journal of a coordinator that answered; one that did not (busy past the seal's
        timeout) might still journal a tile, and a run stopped (cancel, Ctrl-C, failure) is
        final only once it has died."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            try:
                self.ex.get(scheduler.progress())
            except Exception:  # the actor died (or Ray is gone): nothing more is written
                return
            time.sleep(0.05)
