"""``python -m dashboard.serve [streamlit options] -- RUN_DIR [--refresh S]``

The same as ``python -m streamlit run dashboard/app.py [streamlit options] -- RUN_DIR``, except that
while the server starts, a background thread imports what the app needs (pandas, altair, pyarrow)
and reads the run directory once into the shared :class:`~dashboard.rundir.RunView` (and a dense
result's first heatmap, :func:`dashboard.results_dense.warm`), so the first page a browser opens
does not wait for them.  ``pairflow dashboard`` runs this.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")


def run_dir_from_args(argv: list[str]) -> str | None:
    """RUN_DIR: the first positional argument after ``--`` (the app's own arguments)."""
    if "--" not in argv:
        return None
    tail = argv[argv.index("--") + 1:]
    skip = False
    for a in tail:
        if skip:
            skip = False
            continue
        if a.startswith("--"):
            skip = "=" not in a  # options of the app take one value
            continue
        return a
    return None


def warm(run_dir: str | None) -> None:
    try:
        import altair  # noqa: F401
        import pandas  # noqa: F401

        from pairflow.dashboard.rundir import shared_view

        if run_dir:
            view = shared_view(run_dir).refresh()
            ov = view.overview()
        import pyarrow.parquet  # noqa: F401  (only needed for trace.parquet)
        if run_dir:  # a big dense result's heatmap (the results view)
            from pairflow.dashboard.results_dense import warm as warm_results
            plan = view.matrix.plan()
            warm_results(run_dir, plan.to_dict("records") if not plan.empty else None, ov.get("space"),
                         ov["state"] in ("finished", "failed", "interrupted"))
    except Exception:  # noqa: BLE001 - warming is an optimisation; the app reports real problems
        pass


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    threading.Thread(target=warm, args=(run_dir_from_args(argv),), daemon=True, name="dashboard-warm").start()
    from streamlit.web import cli as stcli

    sys.argv = ["streamlit", "run", str(APP), *argv]
    stcli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
