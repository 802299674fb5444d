"""How many records a batch holds: chosen from the work, not from how the source was cut.

Every operator call costs a fixed amount whatever its size (awkward's and numpy's dispatch,
tens of ms for a selection of 17 operators), and every batch also runs a sample through every
operator. A source cut finely (a ROOT file read 414 times in batches of its 2,421 events) pays
those fixed costs hundreds of times where a columnar script over all events pays them once.
So the engine measures them on the first batch (``placement.probe``) and asks ``BatchSizer``:

* large enough that the fixed costs are at most ``fixed_share`` of a batch's work:
  ``records >= fixed_s / (fixed_share * per_record_s)``;
* small enough that every worker gets ``per_worker`` batches (a short last wave), that an
  adaptive run has ``min_batches`` batches to re-plan between, and that a decoded batch holds at
  most ``max_bytes``;
* never smaller than the source's own batches (the engine merges them; it does not cut them).

``BatchSizer`` is pure (numbers in, a size out). The mechanism: a source that can re-cut itself
(``rebatch(records)``, e.g. ``RootSource``) does; any other source's consecutive partitions are
read together and concatenated (``Grouped``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .batch import Batch
from .protocol import Source, describe_source


@dataclass(frozen=True)
class BatchSizer:
    """Records per batch from measured costs; see the module docstring for the rule."""

    fixed_share: float = 0.05        # fixed costs per batch: at most this share of its work
    per_worker: int = 4              # batches per worker at least
    min_batches: int = 8             # batches at least (an adaptive run learns between them)
    max_bytes: float = 256 * 2**20   # a decoded batch at most this big

    def __post_init__(self):
        if not 0 < self.fixed_share < 1:
            raise ValueError(f"fixed_share must be in (0, 1), got {self.fixed_share}")

    def records(self, natural: int, total: int | None, fixed_s: float, per_record_s: float,
                bytes_per_record: float, workers: int) -> int:
        """``natural``: records in the source's own batches; ``total``: records in the source
        (None: unknown, keep the source's batches); ``fixed_s``: seconds per batch whatever its
        size; ``per_record_s``: seconds per record (reading and the operators as ordered);
        ``bytes_per_record``: memory of a decoded record; ``workers``: batches run at once."""
        natural = max(1, int(natural))
        if total is None or total <= natural:
            return natural
        want = math.inf if per_record_s <= 0 else \
            max(0.0, fixed_s) / (self.fixed_share * per_record_s)
        cap = total / max(self.min_batches, self.per_worker * max(1, workers))
        if bytes_per_record > 0:
            cap = min(cap, self.max_bytes / bytes_per_record)
        return int(round(max(natural, min(want, cap))))

    def merge(self, natural: int, total: int | None, fixed_s: float, per_record_s: float,
              bytes_per_record: float, workers: int) -> int:
        """How many of the source's batches make one (1: keep them as they are)."""
        size = self.records(natural, total, fixed_s, per_record_s, bytes_per_record, workers)
        return max(1, size // max(1, int(natural)))


class Grouped(Source):
    """Any source with ``k`` consecutive partitions read as one batch (their batches
    concatenated in order): the mechanism for sources that cannot re-cut themselves."""

    name = "grouped"

    def __init__(self, source, specs: list, k: int):
        self.source, self.k = source, max(1, int(k))
        self.groups = [tuple(specs[i:i + self.k]) for i in range(0, len(specs), self.k)]
        n = getattr(source, "num_entries", None)
        if n is not None and not callable(n):
            self.num_entries = n

    def partitions(self):
        return list(self.groups)

    def read(self, group):
        return Batch.concat([Batch.from_any(self.source.read(spec)) for spec in group])

    def describe(self):
        return {**describe_source(self.source), "merged_partitions": self.k}


def resized(source, specs: list, natural: int, records: int):
    """``source`` cut into batches of about ``records`` (its own ``rebatch`` when it has one,
    else ``Grouped``), or ``source`` itself when that would not merge anything."""
    k = records // max(1, natural)
    if k < 2:
        return source
    rebatch = getattr(source, "rebatch", None)
    if callable(rebatch):
        out = rebatch(k * natural)
        if out is not None:
            return out
    return Grouped(source, specs, k)
