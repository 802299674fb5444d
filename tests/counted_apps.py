"""The other apps with every parse call counted (``tests/parse_count.py``'s mixin), for the
L4 store's per-app tests: a module of their own, so that Ray workers importing
``tests.parse_count`` do not import every app."""
from __future__ import annotations

import numpy as np

from pairflow.apps.forensics import ForensicsApp
from pairflow.apps.jaccard_filtered import FilteredJaccardApp
from pairflow.apps.microscopy import MicroscopyApp
from pairflow.apps.phylogeny import PhylogenyApp
from pairflow.apps.synthetic import SyntheticApp
from tests.parse_count import CountedBytes, _Counted


class CountedFiltered(_Counted, FilteredJaccardApp):
    pass


class CountedPhylogeny(_Counted, PhylogenyApp):
    pass


class CountedForensics(_Counted, ForensicsApp):
    pass


class CountedMicroscopy(_Counted, MicroscopyApp):
    pass


class CountedSynthetic(_Counted, SyntheticApp):
    pass


class Tagged(np.ndarray):
    """An ndarray subclass: computes like an array, but is not one the L4 codec writes."""


class CountedTagged(CountedBytes):
    """``CountedBytes`` whose items are ``Tagged``: the store must keep them out, and count."""

    def parse(self, key, raw):
        return super().parse(key, raw).view(Tagged)
