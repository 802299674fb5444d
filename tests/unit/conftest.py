"""Shared fixtures for the unit tests: locations of the real data unpacked by scripts/setup.sh.

Tests that need real data skip (with the reason) when it is absent, so the unit suite still runs
on a checkout without the Debian data packages.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARE = Path(os.environ.get("PAIRFLOW_DATA", REPO / ".data")) / "root" / "usr" / "share"
RAGOUT = SHARE / "doc" / "ragout" / "examples"
LAMBDA = SHARE / "doc" / "bowtie2" / "examples" / "reference" / "lambda_virus.fa.gz"
KLEBSIELLA = SHARE / "kaptive" / "reference_database" / "Klebsiella_k_locus_primary_reference.gbk"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not found: {path} (run scripts/setup.sh)")
    return path


@pytest.fixture(scope="session")
def lambda_path() -> Path:
    return _need(LAMBDA)


@pytest.fixture(scope="session")
def klebsiella_path() -> Path:
    return _need(KLEBSIELLA)


@pytest.fixture(scope="session")
def ragout_path():
    """ragout_path("H.Pylori", "G27") -> path of that reference genome."""

    def get(species: str, strain: str) -> Path:
        return _need(RAGOUT / species / "references" / f"{strain}.fasta.gz")

    return get
