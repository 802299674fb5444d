"""What every kind of run shares: the run directory and its journal, metrics and progress, files
through fsspec, result shipping, and starting or joining Ray (runtime.py)."""
