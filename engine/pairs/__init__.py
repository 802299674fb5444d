"""All-pairs comparison: pair spaces, tiles, cache tiers, the planner, sinks, the driver and its
executors (in-process threads or Ray actors). ``pairflow.allpairs`` is the face; the modules here
are its parts (docs/architecture.md names each one's concept)."""
