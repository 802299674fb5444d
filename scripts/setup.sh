#!/usr/bin/env bash
# Sets up everything pairflow needs on a fresh Debian machine, idempotently:
#   - Debian tools used as oracles (mash) and browser for dashboard tests (chromium)
#   - the tools app=farm runs unmodified (ncbi-blast+, hmmer, clustalo)
#   - a virtualenv in .venv with pairflow installed editable, with every extra ([all,test])
#   - the example data in the user data directory ($PAIRFLOW_DATA, else ~/.local/share/pairflow):
#     `pairflow data install` (Debian data packages unpacked, not installed; the derived sets)
# Re-running is cheap: each step checks a stamp file first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# the data directory as pairflow resolves it on Linux (platformdirs' user_data_dir); only its
# stamps are read here, to know whether apt's package lists are needed for apt-get download
DATA="${PAIRFLOW_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/pairflow}"
VENV="${PAIRFLOW_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

APT_TOOLS="mash chromium"
# command -> Debian package: the tools app=farm wraps (blastp is also app=align's E-value oracle)
FARM_TOOLS="blastp:ncbi-blast+ hmmsearch:hmmer clustalo:clustalo"
# and the C compiler that builds the AVX-512 Smith-Waterman kernel (kernels/_sw_simd.c) at install
FARM_TOOLS="$FARM_TOOLS gcc:gcc"

need_apt=0
for t in mash chromium; do command -v "$t" >/dev/null 2>&1 || need_apt=1; done
for tp in $FARM_TOOLS; do command -v "${tp%%:*}" >/dev/null 2>&1 || need_apt=1; done
[ -f "$DATA/.stamp-debs" ] || need_apt=1
[ -f "$DATA/.stamp-debs-farm" ] || need_apt=1
if [ "$need_apt" = 1 ]; then
  echo "[setup] apt-get update" >&2
  $SUDO apt-get update -qq >/dev/null
fi
for t in mash chromium; do
  if ! command -v "$t" >/dev/null 2>&1; then
    echo "[setup] apt-get install $t" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$t" >/dev/null
  fi
done
for tp in $FARM_TOOLS; do
  if ! command -v "${tp%%:*}" >/dev/null 2>&1; then
    echo "[setup] apt-get install ${tp#*:}" >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${tp#*:}" >/dev/null
  fi
done

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$VENV/.stamp-pip" ] || [ pyproject.toml -nt "$VENV/.stamp-pip" ] ||
   [ kernels/_sw_simd.c -nt "$VENV/.stamp-pip" ]; then
  echo "[setup] pip install (torch pinned to the CPU build on disk)" >&2
  # torch is pinned: a looser spec pulls a multi-GB CUDA build. pip installs it (pip finds the
  # CPU build on this machine's disk, PIP_FIND_LINKS; uv does not look there) ...
  "$VENV/bin/pip" install -q "torch==2.13.0"
  # ... and uv the rest: it downloads and unpacks in parallel, where pip took 3 minutes on a
  # clean machine. Bytecode compiled as pip would: with PYTHONDONTWRITEBYTECODE set, every
  # process (each Ray worker too) would otherwise compile what it imports, on every start.
  "$VENV/bin/pip" install -q "uv>=0.5"
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode -e ".[all,test]"
  touch "$VENV/.stamp-pip"
fi
# the example data (apps/data_install.py): the Debian data packages (apt-get download, dpkg -x;
# a stamp per group), then the derived sets (proteomes, cameras, particles; a stamp each)
DATA="$("$VENV/bin/pairflow" data install)"
# the project's bytecode, as pip compiles an installed package's: where Python may not write it
# (PYTHONDONTWRITEBYTECODE, a read-only checkout) every process, each Ray worker included,
# would compile every module it imports from source, on every start
"$VENV/bin/python" -m compileall -q apps engine kernels operators benchmarks scripts >/dev/null
echo "[setup] ready: $VENV, data in $DATA" >&2
