"""``pairflow data install`` fills the data directory; ``pairflow data where`` names it.

The example data are real files from Debian data packages, downloaded with ``apt-get download``
and unpacked with ``dpkg -x`` into ``root/`` (unpacked, not installed: no root rights needed
once the lists are there), and the sets derived from them (``apps/datasets.py``). Each step is
idempotent: a package group has a stamp (``.stamp-debs``, ``.stamp-debs-farm``) and a ``.deb``
already in ``debs/`` is not fetched again; a derived set has its own stamp. A derived set whose
extra is not installed, or Debian packages where there is no apt, are skipped with a one-line
note, never an error: the apps run on the user's own inputs without them.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

from pairflow.apps.data import data_dir

# stamp -> the Debian packages it stands for: the apps' example data (genomes, GenBank records,
# reads, HMMER's tutorial), and app=farm's (Swiss-Prot entries, BAliBASE sets for clustalo)
DEB_GROUPS = {
    ".stamp-debs": ("ragout-examples", "kaptive-data", "bowtie2-examples", "hmmer-examples"),
    ".stamp-debs-farm": ("emboss-test", "dialign-tx-data"),
}
DERIVED = ("proteomes", "cameras", "particles")


class InstallError(RuntimeError):
    """A step that could have worked failed (a download, an unpack)."""


def _say(line: str) -> None:
    print(f"pairflow data: {line}", file=sys.stderr, flush=True)


def install_debs(home: str, stamp: str, packages, force: bool = False) -> str:
    """Unpack ``packages`` into ``home/root`` unless ``stamp`` is there; fetch with
    ``apt-get download`` only those whose ``.deb`` is not in ``home/debs`` yet."""
    stamp_path = os.path.join(home, stamp)
    if os.path.exists(stamp_path) and not force:
        return "up to date"
    debs_dir, root = os.path.join(home, "debs"), os.path.join(home, "root")

    def deb_of(package: str) -> str | None:
        found = sorted(glob.glob(os.path.join(debs_dir, f"{package}_*.deb")))
        return found[-1] if found else None
    missing = [p for p in packages if deb_of(p) is None]
    if missing and shutil.which("apt-get") is None:
        return (f"skipped: no apt-get here to fetch {' '.join(missing)} (a Debian or Ubuntu "
                f"machine fetches them); name your own inputs instead")
    if shutil.which("dpkg-deb") is None:
        return "skipped: no dpkg-deb here to unpack the Debian packages"
    os.makedirs(debs_dir, exist_ok=True)
    if missing:
        out = subprocess.run(["apt-get", "download", *missing], cwd=debs_dir,
                             capture_output=True, text=True)
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["failed"])[-1]
            raise InstallError(f"apt-get download {' '.join(missing)}: {last} (are the package "
                               f"lists there? sudo apt-get update)")
    os.makedirs(root, exist_ok=True)
    for package in packages:
        out = subprocess.run(["dpkg-deb", "-x", deb_of(package), root], capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise InstallError(f"dpkg-deb -x {deb_of(package)}: {out.stderr.strip()}")
    with open(stamp_path, "w") as fh:
        fh.write("\n".join(packages) + "\n")
    return (f"fetched {' '.join(missing)}; " if missing else "") + \
        f"unpacked {len(packages)} packages into {root}"


def install_derived(home: str, name: str, force: bool = False) -> str:
    """Make the derived set ``name`` unless its stamp is current, or say why it is skipped."""
    from pairflow.apps import datasets
    from pairflow.apps.extras import DATASET_EXTRAS, missing
    extra = DATASET_EXTRAS.get(name)  # none: the core makes it
    if extra and missing(extra):
        return f"skipped: it needs pairflow's {extra} extra (pip install 'pairflow[{extra}]')"
    if name == "proteomes" and not glob.glob(os.path.join(home, "root", datasets.GENOMES)):
        return "skipped: it is predicted from the ragout genomes, which are not here"
    start = time.perf_counter()
    folder, made = datasets.make(name, home, force=force)
    return f"made in {time.perf_counter() - start:.1f} s: {folder}" if made else "up to date"


def install(home: str | None = None, only=None, force: bool = False) -> dict[str, str]:
    """Every step (or those named in ``only``: ``debs``, ``proteomes``, ``cameras``,
    ``particles``) into ``home`` (default: the data directory); returns each step's outcome
    (``failed: ...`` for a download or an unpack that failed: the other steps are still done)."""
    home = home or data_dir()
    os.makedirs(home, exist_ok=True)
    steps = list(only) if only else ["debs", *DERIVED]
    unknown = set(steps) - {"debs", *DERIVED}
    if unknown:
        raise InstallError(f"unknown steps {sorted(unknown)}; known: debs {' '.join(DERIVED)}")
    done = {}
    if "debs" in steps:
        for stamp, packages in DEB_GROUPS.items():
            try:
                outcome = install_debs(home, stamp, packages, force)
            except InstallError as exc:  # said, and the other steps still done
                outcome = f"failed: {exc}"
            done[stamp.removeprefix(".stamp-")] = outcome
            _say(f"{stamp.removeprefix('.stamp-')}: {outcome}")
    for name in DERIVED:
        if name in steps:
            done[name] = outcome = install_derived(home, name, force)
            _say(f"{name}: {outcome}")
    return done


def main(argv: list[str] | None = None) -> int:
    """``pairflow data install [--only STEP ...] [--force]`` | ``pairflow data where``."""
    parser = argparse.ArgumentParser(
        prog="pairflow data", description="The example data directory (PAIRFLOW_DATA, else the "
        "user data directory): where it is, and filling it.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("where", help="print the data directory")
    fill = sub.add_parser("install", help="fetch the Debian data packages (apt-get download, "
                          "unpacked) and make the derived sets; a second run does nothing")
    fill.add_argument("--only", nargs="+", metavar="STEP", choices=["debs", *DERIVED],
                      help="only these steps (debs, proteomes, cameras, particles)")
    fill.add_argument("--force", action="store_true",
                      help="unpack and make again even where a stamp is current")
    args = parser.parse_args(argv)
    if args.command == "where":
        print(data_dir())
        return 0
    try:
        done = install(only=args.only, force=args.force)
    except InstallError as exc:
        print(f"pairflow: error: {exc}", file=sys.stderr)
        return 2
    print(data_dir())
    return 2 if any(outcome.startswith("failed: ") for outcome in done.values()) else 0
