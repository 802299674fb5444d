"""Loading (engine/pairs/loading.py), without Ray: load batches, and one item from a URL."""
from engine.pairs.loading import load_batches


def test_load_batches_cover_every_item_once_in_order():
    items = list(range(23))
    for per_task in (1, 3, 10, 100):
        for slots in (1, 2, 4):
            got = load_batches(items, per_task, slots)
            assert [i for b in got for i in b] == items
            assert max(len(b) for b in got) <= per_task
            # never fewer batches than slots, while there are items enough
            assert len(got) >= min(slots, len(items))


def test_load_batches_hand_cases():
    assert load_batches([5, 6, 7, 8, 9], 100, 2) == [[5, 6, 7], [8, 9]]
    assert load_batches([5, 6, 7, 8, 9], 2, 1) == [[5, 6], [7, 8], [9]]
    assert load_batches([], 4, 2) == []


