"""Scientific applications: each wires operators and kernels into an engine run.

Every app module exposes ``build(cfg) -> (app, sinks)`` (an all-pairs run) or its own
``run(cfg, run_dir) -> result`` (e.g. a pipeline), and ``report(result) -> str``.
"""
APPS = {"jaccard": "apps.jaccard", "align": "apps.align", "hep": "apps.hep",
        "jaccard_filtered": "apps.jaccard_filtered", "synthetic": "apps.synthetic",
        "phylogeny": "apps.phylogeny", "forensics": "apps.forensics",
        "microscopy": "apps.microscopy", "farm": "apps.farm"}
