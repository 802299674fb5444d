"""``pairflow dashboard RUN_DIR [--host 127.0.0.1] [--port 8501] [--refresh 1.0]``.

Starts Streamlit (``streamlit run dashboard/app.py``, through dashboard/serve.py) on the dashboard app, bound to the loopback interface unless ``--host`` says
otherwise.  ``main`` replaces the current process with Streamlit (``os.execv``) so that signals
reach the server directly; ``main(argv, exec_=False)`` runs it as a child and returns its exit code.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().with_name("app.py")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pairflow dashboard",
        description="Live dashboard of a pairflow run directory (live, finished, or copied from a cluster).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory to show (may not exist yet: the page waits)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to bind (default 127.0.0.1; use 0.0.0.0 explicitly to serve other machines)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8501)")
    p.add_argument("--refresh", type=float, default=1.0, help="seconds between refreshes (default 1.0)")
    return p


def build_command(run_dir: str | os.PathLike, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                  refresh: float | None = None, python: str | None = None) -> list[str]:
    """The command line ``main`` runs (also used by the tests).

    ``python -m dashboard.serve OPTIONS -- RUN_DIR`` is ``python -m streamlit run dashboard/app.py
    OPTIONS -- RUN_DIR`` with the app's imports and the first read of the run directory done while
    the server starts (see dashboard/serve.py)."""
    cmd = [
        python or sys.executable, "-m", "pairflow.dashboard.serve",  # = `python -m streamlit run app.py`, pre-warmed
        "--server.address", host,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none",
        "--server.runOnSave", "false",
        "--global.developmentMode", "false",
        "--client.toolbarMode", "viewer",
        "--",
        str(Path(run_dir).expanduser().resolve()),
    ]
    if refresh is not None:
        cmd += ["--refresh", str(refresh)]
    return cmd


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str] | None = None, exec_: bool = True) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if not 0 < args.port < 65536:
        print(f"pairflow dashboard: invalid port {args.port}", file=sys.stderr)
        return 2
    run_dir = Path(args.run_dir).expanduser()
    if run_dir.exists() and not run_dir.is_dir():
        print(f"pairflow dashboard: {run_dir} is not a directory", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        print(f"pairflow dashboard: serving on {args.host}:{args.port} — anyone who can reach this address "
              "can read the run directory (no authentication).", file=sys.stderr)
    cmd = build_command(run_dir, args.host, args.port, args.refresh)
    print(f"pairflow dashboard: http://{args.host}:{args.port}  ({run_dir})", file=sys.stderr, flush=True)
    if exec_:
        os.execv(cmd[0], cmd)  # does not return
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
