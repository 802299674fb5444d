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




class _CountingApp:
    """An app whose compare costs next to nothing and records the tiles it was given."""

    def __init__(self):
        self.sides = []

    def url(self, key):
        return None

    def parse(self, key, raw):
        return len(key)

    def preprocess(self, key, item, device):
        return item

    def compare(self, left, right, mask, device):
        self.sides.append((len(left), len(right), int(mask.sum())))
        return None

    def item_nbytes(self, item):
        return 8


def test_measure_grows_a_fast_compare_into_a_tile():
    """Pairs of microseconds are timed inside a tile (the sample's items repeated), not around
    a 2 x 2 call; an app whose probe must stay the two items (weighted tiles) asks for no
    growth."""
    from engine.pairs.loading import MEASURE_MAX_SIDE, measure_stages
    app = _CountingApp()
    got = measure_stages(app, ["a", "bb"], "cpu")
    sides = [s for s, _, _ in app.sides]
    assert sides[0] == 2 and max(sides) > 2 and max(sides) <= MEASURE_MAX_SIDE
    assert all(s == r and m == s * s for s, r, m in app.sides)
    assert got["t_pair"] > 0 and got["item_bytes"] == 8
    app = _CountingApp()
    measure_stages(app, ["a", "bb"], "cpu", grow=False)
    assert {s for s, _, _ in app.sides} == {2}
