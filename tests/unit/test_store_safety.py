"""The L4 store (engine/pairs/cache/store.py) against what others can put in a shared store: a
planted entry that would run code if unpickled, a name outside the root, links; and what it
writes: files of the user's umask, no entry for an item its codec cannot write.

Entries are planted in the documented layout (``>5sQ32s``: magic, payload length, SHA-256 of
the payload), written out here rather than taken from the store's code."""
from __future__ import annotations

import hashlib
import os
import pickle
import struct

import numpy as np
import pytest

from pairflow.engine.pairs.cache.loading import load_and_parse
from pairflow.engine.pairs.cache.store import ItemStore, parse_params
from tests.item_oracle import assert_identical

MAGIC, OLD_MAGIC = b"PFL4\x02", b"PFL4\x01"


def entry(payload: bytes, magic: bytes = MAGIC) -> bytes:
    """An entry with a sound header: what the checksum cannot tell from an honest one."""
    return struct.pack(">5sQ32s", magic, len(payload), hashlib.sha256(payload).digest()) + payload


class Plant:
    """Unpickled, it creates ``path`` (any code would run the same way)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class Words:
    """An app reading small files whose parses are counted here."""

    def __init__(self, root, texts: dict[str, bytes]):
        self.k, self.parsed, self.urls = 3, [], {}
        for key, raw in texts.items():
            (root / f"{key}.txt").write_bytes(raw)
            self.urls[key] = str(root / f"{key}.txt")

    def url(self, key):
        return self.urls.get(key)

    def parse(self, key, raw):
        self.parsed.append(key)
        return {"words": np.frombuffer(raw, np.uint8)[: self.k].copy(), "n": len(raw)}

    def preprocess(self, key, item, device):
        return item

    def item_nbytes(self, item):
        return int(item["words"].nbytes)


def _store(tmp_path, app):
    return ItemStore(str(tmp_path / "store"), parse_params(app))


@pytest.mark.parametrize("magic", [MAGIC, OLD_MAGIC], ids=["header-now", "header-before"])
def test_a_planted_pickle_is_counted_corrupt_and_never_run(tmp_path, magic):
    app = Words(tmp_path, {"a": b"ACGTTTACGT"})
    store = _store(tmp_path, app)
    good, _ = load_and_parse(app, "a", "cpu", store)
    (path,) = store.entries()
    marker = tmp_path / "marker"
    planted = entry(pickle.dumps({"words": Plant(str(marker)), "n": 1}, protocol=5), magic)
    with open(path, "wb") as fh:
        fh.write(planted)
    item, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["corrupt"] == 1 and info["store"]["hits"] == 0
    assert app.parsed == ["a", "a"] and not marker.exists()
    assert_identical(good, item)
    assert open(path, "rb").read() != planted  # rewritten: the next read is a hit
    again, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["hits"] == 1 and app.parsed == ["a", "a"]
    assert_identical(good, again)
    assert not marker.exists()
    pickle.loads(planted[45:])  # the control: unpickled, the planted payload does run
    assert marker.exists()


@pytest.mark.parametrize("name", ["../" + "a" * 62, "/etc/passwd", "ab/../../x", "A" * 64,
                                  "a" * 63, "a" * 65, "", None, "a" * 63 + "\n"])
def test_no_entry_is_named_outside_the_root(tmp_path, name):
    store = ItemStore(str(tmp_path / "store"), {"app": "x"})
    with pytest.raises(ValueError, match="SHA-256 hex digest"):
        store.path(name)
    with pytest.raises(ValueError):
        store.put(name, {"x": 1}, _stats())
    assert not os.path.exists(tmp_path / "store")


def _stats():
    from pairflow.engine.pairs.cache.store import StoreStats
    return StoreStats()


@pytest.mark.parametrize("umask", [0o027, 0o002, 0o077])
def test_entries_take_the_users_umask(tmp_path, umask):
    app = Words(tmp_path, {"a": b"ACGTTT"})
    store = _store(tmp_path, app)
    old = os.umask(umask)
    try:
        load_and_parse(app, "a", "cpu", store)
    finally:
        os.umask(old)
    (path,) = store.entries()
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o777 & ~umask


def test_a_linked_entry_is_not_followed(tmp_path):
    app = Words(tmp_path, {"a": b"ACGTTT", "b": b"GGGATT"})
    store = _store(tmp_path, app)
    load_and_parse(app, "a", "cpu", store)
    load_and_parse(app, "b", "cpu", store)
    path_a, path_b = sorted(store.entries(), key=lambda p: "a" if p.endswith(
        store.digest("a", hashlib.sha256(b"ACGTTT").digest(), "cpu") + ".item") else "b")
    # a's entry becomes a link to b's (a sound entry elsewhere): not read through
    outside = tmp_path / "elsewhere.item"
    outside.write_bytes(open(path_b, "rb").read())
    os.remove(path_a)
    os.symlink(outside, path_a)
    item, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["corrupt"] == 1 and bytes(item["words"]) == b"ACG"
    assert app.parsed == ["a", "b", "a"]
    assert not os.path.islink(path_a)  # replaced by a real entry, the link's target untouched
    assert outside.read_bytes() == open(path_b, "rb").read()
    _, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["hits"] == 1


def test_a_linked_shard_directory_is_neither_read_nor_written(tmp_path):
    app = Words(tmp_path, {"a": b"ACGTTT"})
    store = _store(tmp_path, app)
    load_and_parse(app, "a", "cpu", store)
    (path,) = store.entries()
    shard = os.path.dirname(path)
    elsewhere = tmp_path / "elsewhere"
    os.rename(shard, elsewhere)  # the sound entry now lies outside, a link points at it
    os.symlink(elsewhere, shard)
    before = sorted(os.listdir(elsewhere))
    item, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["corrupt"] == 1 and info["store"]["write_errors"] == 1
    assert app.parsed == ["a", "a"] and bytes(item["words"]) == b"ACG"
    assert sorted(os.listdir(elsewhere)) == before  # nothing written through the link


class Opaque:
    def __init__(self, n):
        self.n = n


def test_an_item_the_codec_cannot_write_bypasses_the_store_and_is_counted(tmp_path):
    app = Words(tmp_path, {"a": b"ACGTTT"})
    app.parse = lambda key, raw: (app.parsed.append(key), Opaque(len(raw)))[1]
    app.item_nbytes = lambda item: 8
    store = _store(tmp_path, app)
    for n in (1, 2):
        item, info = load_and_parse(app, "a", None, store)
        assert item.n == 6 and app.parsed == ["a"] * n
        assert info["store"]["unstorable"] == 1 and info["store"]["misses"] == 1
        assert info["store"]["bytes_written"] == 0
    assert store.entries() == []
