"""The microscopy and phylogeny apps' warm-up loads their numba kernels (a fresh process per
case: a kernel compiled by an earlier test would pass the check vacuously). Without it each
process's first tile paid the load: over a second of CPU, in an engine run a tenth of the 16
proteomes' work (benchmarks/RESULTS.md, Rocket's applications)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = {
    "microscopy": ("from apps.microscopy import MicroscopyApp\n"
                   "app = MicroscopyApp([INPUT])\n",
                   "x,y\n0,0\n10,0\n0,12\n", "kernels.registration", "_register_compiled"),
    "phylogeny": ("from apps.phylogeny import PhylogenyApp\n"
                  "app = PhylogenyApp([INPUT], k=7)\n",
                  ">p1\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVK\n",
                  "kernels.composition", "_merge_member"),
}


@pytest.mark.parametrize("app", sorted(CASES))
def test_warmup_compiles_the_kernels_a_tile_calls(app, tmp_path):
    make, text, module, kernel = CASES[app]
    path = tmp_path / ("p.csv" if app == "microscopy" else "p.faa")
    path.write_text(text)
    code = textwrap.dedent(f"""
        import importlib, sys
        sys.path.insert(0, {ROOT!r})
        from kernels.lazyjit import compiled
        INPUT = {str(path)!r}
        """) + make + textwrap.dedent(f"""
        before = compiled({module!r})
        app.warmup("cpu")
        kernel = getattr(importlib.import_module({module!r}), {kernel!r})
        print(before, compiled({module!r}), len(kernel.signatures))
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    before, after, signatures = out.stdout.split()
    assert (before, after) == ("False", "True")
    assert int(signatures) >= 1
