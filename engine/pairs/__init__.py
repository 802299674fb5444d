"""All-pairs comparison: ``pairflow.allpairs`` is the face; this package is its core, in layers.

Each layer imports only from itself and the layers below it, and no module imports in a circle
(tests/unit/test_layers.py checks both), lowest first:

0. the shared vocabulary, here: ``space`` (pair spaces, tiles, the quadtree), ``items`` (item
   ids and rows/columns), ``app`` (what a user writes), ``config`` (a run's knobs), ``codec``
   (items as typed data) and ``result`` (what ``allpairs`` returns);
1. ``sinks/`` (where results go) and ``cache/`` (the item tiers L1-L4, eviction, loading),
   neither importing the other;
2. ``plan/`` (tile side, sizing, orders and policy, dealing and stealing, the simulator, the
   scheduler);
3. ``workers/`` (executors, the coordinator, actors, device workers, frontiers, clients, the
   warm pool);
4. the run, here: ``driver`` (``allpairs``), ``preflight``, ``membership``, ``summary``,
   ``validation`` and ``session``.

Below all of them: ``engine.errors`` and ``engine.run``; above: ``engine.pipeline``,
``engine.toolfarm`` and ``engine/__init__.py``. docs/architecture.md names each concept's home.
"""
