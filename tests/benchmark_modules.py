"""A benchmark script's module, loaded from its path: benchmarks/ is a folder of scripts, not a
package, and its names (``report``, ``apps``) would clash with the project's own on sys.path."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name: str):
    """``benchmarks/{name}.py`` as a module named ``bench_{name}``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                  ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: the module can find itself
    spec.loader.exec_module(module)
    return module
