"""The microscopy and phylogeny apps' warm-up loads their numba kernels, checked in a fresh
process (a kernel compiled by an earlier test would pass the check vacuously). Without it each
process's first tile paid the load: over a second of CPU, in an engine run a tenth of the 16
proteomes' work (benchmarks/RESULTS.md, Rocket's applications)."""
import subprocess
import sys
import textwrap

CHECK = textwrap.dedent("""
    import importlib, sys
    from pairflow.kernels.lazyjit import compiled
    from pairflow.apps.microscopy import MicroscopyApp
    from pairflow.apps.phylogeny import PhylogenyApp
    cases = [(MicroscopyApp([sys.argv[1]]),
              {"pairflow.kernels.registration": ["_register_compiled"]}),
             (PhylogenyApp([sys.argv[2]], k=7),
              {"pairflow.kernels.composition_vectors": ["_merge_index"],
               "pairflow.kernels.composition": ["_shared_words", "_on_support",
                                                "_shared_support"]})]
    for app, modules in cases:
        before = any(compiled(module) for module in modules)
        app.warmup("cpu")
        print(app.name, before, all(compiled(module) for module in modules),
              min(len(getattr(importlib.import_module(module), kernel).signatures)
                  for module, kernels in modules.items() for kernel in kernels))
    """)


def test_warmup_compiles_the_kernels_a_tile_calls(tmp_path):
    particle, proteome = tmp_path / "p.csv", tmp_path / "p.faa"
    particle.write_text("x,y\n0,0\n10,0\n0,12\n")
    proteome.write_text(">p1\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVK\n")
    out = subprocess.run([sys.executable, "-c", CHECK, str(particle), str(proteome)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [line.split() for line in out.stdout.splitlines()]
    assert [line[:3] for line in lines] == [["microscopy", "False", "True"],
                                            ["phylogeny", "False", "True"]]
    assert all(int(line[3]) >= 1 for line in lines)
