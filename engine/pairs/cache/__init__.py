"""The item caches of an all-pairs run, tier by tier, free of Ray: the accounting core every
tier shares and the asynchronous fronts of L1 (a device actor's) and L2 (a node's) (``tiers``),
the rules by which a tier evicts (``eviction``), a node's L2 (``node_cache``), L3, the directory
of which node holds which item (``directory``), L4, parsed items kept across runs (``store``),
and loading an item from its key to a parsed host item, through L4 (``loading``). It imports
only the vocabulary of ``engine.pairs`` (app, codec, items, space) and ``engine.run``."""
