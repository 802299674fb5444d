"""Scientific applications: each wires operators and kernels into an engine run.

Every app module exposes ``build(cfg) -> (app, sinks)`` (an all-pairs run) or its own
``run(cfg, run_dir) -> result`` (e.g. a pipeline), and ``report(result) -> str``, with the
optional hooks ``pairflow.apps.protocol`` declares (the CLI holds each module to it).
"""
APPS = {"jaccard": "pairflow.apps.jaccard", "align": "pairflow.apps.align", "hep": "pairflow.apps.hep",
        "jaccard_filtered": "pairflow.apps.jaccard_filtered", "synthetic": "pairflow.apps.synthetic",
        "phylogeny": "pairflow.apps.phylogeny", "forensics": "pairflow.apps.forensics",
        "microscopy": "pairflow.apps.microscopy", "farm": "pairflow.apps.farm"}
