"""The L4 item store's contract as a base class (``pairflow.engine.pairs.cache.store.ItemStore``:
parsed items kept across runs under a content digest).

A store is trusted with a run's inputs: an entry read back must be the item put, never a stale
or a damaged one. So, driven through ``digest``, ``put``, ``get``, ``entries`` and ``path``:

* an absent entry is a miss; an item put comes back identical (types all the way down, array
  dtypes with their byte order, shapes and bytes, float bits), from this store object, from a
  pickled copy (as a load task gets it) and from a new one opened on the same URL (a later run);
* many entries each read back their own item; the last ``put`` under a name is what ``get``
  gives;
* a damaged entry (truncated, a flipped byte, emptied, replaced, grown) is counted corrupt and
  gives nothing, and a ``put`` repairs it;
* an item the codec cannot write is counted ``unstorable`` and leaves no entry;
* names are SHA-256 hex digests that change with the parse parameters, the device, the key and
  the content; ``path`` refuses any other name; ``entries`` lists one complete entry per name;
* the counters add up: hits, misses, corrupt, and bytes read equal to bytes written.

The oracle (``identical``) is written here, apart from the codec. A subclass sets ``store_cls``
and ``stats_cls`` and gives the fixture ``store_url`` (a new, empty location); the default
``read_raw``/``write_raw`` reach an entry's bytes beneath the store through fsspec at
``store.path(name)``; override them where that does not reach them.
"""
from __future__ import annotations

import hashlib
import pickle
import random
import struct

import numpy as np
import pytest

__all__ = ["ItemStoreTests", "identical", "SAMPLES"]


