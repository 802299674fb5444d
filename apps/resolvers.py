"""The OmegaConf resolvers pairflow's configs use, registered once per process.

Its own module because both a fresh run (``apps/cli.py``) and a resume (``apps/resume.py``,
which composes the config a fresh run would have) resolve the same configs: each imports this,
and neither the other.

* ``${pairflow_data:REL}``: a path in the data directory's unpacked Debian tree
  (``apps.data.data_path``: ``usr/share/...``);
* ``${pairflow_data_dir:REL}``: a path in the data directory itself (``apps.data.dataset_path``:
  the derived sets ``proteomes``, ``cameras``, ``particles``);
* ``${pairflow_or:A,B,...}``: the first argument that is not null (``oc.select`` keeps a null).
"""
from __future__ import annotations


def register_resolvers() -> None:
    from omegaconf import OmegaConf

    from pairflow.apps.data import data_path, dataset_path
    if not OmegaConf.has_resolver("pairflow_data"):
        OmegaConf.register_new_resolver("pairflow_data", lambda rel="": data_path(rel))
    if not OmegaConf.has_resolver("pairflow_data_dir"):
        OmegaConf.register_new_resolver("pairflow_data_dir", lambda rel="": dataset_path(rel))
    if not OmegaConf.has_resolver("pairflow_or"):
        OmegaConf.register_new_resolver("pairflow_or", lambda *xs: next(
            (x for x in xs if x is not None), None))
