"""The command line shared by the data simulators: ``--out`` plus one option per parameter, and
a stamp so that a second run with the same parameters and the same recipe does nothing."""
from __future__ import annotations

import argparse
import hashlib
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(simulate, defaults: dict, folder: str, doc: str, recipe_file: str, argv=None) -> int:
    """Parse ``argv``, call ``simulate(out, **params)`` unless the stamp in ``out`` matches."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    data = os.environ.get("PAIRFLOW_DATA") or os.path.join(ROOT, ".data")
    parser.add_argument("--out", default=os.path.join(data, folder))
    for name, value in defaults.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args(argv)
    params = {k: getattr(args, k) for k in defaults}
    with open(recipe_file, "rb") as fh:  # a changed recipe makes new data
        stamp_value = {**params, "recipe_sha256": hashlib.sha256(fh.read()).hexdigest()}
    stamp = os.path.join(args.out, ".stamp")
    if os.path.exists(stamp):
        with open(stamp) as fh:
            if json.load(fh) == stamp_value:
                print(args.out)
                return 0
    simulate(args.out, **params)
    with open(stamp, "w") as fh:
        json.dump(stamp_value, fh)
    print(args.out)
    return 0
