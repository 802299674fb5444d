"""pairflow live job dashboard (Streamlit).

    pairflow dashboard RUN_DIR                      # serves on 127.0.0.1:8501
    streamlit run dashboard/app.py -- RUN_DIR [--refresh 1.0]

Reads only the run directory (see docs/run-directory.md) through :mod:`dashboard.rundir`; never
imports Ray or the engine.  One :class:`~dashboard.rundir.RunView` per run directory
(``shared_view``) is shared by all browser sessions and refreshed incrementally (only the bytes
appended since the last refresh are read) inside a fragment that reruns every ``--refresh`` seconds.
The sidebar offers only the views that apply to the run (``RunView.views``: no farm view for an
all-pairs run, no matrix for a pipeline ...); each view draws in a module of its own beside this
one (``overview_view.py``, ``devices_view.py`` ...).

The first line of every view is a machine-readable status line, e.g.
``state: running · tiles done: 12 / 36 · pairs done: 66 / 276 · R: 1.234 · ETA: 5 s``,
which the browser tests read.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from pathlib import Path

import altair as alt
import streamlit as st

from pairflow.dashboard import (cache_view, devices_view, draw, farm_view, matrix_view, overview_view,
                                pipelines_view, scheduling_view, timeline_view)
from pairflow.dashboard.rundir import VIEWS, WAITING, RunView, shared_view

alt.data_transformers.disable_max_rows()


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="dashboard/app.py", description="pairflow run dashboard")
    p.add_argument("run_dir", nargs="?", default=os.environ.get("PAIRFLOW_RUN_DIR", "."),
                   help="the run directory to show (may not exist yet)")
    p.add_argument("--refresh", type=float, default=float(os.environ.get("PAIRFLOW_DASHBOARD_REFRESH", "1.0")),
                   help="seconds between refreshes (default 1.0)")
    args, _unknown = p.parse_known_args(argv)
    args.refresh = min(max(args.refresh, 0.2), 60.0)
    return args


def show_results(view: RunView, ov: dict) -> None:
    """What the run found (dashboard/results_view.py), imported on first use."""
    from pairflow.dashboard.results_view import view_results
    view_results(view, ov)


RENDER = {"overview": overview_view.show, "devices": devices_view.show, "cache": cache_view.show,
          "matrix": matrix_view.show, "timeline": timeline_view.show, "pipelines": pipelines_view.show,
          "farm": farm_view.show, "scheduling": scheduling_view.show, "results": show_results}
assert list(RENDER) == list(VIEWS)


def offered(view: RunView) -> list[str]:
    """The views that apply to the run as read now (all of them if it cannot be read)."""
    try:
        return view.refresh().views()
    except Exception:  # noqa: BLE001 - the page says what is wrong; the sidebar still works
        return list(VIEWS)


# --------------------------------------------------------------------------- page


def main() -> None:
    args = parse_args(sys.argv[1:])
    run_dir = str(Path(args.run_dir).expanduser().resolve())
    st.set_page_config(page_title=f"pairflow · {Path(run_dir).name}", layout="wide")
    view = shared_view(run_dir)  # one per server process, refreshed incrementally
    views = offered(view)
    with st.sidebar:
        st.markdown("### pairflow")
        st.caption(run_dir)
        choice = st.radio("view", views, key="view", bind="query-params")
        live = st.toggle("live refresh", value=True, key="live", help=f"every {args.refresh:g} s")

    @st.fragment(run_every=args.refresh if live else None)
    def body() -> None:
        try:
            view.refresh()
            ov = view.overview()
            now = view.views()
        except Exception as e:  # noqa: BLE001 - an unreadable directory must not become a traceback page
            st.markdown("`state: unreadable`")
            st.warning(f"cannot read {run_dir}: {type(e).__name__}: {e}")
            return
        if now != views:  # the run has said what it is: the sidebar offers its views
            st.rerun()
        draw.header(ov)
        if ov["state"] == WAITING:
            return
        try:
            RENDER.get(choice or "overview", overview_view.show)(view, ov)
        except Exception as e:  # noqa: BLE001 - a view must not take the page down with a traceback
            st.warning(f"{choice} view: cannot draw this yet ({type(e).__name__}: {e})")
        st.caption(f"refreshed {_dt.datetime.now().strftime('%H:%M:%S')} · read in "
                   f"{1000 * view.refresh_seconds:.1f} ms")

    body()


main()
