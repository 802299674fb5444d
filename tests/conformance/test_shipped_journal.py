"""The shipped journal's contract (``pairflow.engine.testing.shipped.ShippedJournalTests``) run by
the scheduler's ``ShippedJournal``; storing what it drains is ``test_journal.py``'s
``TestShippedToTheDriver``."""
from pairflow.engine.pairs.sinks.shipped import ShippedJournal
from pairflow.engine.testing.shipped import ShippedJournalTests


class TestShippedJournal(ShippedJournalTests):
    def make_journal(self):
        return ShippedJournal()
