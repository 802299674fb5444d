"""How an all-pairs run is cut and ordered, free of Ray: the tile side (``leaf``), the run's
sizing from measured costs to a ``RunPlan`` (``sizing``, shared by the driver and the
simulator), the tile orders and the ``TilePolicy`` that hands tiles out (``policy``), dealing
tiles to nodes and stealing between them (``stealing``), the simulator that replays the policy
without Ray to choose a plan (``simulate``, with the machine's costs in ``drift``), and the
``Scheduler``, the mechanism around the policy that the coordinator holds (``scheduler``). It
imports the vocabulary, ``cache`` (tiers, eviction, the L3 directory) and ``sinks`` (the
shipped journal), never the workers or the driver."""
