"""pairflow's Hydra configs (config.yaml and its groups: app, cluster, cache, scheduler, sink,
farm), shipped as package data; ``CONFIG_DIR`` is their folder, for ``initialize_config_dir``."""
import os

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))
