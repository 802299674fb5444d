"""Scientific applications: each wires operators and kernels into an engine run.

Every app module exposes ``build(cfg) -> (app, sinks)`` and ``report(result) -> str``.
"""
APPS = {"jaccard": "apps.jaccard", "align": "apps.align"}
