"""Advised next-use eviction (the rest of the cache contract lives in
tests/conformance/test_tiers.py)."""
from pairflow.engine.pairs.cache.eviction import AdvisedEviction
from pairflow.engine.pairs.cache.tiers import BudgetCache


def test_advice_for_some_keys_keeps_the_others():
    """A device actor gets next-use advice for its least recently used items only: an item
    without advice counts as needed soon (kept), not as never needed (evicted first)."""
    ev = AdvisedEviction(unknown=-1.0)
    c = BudgetCache(budget_items=3, eviction=ev)
    for k in "abc":
        c.put(k, k, 1)
    ev.advice = {"a": 7.0, "b": float("inf")}  # c (newest) has no advice
    assert c.put("d", "d", 1) == ["b"]  # never needed again
    ev.advice = {"a": 7.0}
    assert c.put("e", "e", 1) == ["a"]  # the latest known next use; c and d are kept
    assert set(c.keys()) == {"c", "d", "e"}
