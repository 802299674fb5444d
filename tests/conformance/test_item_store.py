"""The L4 store's contract (``pairflow.engine.testing.item_store.ItemStoreTests``) run by the
``ItemStore`` on a local directory (entries' bytes read and written here with ``open``) and on
an fsspec URL (fsspec's in-memory file system, one PUT per entry)."""
import uuid

import pytest

from pairflow.engine.pairs.cache.store import ItemStore, StoreStats
from pairflow.engine.testing.item_store import ItemStoreTests


class TestLocalItemStore(ItemStoreTests):
    store_cls, stats_cls = ItemStore, StoreStats

    @pytest.fixture
    def store_url(self, tmp_path):
        return str(tmp_path / "store")

    def read_raw(self, store, name):
        with open(store.path(name), "rb") as fh:
            return fh.read()

    def write_raw(self, store, name, blob):
        with open(store.path(name), "wb") as fh:
            fh.write(blob)


class TestFsspecItemStore(ItemStoreTests):
    store_cls, stats_cls = ItemStore, StoreStats

    @pytest.fixture
    def store_url(self):
        import fsspec
        url = f"memory://pairflow-conformance-{uuid.uuid4().hex}"
        yield url
        fs, root = fsspec.core.url_to_fs(url)
        if fs.exists(root):
            fs.rm(root, recursive=True)
