"""pairflow's Hydra launcher for Ray clusters: ``pairflow -m ... hydra/launcher=pairflow``.

``hydra_plugins`` is a namespace package (no ``__init__.py``): Hydra finds its launchers there.
"""
