"""``SequenceCatalog``: the items of a set of sequence files (a file, or a record, per item), their
keys, and where each item's records are.

Why apart from the readers: keys and duplicate checks are decided once in the driver, before any
compute; workers get a slim pickled copy that finds records through the per-process cache.
"""
from __future__ import annotations

import os
from typing import Iterable, Literal

from .cache import _parsed, parsed_file
from .formats import file_stem
from .records import InputError, SequenceRecord


class SequenceCatalog:
    """The items of a set of sequence files: their keys, where each item's records are, and the
    records themselves, read through a per-process cache of parsed files.

    ``item="file"``: an item is a file with all its records (a genome of several chromosomes or
    contigs), keyed by :func:`file_stem`; the keys are checked before any file is read.
    ``item="record"``: an item is one record, keyed ``"stem/name"``; every file is read here,
    because the record names are the keys. A stem shared by two different files gets ``~2``,
    ``~3``... on the later ones, so their records stay apart.

    Two items with one key would overwrite each other in every result, so a duplicate is an
    :class:`InputError` naming both files (and both records). A pickled catalog (what Ray ships
    to workers with the app) is slim: it keeps the file of each stem and answers ``records`` and
    ``location`` for any key, but not the per-key tables, which for thousands of records took
    longer to unpickle than a record takes to load.
    """

    def __init__(self, urls: Iterable, item: Literal["file", "record"] = "file", *,
                 fmt: str = "auto", allow_empty: bool = False):
        if item not in ("file", "record"):
            raise ValueError(f"item must be 'file' or 'record', got {item!r}")
        self.item, self.fmt, self.allow_empty = item, fmt, allow_empty
        self.urls = [u if isinstance(u, str) else os.fspath(u) for u in urls]
        self._stem_url: dict[str, str] = {}
        self._where: dict[str, tuple[str, int | None, str | None]] = {}  # key -> url, index, name
        self._keys_of: dict[str, list[str]] = {}
        self._slim = False
        if item == "file":
            for url in self.urls:
                key = file_stem(url)
                if key in self._stem_url:
                    raise InputError(url, f"duplicate item key {key!r}: same file stem as "
                                     f"{self._stem_url[key]}")
                self._stem_url[key] = url
                self._where[key] = (url, None, None)
                self._keys_of[url] = [key]
            return
        for url in self.urls:
            if url in self._keys_of:
                raise InputError(url, "the same file is listed twice")
            stem = self._new_stem(url)
            keys = self._keys_of[url] = []
            for i, rec in enumerate(self._parse(url)):
                key = f"{stem}/{rec.name}"
                if key in self._where:
                    url0, i0, name0 = self._where[key]
                    raise InputError(url, f"duplicate record name {rec.name!r}: item key "
                                     f"{key!r} is also {url0} record {name0!r} (#{i0 + 1})",
                                     rec.name, i)
                self._where[key] = (url, i, rec.name)
                keys.append(key)

    def _new_stem(self, url: str) -> str:
        stem, n = file_stem(url), 1
        while stem in self._stem_url:
            n += 1
            stem = f"{file_stem(url)}~{n}"
        self._stem_url[stem] = url
        return stem

    def _parse(self, url: str, raw: bytes | None = None) -> list[SequenceRecord]:
        return parsed_file(url, raw, self.fmt, self.allow_empty)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_where={}, _keys_of={}, _slim=True)
        return state

    def _driver(self, what: str) -> None:
        if self._slim:
            raise RuntimeError(f"SequenceCatalog.{what} is driver-side; this is the slim copy "
                               "workers get")

    def keys(self) -> list[str]:
        """Every item's key, in input order (files in the order given, records in file order)."""
        self._driver("keys()")
        return [k for url in self.urls for k in self._keys_of[url]]

    def keys_of(self, url: str) -> list[str]:
        """The keys of one file's items."""
        self._driver("keys_of()")
        return list(self._keys_of[url])

    def location(self, key: str) -> tuple[str, int | None, str | None]:
        """(file, 0-based record index, record name) of a key; the record's index and name are
        None for a whole-file item, and the index is None on a slim copy (found when read)."""
        where = self._where.get(key)
        if where is not None:
            return where
        if self.item == "file":
            return self._stem_url[key], None, None
        stem, _, name = key.partition("/")
        return self._stem_url[stem], None, name

    def url(self, key: str) -> str:
        """The file an item comes from."""
        return self.location(key)[0]

    def fetch_url(self, key: str) -> str | None:
        """What an all-pairs app's ``url(key)`` should answer: the file of a whole-file item (the
        engine fetches it on its I/O threads), None for a record (``records`` reads the file
        through the per-process cache instead of once per record)."""
        return self.location(key)[0] if self.item == "file" else None

    def file_records(self, url: str, raw: bytes | None = None) -> list[SequenceRecord]:
        """Every record of one input file, through the per-process cache (an app that builds
        the items of all of a file's records at once reads them here)."""
        return _parsed(url, raw, self.fmt, self.allow_empty)[0]

    def index_of(self, key: str, raw: bytes | None = None) -> tuple[str, int]:
        """(file, 0-based record index) of a record item, on a slim copy too (the file's index
        of names comes from the per-process cache)."""
        if self.item != "record":
            raise ValueError("index_of is for record items (item='record')")
        url, index, name = self.location(key)
        if index is None:
            index = _parsed(url, raw, self.fmt, self.allow_empty)[1].get(name)
            if index is None:
                raise InputError(url, "the file changed since the run started (record not "
                                 "found)", record=name)
        return url, index

    def records(self, key: str, raw: bytes | None = None) -> list[SequenceRecord]:
        """The records of one item (all of a file's, or the one record), from ``raw`` (the
        file's bytes) when the caller has them."""
        url, _, name = self.location(key)
        records, index = _parsed(url, raw, self.fmt, self.allow_empty)
        if self.item == "file":
            return records
        if name not in index:
            raise InputError(url, "the file changed since the run started (record not found)",
                             record=name)
        return [records[index[name]]]
