#!/usr/bin/env bash
# The pure-Python packages an in-process pairflow run imports that the GPU machine lacks
# (array-api-compat: kernels/backend.py's namespaces), copied from this venv's installed
# wheels (each file their RECORD lists) into one folder that travels with the working tree:
# the device tool's `carry` of an ignored path (64 MiB in all; this is ~1 MB).
#
#   bash scripts/gpu_bundle.sh            # -> .gpu_bundle/ (ignored by .gitignore)
#   bash scripts/gpu_bundle.sh DIR        # -> DIR
#
# scripts/gpu_check.py puts the folder first on sys.path (--bundle, default .gpu_bundle).
# Only pure-Python distributions: a compiled one is refused (it would need the GPU machine's
# Python, 3.12, not this venv's; carry a wheel for it as /work/.library/device/README.md says).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.gpu_bundle}"
packages="${GPU_BUNDLE_PACKAGES:-array-api-compat}"
rm -rf "$out"
mkdir -p "$out"
.venv/bin/python - "$out" $packages <<'PY'
import importlib.metadata as md
import os
import shutil
import sys

out, names = sys.argv[1], sys.argv[2:]
for name in names:
    dist = md.distribution(name)
    copied = 0
    for f in dist.files or []:
        rel = str(f)
        if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
            continue  # scripts outside site-packages, bytecode
        if rel.endswith((".so", ".pyd", ".dylib")):
            sys.exit(f"{name} is not pure Python ({rel}): carry a wheel built for the GPU "
                     "machine's Python instead")
        src = dist.locate_file(f)
        dst = os.path.join(out, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
        copied += 1
    print(f"{name} {dist.version}: {copied} files")
PY
du -sh "$out"