def identical(a, b, path: str = "item") -> None:
    """Assert that ``b`` is ``a`` come back: same types all the way down, arrays of the same
    dtype (byte order included), shape and bytes, floats of the same IEEE bits, dicts with the
    same keys in the same order."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} came back as {type(b).__name__}"
    if isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype.str == b.dtype.str and a.dtype == b.dtype, f"{path}: {a.dtype} {b.dtype}"
        assert np.shape(a) == np.shape(b), f"{path}: shape {np.shape(a)} -> {np.shape(b)}"
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), path
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {a!r} came back {b!r}"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: {len(a)} elements came back as {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            identical(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert len(a) == len(b), f"{path}: {len(a)} keys came back as {len(b)}"
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            identical(ka, kb, f"{path} key {ka!r}")
            identical(va, vb, f"{path}[{ka!r}]")
    else:
        assert a == b, f"{path}: {a!r} came back as {b!r}"


#: items of every kind the store's codec writes (``pairflow.engine.pairs.codec``)
SAMPLES = {
    "none": None, "bool": True, "int": -2 ** 62, "float": 3.25, "nan": float("nan"),
    "negative-zero": -0.0, "str": "k-mers ü", "bytes": b"\x00\xffACGT",
    "int32-big-endian": np.arange(10, dtype=">i4"), "empty-2d": np.zeros((3, 0)),
    "fortran-order": np.asfortranarray(np.arange(6, dtype=np.uint16).reshape(2, 3)),
    "unicode-array": np.array(["ab", "c"]), "bool-array": np.array([True, False, True]),
    "structured": np.array([(1, 2.5), (-3, np.nan)], dtype=[("a", "<i2"), ("b", "<f8")]),
    "numpy-scalar": np.float32(1.5),
    "nested": {"k": 21, "sets": [np.arange(5, dtype=np.uint64), (2.0, "x")], 3: b"",
               "empty": [(), {}, []]},
}


def _unstorable():
    class Sub(dict):
        pass
    return {"object-array": np.array([1, "a"], dtype=object), "set": {1, 2},
            "function": len, "dict-subclass": Sub(a=1), "nested-set": {"x": [1, {2}]}}


def _name(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(64))


class ItemStoreTests:
    """Subclass, set ``store_cls`` and ``stats_cls``, give ``store_url``; see the module."""

    store_cls: type
    stats_cls: type
    params = {"app": "tests.SomeApp", "k": 21}

    @pytest.fixture
    def store_url(self):
        raise NotImplementedError("a subclass gives the URL of a new, empty store")

    def make_store(self, url, params=None):
        return self.store_cls(url, dict(params or self.params))

    def read_raw(self, store, name) -> bytes:
        import fsspec
        fs, _ = fsspec.core.url_to_fs(store.url)
        return fs.cat_file(store.path(name))

    def write_raw(self, store, name, blob: bytes) -> None:
        import fsspec
        fs, _ = fsspec.core.url_to_fs(store.url)
        fs.pipe_file(store.path(name), blob)

    def name_of(self, store, key="a", raw=b"ACGT", device="cpu"):
        return store.digest(key, hashlib.sha256(raw).digest(), device)

    def test_an_absent_entry_is_a_miss(self, store_url):
        store, stats = self.make_store(store_url), self.stats_cls()
        assert store.get(self.name_of(store), stats) == (False, None)
        assert (stats.misses, stats.hits, stats.corrupt, stats.bytes_read) == (1, 0, 0, 0)
        assert store.entries() == []

    @pytest.mark.parametrize("kind", sorted(SAMPLES))
    def test_an_item_comes_back_identical(self, store_url, kind):
        store, stats = self.make_store(store_url), self.stats_cls()
        name = self.name_of(store, key=kind)
        store.put(name, SAMPLES[kind], stats)
        assert stats.bytes_written > 0 and stats.unstorable == stats.write_errors == 0
        for reader in (store, pickle.loads(pickle.dumps(store)), self.make_store(store_url)):
            found, item = reader.get(name, stats)
            assert found, kind
            identical(SAMPLES[kind], item, kind)
        assert stats.hits == 3 and stats.misses == stats.corrupt == 0
        assert stats.bytes_read == 3 * stats.bytes_written == 3 * len(self.read_raw(store, name))

    @pytest.mark.parametrize("seed", range(2))
    def test_every_entry_reads_back_its_own_item(self, store_url, seed):
        rng = random.Random(seed)
        store, stats = self.make_store(store_url), self.stats_cls()
        want = {}
        for i in range(30):
            name = self.name_of(store, key=f"key-{i}", raw=bytes([i, seed]))
            want[name] = {"i": i, "words": np.arange(i, dtype=np.int64) * (seed + 1)}
            store.put(name, want[name], stats)
        names = list(want)
        rng.shuffle(names)
        for name in names:
            found, item = store.get(name, stats)
            assert found
            identical(want[name], item, name)
        assert stats.hits == 30 and len(store.entries()) == 30

    def test_the_last_put_under_a_name_is_what_get_gives(self, store_url):
        store, stats = self.make_store(store_url), self.stats_cls()
        name = self.name_of(store)
        for version in range(3):
            store.put(name, {"version": version}, stats)
            assert store.get(name, stats) == (True, {"version": version})
            later = self.make_store(store_url)  # another process, as another run
            assert later.get(name, stats) == (True, {"version": version})
        assert len(store.entries()) == 1

    @pytest.mark.parametrize("damage", ["truncate", "flip-header", "flip-payload", "empty",
                                        "replaced", "grown"])
    def test_a_damaged_entry_is_corrupt_and_a_put_repairs_it(self, store_url, damage):
        store, stats = self.make_store(store_url), self.stats_cls()
        item = {"words": np.arange(40, dtype=np.uint8), "n": 40}
        name = self.name_of(store)
        store.put(name, item, stats)
        assert store.get(name, stats)[0]  # read once before: every read checks the entry
        hits = stats.hits
        blob = self.read_raw(store, name)
        flip = lambda at: blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:]  # noqa: E731
        bad = {"truncate": blob[:-3], "flip-header": flip(7), "flip-payload": flip(len(blob) - 5),
               "empty": b"", "replaced": pickle.dumps(item), "grown": blob + b"\0"}[damage]
        self.write_raw(store, name, bad)
        for reader in (store, self.make_store(store_url)):
            before = stats.corrupt
            assert reader.get(name, stats) == (False, None)
            assert stats.corrupt == before + 1
        assert stats.hits == hits
        store.put(name, item, stats)  # parsed again and rewritten
        found, back = self.make_store(store_url).get(name, stats)
        assert found and stats.hits == hits + 1
        identical(item, back)

    @pytest.mark.parametrize("kind", sorted(_unstorable()))
    def test_an_item_the_codec_cannot_write_is_counted_and_kept_out(self, store_url, kind):
        store, stats = self.make_store(store_url), self.stats_cls()
        name = self.name_of(store, key=kind)
        store.put(name, _unstorable()[kind], stats)
        assert stats.unstorable == 1 and stats.bytes_written == 0
        assert store.entries() == []
        assert store.get(name, stats) == (False, None) and stats.misses == 1

    def test_names_are_digests_of_everything_an_item_depends_on(self, store_url):
        store = self.make_store(store_url)
        base = self.name_of(store)
        assert len(base) == 64 and set(base) <= set("0123456789abcdef")
        assert self.name_of(self.make_store(store_url)) == base  # the same in every process
        assert self.name_of(pickle.loads(pickle.dumps(store))) == base
        others = [self.name_of(store, key="b"), self.name_of(store, raw=b"ACGA"),
                  self.name_of(store, device=None), self.name_of(store, device="cuda"),
                  self.name_of(self.make_store(store_url, {**self.params, "k": 15})),
                  self.name_of(self.make_store(store_url, {**self.params, "app": "x.Other"}))]
        assert len({base, *others}) == 1 + len(others)

    @pytest.mark.parametrize("name", ["../../etc/passwd", "/abs/path", "A" * 64, "a" * 63,
                                      "a" * 65, "g" * 64, b"a" * 64, None, "a" * 63 + "/"])
    def test_path_refuses_a_name_that_is_not_a_digest(self, store_url, name):
        store, stats = self.make_store(store_url), self.stats_cls()
        for call in (lambda: store.path(name), lambda: store.get(name, stats),
                     lambda: store.put(name, {"x": 1}, stats)):
            with pytest.raises(ValueError):
                call()
        assert store.entries() == []

    def test_entries_lists_one_complete_entry_per_name(self, store_url):
        store, stats = self.make_store(store_url), self.stats_cls()
        rng = random.Random(7)
        names = {_name(rng) for _ in range(12)}
        for name in names:
            store.put(name, name, stats)
            store.put(name, name, stats)  # twice: still one entry
        entries = store.entries()
        assert len(entries) == len(names) and all(e.endswith(".item") for e in entries)
        assert sorted(e.rsplit("/", 1)[-1][:-5] for e in entries) == sorted(names)
        for name in names:
            assert store.get(name, stats) == (True, name)
