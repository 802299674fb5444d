"""The L4 item store (engine/pairs/cache/store.py) and loading through it, without Ray."""
from __future__ import annotations

import hashlib
import os
import pickle

import numpy as np
import pytest

from pairflow.engine.pairs.cache.loading import load_and_parse, load_items
from pairflow.engine.pairs.cache.store import (ItemStore, StoreStats, default_parse_params,
                                               parse_params)


class _ParseCounter:
    """An app reading files whose parse is counted here, apart from the store's counters."""

    def __init__(self, k: int = 3):
        self.k = k
        self.parsed: list[str] = []
        self.urls: dict[str, str] = {}

    def url(self, key):
        return self.urls.get(key)

    def parse(self, key, raw):
        self.parsed.append(key)
        return {"words": np.frombuffer(raw, np.uint8)[: self.k].copy(), "n": len(raw)}

    def preprocess(self, key, item, device):
        return {**item, "on": device}

    def item_nbytes(self, item):
        return int(item["words"].nbytes)


def _app(tmp_path, texts: dict[str, bytes], k: int = 3) -> _ParseCounter:
    app = _ParseCounter(k)
    for key, raw in texts.items():
        path = tmp_path / f"{key}.txt"
        path.write_bytes(raw)
        app.urls[key] = str(path)
    return app


def test_an_item_is_parsed_once_then_read_back_equal(tmp_path):
    app = _app(tmp_path, {"a": b"ACGTTT", "b": b"GGGA"})
    store = ItemStore(str(tmp_path / "store"), parse_params(app))
    first = [load_and_parse(app, k, "cpu", store) for k in ("a", "b")]
    assert app.parsed == ["a", "b"]
    assert all(info["store"]["misses"] == 1 and "parse" in info for _, info in first)
    again = [load_and_parse(app, k, "cpu", store) for k in ("a", "b")]
    assert app.parsed == ["a", "b"]  # nothing parsed the second time
    for (item, _), (back, info) in zip(first, again):
        assert info["store"]["hits"] == 1 and "parse" not in info
        assert np.array_equal(item["words"], back["words"]) and back["on"] == "cpu"
        assert back["n"] == item["n"]
    # one complete entry per (item, device), nothing temporary left beside them
    entries = store.entries()
    assert len(entries) == 2
    assert not [f for _, _, fs in os.walk(tmp_path / "store") for f in fs if ".tmp-" in f]


def test_the_key_is_the_content_and_the_parse_parameters(tmp_path):
    app = _app(tmp_path, {"a": b"ACGTTT"})
    store = ItemStore(str(tmp_path / "store"), parse_params(app))
    load_and_parse(app, "a", "cpu", store)
    # same name, size and a new mtime would fool a cheap identity; new bytes must not hit
    (tmp_path / "a.txt").write_bytes(b"TTTGCA")
    item, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["misses"] == 1 and app.parsed == ["a", "a"]
    assert bytes(item["words"]) == b"TTT"
    # another k is another entry
    (tmp_path / "x").mkdir()
    app2 = _app(tmp_path / "x", {"a": b"TTTGCA"}, k=2)
    store2 = ItemStore(str(tmp_path / "store"), parse_params(app2))
    _, info = load_and_parse(app2, "a", "cpu", store2)
    assert info["store"]["misses"] == 1
    # and a host-preprocessed item is not a parsed-only one
    _, info = load_and_parse(app, "a", None, store)
    assert info["store"]["misses"] == 1
    assert len(store.entries()) == 4  # the old bytes, the new ones, k=2, parsed-only
    # the digest is SHA-256 over the parameters, device, key and the bytes' own SHA-256
    h = hashlib.sha256(store.params_digest.encode())
    h.update(b"\0cpu\0a\0")
    h.update(hashlib.sha256(b"TTTGCA").digest())
    assert store.digest("a", hashlib.sha256(b"TTTGCA").digest(), "cpu") == h.hexdigest()


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "garbage"])
def test_a_corrupt_entry_is_detected_and_parsed_again(tmp_path, damage):
    app = _app(tmp_path, {"a": b"ACGTTTACGT"})
    store = ItemStore(str(tmp_path / "store"), parse_params(app))
    good, _ = load_and_parse(app, "a", "cpu", store)
    (path,) = store.entries()
    blob = open(path, "rb").read()
    bad = {"truncate": blob[:-3], "flip": blob[:-1] + bytes([blob[-1] ^ 0xFF]), "empty": b"",
           "garbage": pickle.dumps({"words": np.zeros(3, np.uint8)})}[damage]
    open(path, "wb").write(bad)
    item, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["corrupt"] == 1 and info["store"]["hits"] == 0
    assert app.parsed == ["a", "a"]
    assert np.array_equal(item["words"], good["words"])
    # rewritten: the next read is a hit
    _, info = load_and_parse(app, "a", "cpu", store)
    assert info["store"]["hits"] == 1 and app.parsed == ["a", "a"]


def test_an_fsspec_url_store(tmp_path):
    """Any fsspec file system: here fsspec's in-memory one (a single write per entry)."""
    app = _app(tmp_path, {"a": b"ACGTTT", "b": b"GG"})
    store = ItemStore("memory://pairflow-test-store", parse_params(app))
    out = load_items(app, ["a", "b"], "cpu", 0, True, store=store)
    assert [i["store"]["misses"] for i in out] == [1, 1]
    store = pickle.loads(pickle.dumps(store))  # as a load task gets it
    out = load_items(app, ["a", "b"], "cpu", 0, True, store=store)
    assert [i["store"]["hits"] for i in out] == [1, 1] and app.parsed == ["a", "b"]
    assert [bytes(i["value"]["words"]) for i in out] == [b"ACG", b"GG"]


def test_a_record_item_is_digested_by_its_file(tmp_path):
    """An app that reads records itself (``url`` None) names the file in ``store_source``."""
    app = _app(tmp_path, {"f": b"RECORD-ONE RECORD-TWO"})
    path = app.urls.pop("f")
    app.store_source = lambda key: path
    app.parse = lambda key, raw: {"words": np.frombuffer(key.encode(), np.uint8).copy(), "n": 0}
    store = ItemStore(str(tmp_path / "store"), {"app": "records"})
    infos = [load_and_parse(app, k, "cpu", store)[1] for k in ("f/1", "f/2")]
    assert [i["store"]["misses"] for i in infos] == [1, 1]
    infos = [load_and_parse(app, k, "cpu", store)[1] for k in ("f/1", "f/2")]
    assert [i["store"]["hits"] for i in infos] == [1, 1]
    open(path, "wb").write(b"RECORD-ONE RECORD-2")  # the file changed: every record misses
    infos = [load_and_parse(app, k, "cpu", store)[1] for k in ("f/1", "f/2")]
    assert [i["store"]["misses"] for i in infos] == [1, 1]


def test_an_item_without_bytes_bypasses_the_store(tmp_path):
    app = _app(tmp_path, {})
    app.parse = lambda key, raw: {"words": np.zeros(1, np.uint8), "n": 0}
    store = ItemStore(str(tmp_path / "store"), {"app": "x"})
    _, info = load_and_parse(app, "nourl", None, store)
    assert info["store"] == {**StoreStats().to_dict(), "bypassed": 1}
    assert store.entries() == []


def test_default_parse_params_take_public_scalars_only():
    class App:
        def __init__(self):
            self.k, self.mode, self.urls, self._private = 5, "x", ["a", "b"], 1

    assert default_parse_params(App()) == {
        "app": f"{App.__module__}.{App.__qualname__}", "k": 5, "mode": "x"}
