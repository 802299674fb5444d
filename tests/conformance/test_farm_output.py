"""A tool farm's output contract (``pairflow.engine.testing.farm``) run by its ``BlockWriter``
and by the index it keeps in the run's journal (``JournalWriter`` lines written by
``journal_blocks``, read back by ``replay`` and ``read_block``)."""
from pairflow.engine.run.journal import JournalWriter
from pairflow.engine.testing.farm import BlockWriterTests, FarmIndexTests
from pairflow.engine.toolfarm import index, writer


class TestBlockWriter(BlockWriterTests):
    writer_cls, partial_suffix = writer.BlockWriter, writer.PARTIAL

    def finalize(self, path):
        writer.finalize(path)


class TestFarmIndex(FarmIndexTests):
    writer_cls, partial_suffix = writer.BlockWriter, writer.PARTIAL
    journal_cls = JournalWriter

    def finalize(self, path):
        writer.finalize(path)

    def journal_blocks(self, journal, entries, actor):
        index.journal_blocks(journal, entries, actor)

    def replay(self, journal_path, result_dir, streams, n_units):
        return index.replay(journal_path, result_dir, streams, n_units)

    def read_block(self, result_dir, entry):
        return index.read_block(result_dir, entry)
