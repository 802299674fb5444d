"""The live dashboard of a pairflow run (``pairflow dashboard RUN_DIR``): a Streamlit page that reads
only the run directory, so it shows a live run, a finished one or a copy from a cluster, and never
imports Ray or the engine. :mod:`.rundir` is the reading layer (no Streamlit); ``app.py`` is the
page, with one ``*_view.py`` module per view beside it and :mod:`.draw` for what they share;
``results_*.py`` show what the run found; :mod:`.cli` and :mod:`.serve` start the server.
"""
