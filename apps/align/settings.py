"""The align app's settings: the values its options may take, its defaults, the tie rule it
promises, and the integer check its options share.

Why a module of its own: the app, its pair filters, the Python API and the CLI hooks all check
or default the same options; one home keeps them from drifting apart.
"""
from __future__ import annotations

import numpy as np

ALPHABETS = ("auto", "protein", "dna")
MODES = ("topk", "rbh")
KERNELS = ("auto", "parasail", "opal")
DEFAULT_MATRIX = {"protein": "blosum62", "dna": "nuc44"}
TIE_RULE = ("score descending; ties: shorter target first, then the target listed first in the "
            "input")
# Work per tile the engine aims at (configs/app/align.yaml sets the same): each tile also writes
# a top-k part (a few ms), and the engine's two-item probe overstates what a pair costs in a tile.
TARGET_TILE_S = 0.5
# Pairs per batch of the pair prefilter: enough batches for its measurements to reorder the
# filters, few enough that per-batch overhead stays small beside the filters' own work.
PAIR_BATCH = 16_384


def as_int(value, what: str) -> int:
    """``value`` as an int (a float with no fraction passes; a bool does not), else ValueError
    naming the option ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{what} must be an integer, got {value!r}")
    return int(value)
