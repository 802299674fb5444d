#!/usr/bin/env bash
# Sets up everything pairflow needs on a fresh Debian machine, idempotently:
#   - Debian tools used as oracles (mash) and browser for dashboard tests (chromium)
#   - the tools app=farm runs unmodified (ncbi-blast+, hmmer, clustalo)
#   - real data from Debian packages, unpacked (not installed) into .data/
#   - a virtualenv in .venv with pairflow installed editable, plus test extras
# Re-running is cheap: each step checks a stamp file first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DATA="${PAIRFLOW_DATA:-$ROOT/.data}"
VENV="${PAIRFLOW_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

APT_TOOLS="mash chromium"
# command -> Debian package: the tools app=farm wraps (blastp is also app=align's E-value oracle)
FARM_TOOLS="blastp:ncbi-blast+ hmmsearch:hmmer clustalo:clustalo"
# farm data (own stamp): Swiss-Prot entries, BAliBASE sets for clustalo
FARM_DEBS="emboss-test dialign-tx-data"
DATA_DEBS="ragout-examples kaptive-data bowtie2-examples hmmer-examples"

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

if [ ! -f "$DATA/.stamp-debs" ]; then
  mkdir -p "$DATA/debs" "$DATA/root"
  ( cd "$DATA/debs" && apt-get download $DATA_DEBS >/dev/null )
  for deb in "$DATA"/debs/*.deb; do dpkg -x "$deb" "$DATA/root"; done
  touch "$DATA/.stamp-debs"
  echo "[setup] data unpacked into $DATA/root" >&2
fi
if [ ! -f "$DATA/.stamp-debs-farm" ]; then
  mkdir -p "$DATA/debs" "$DATA/root"
  ( cd "$DATA/debs" && apt-get download $FARM_DEBS >/dev/null )
  for p in $FARM_DEBS; do dpkg -x "$DATA"/debs/${p}_*.deb "$DATA/root"; done
  touch "$DATA/.stamp-debs-farm"
  echo "[setup] farm data unpacked into $DATA/root" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$VENV/.stamp-pip" ] || [ pyproject.toml -nt "$VENV/.stamp-pip" ]; then
  echo "[setup] pip install (torch pinned to the CPU build on disk)" >&2
  # torch is pinned: a looser spec pulls a multi-GB CUDA build. pip installs it (pip finds the
  # CPU build on this machine's disk, PIP_FIND_LINKS; uv does not look there) ...
  "$VENV/bin/pip" install -q "torch==2.13.0"
  # ... and uv the rest: it downloads and unpacks in parallel, where pip took 3 minutes on a
  # clean machine. Bytecode compiled as pip would: with PYTHONDONTWRITEBYTECODE set, every
  # process (each Ray worker too) would otherwise compile what it imports, on every start.
  "$VENV/bin/pip" install -q "uv>=0.5"
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode -e ".[test]"
  touch "$VENV/.stamp-pip"
fi
# app=phylogeny's proteomes, predicted from the ragout genomes (deterministic; own stamp)
"$VENV/bin/python" scripts/predict_proteomes.py --data "$DATA" >/dev/null
# app=forensics' shots of simulated cameras, from scikit-image's photographs (own stamp)
"$VENV/bin/python" scripts/simulate_cameras.py --out "$DATA/cameras" >/dev/null
# app=microscopy's simulated localisation particles (own stamp)
"$VENV/bin/python" scripts/simulate_particles.py --out "$DATA/particles" >/dev/null
# the project's bytecode, as pip compiles an installed package's: where Python may not write it
# (PYTHONDONTWRITEBYTECODE, a read-only checkout) every process, each Ray worker included,
# would compile every module it imports from source, on every start
"$VENV/bin/python" -m compileall -q apps engine kernels operators benchmarks scripts >/dev/null
echo "[setup] ready: $VENV, data in $DATA/root" >&2
