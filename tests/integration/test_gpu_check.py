"""scripts/gpu_check.py on the CPU (torch-cpu), as CI runs it between GPU runs (issue 64): the
pure-Python bundle built by scripts/gpu_bundle.sh is what it imports, the packages the GPU
machine lacks are refused, and its JSON says every device path equals its numpy oracle, the
engine's in-process run on the device equals the CPU run (top-k, R, tier counters, evictions
under the L1 budget) and the throughput parts ran; scripts/gpu_report.py makes RESULTS.md's
section of it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = {"bitset_intersections k=5", "bitset_intersections k=7",
           "bitset_mm.jaccard_topk_mm k=5 top-10", "jaccard.intersection_counts (merge) k=21",
           "composition.cv_distance_matrix k=4", "prnu.noise_residual 64x64",
           "prnu.ncc_pce (matmul form)", "prnu_fft.ncc_pce_fft (batched FFT form)",
           "registration.register"}
REFUSED = {"ray", "zarr", "hydra", "omegaconf", "pysam", "parasail", "dask"}


def test_the_device_check_runs_green_on_the_cpu(tmp_path):
    bundle, out = tmp_path / "bundle", tmp_path / "out"
    subprocess.run(["bash", os.path.join(REPO, "scripts", "gpu_bundle.sh"), str(bundle)],
                   check=True, capture_output=True, text=True, timeout=120)
    assert (bundle / "array_api_compat" / "__init__.py").is_file()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    run = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gpu_check.py"),
                          "--device", "cpu", "--quick", "--out", str(out), "--bundle",
                          str(bundle)], capture_output=True, text=True, timeout=900, env=env)
    assert sorted(os.listdir(out)) == ["gpu.json", "gpu_check.log"], run.stdout[-3000:]
    report = json.loads((out / "gpu.json").read_text())
    parts = report["parts"]
    failed = {k: v.get("error") or v.get("skipped") for k, v in parts.items()
              if "result" not in v}
    assert not failed, (failed, run.stdout[-3000:])

    modules = parts["env"]["result"]["modules"]
    assert modules["array_api_compat"]["file"].startswith(str(bundle))
    assert not REFUSED & set(report["imported"]) and REFUSED <= set(report["meta"]["forbid"])

    checks = parts["checks"]["result"]
    assert {c["kernel"] for c in checks} == KERNELS
    assert {c["backend"] for c in checks} == {"torch-cpu"}
    bad = [c for c in checks if not c["equal"] or "error" in c]
    assert not bad, bad

    engine = parts["engine"]["result"]
    cpu, dev = engine["runs"]["cpu"], engine["runs"]["device"]
    assert engine["result_equal"] and engine["R_equal"] and engine["tiers_equal"]
    assert (cpu["device"], dev["device"]) == ("cpu", "torch-cpu")
    assert dev["executor"] == "inprocess" and dev["n_actors"] == 1
    assert dev["tiers"]["L1"] == cpu["tiers"]["L1"] and dev["tiers"]["L1"]["evictions"] > 0
    assert engine["topk_rows"] == 300 * 10  # each of the 300 reads' ten best
    assert dev["seen"] == [["torch-cpu", "cpu"]]

    (reads,) = parts["reads"]["result"]
    assert reads["equal"] and reads["pairs"] == 2000 * 1999 // 2 and reads["form"] == "int8"
    forensics = parts["forensics"]["result"]
    assert forensics["matmul"]["equal"] and forensics["fft"]["equal"]
    assert forensics["pairs"] == 12 * 11 // 2
    assert report["ok"] is True and run.returncode == 0
    assert "ok: True" in (out / "gpu_check.log").read_text()

    # RESULTS.md's section from the JSON: every kernel's row, the verdict, the engine's runs
    text = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gpu_report.py"),
                           str(out / "gpu.json")], check=True, capture_output=True,
                          text=True).stdout
    assert "All comparisons equal: yes" in text and "**no**" not in text
    assert all(f"| {kernel} | torch-cpu |" in text for kernel in KERNELS)
    assert "| device | torch-cpu | 1 | 1 |" in text
