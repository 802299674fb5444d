"""Conformance suites shipped with the engine, as base classes a new implementation subclasses
(the way ``zarr.testing.store.StoreTests`` is shipped for zarr stores).

Each suite is a class whose tests drive an implementation through its interface only and check
what it did against an oracle written in the suite from the contract alone (plain Python and
numpy: never the implementation's own helpers). A subclass names the implementation (a class
attribute or a fixture the suite leaves abstract) and, where the suite must look beneath the
interface (which bytes a sink wrote, an entry's raw bytes in a store), a hook that reads them
directly. The engine's own implementations are checked by subclasses in ``tests/conformance``;
a sink, cache tier or store of yours joins by subclassing the same class in your own tests::

    from pairflow.engine.testing.sinks import SinkTests

    class TestMySink(SinkTests):
        @pytest.fixture
        def make_sink(self):
            return MySink

        def check_result(self, written, result, pairs):
            ...  # compare ``result`` with a brute-force computation of ``written.values``

Suites (one module each): ``sinks.SinkTests`` (all-pairs sinks),
``pipeline_sinks.PipelineSinkTests`` (filter pipelines' sinks), ``tiers.TierTests`` (cache
tiers under every eviction rule), ``host_tier.HostTierTests`` (a node's L2, for each loader it
is given), ``journal.JournalTests`` (what a resume trusts, for each way a journal is written),
``shipped.ShippedJournalTests`` (tiles' payloads on their way to the driver),
``item_store.ItemStoreTests`` (the L4 store), ``farm.BlockWriterTests`` and
``farm.FarmIndexTests`` (a tool farm's output files and their index).

This package needs pytest (it is in the ``test`` extra), as ``zarr.testing`` does; nothing in
the engine imports it. Class names here do not start with ``Test``, so pytest collects them only
through a subclass.
"""
__all__ = ["SinkTests", "PipelineSinkTests", "TierTests", "HostTierTests", "JournalTests",
           "ShippedJournalTests", "ItemStoreTests", "BlockWriterTests", "FarmIndexTests"]

_HOMES = {"SinkTests": ".sinks", "PipelineSinkTests": ".pipeline_sinks", "TierTests": ".tiers",
          "HostTierTests": ".host_tier",
          "JournalTests": ".journal", "ShippedJournalTests": ".shipped",
          "ItemStoreTests": ".item_store", "BlockWriterTests": ".farm",
          "FarmIndexTests": ".farm"}


def __getattr__(name):  # each suite imports only its own implementation's interface
    if name in _HOMES:
        import importlib
        return getattr(importlib.import_module(_HOMES[name], __name__), name)
    raise AttributeError(name)
