"""Where an all-pairs run's work runs: the executors (Ray processes, or threads of this
process: ``executor``), the coordinator that holds the scheduler, the metrics and the head
node's cache (``coordinator``), the Ray side of load tasks and node caches (``actors``), a
device's worker (``device_worker``), a node's frontier for hierarchical scheduling
(``frontier``), the typed clients through which they call each other (``clients``) and the pool
of warm actors kept between runs (``warm``). It imports the vocabulary, ``cache``, ``plan`` and
``sinks``; the driver above it starts and keeps them (``membership``)."""
