"""``SequenceCatalog``: the items of a set of sequence files (a file, or a record, per item), their
keys, and where each item's records are.

Why apart from the readers: keys and duplicate checks are decided once in the driver, before any
compute; workers get a slim pickled copy that finds records through the per-process cache.
Record items are found through each file's name index (``columns.NameIndex``: names in one
byte array, 16 bytes of hash index a record), not a dict of keys: at 10^6 reads the driver's
dict of key -> (file, index, name) was ~0.3 GB beside the parsed file.
"""
from __future__ import annotations

import os
from typing import Iterable, Literal

from .cache import _parsed, parsed_file
from .columns import NameIndex, RecordColumns
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
        self._keys_of: dict[str, list[str]] = {}  # file items: url -> [key]
        self._names: dict[str, NameIndex] = {}  # record items: url -> its records' names
        self._stem_of: dict[str, str] = {}  # record items: url -> stem
        self._slim = False
        if item == "file":
            for url in self.urls:
                key = file_stem(url)
                if key in self._stem_url:
                    raise InputError(url, f"duplicate item key {key!r}: same file stem as "
                                     f"{self._stem_url[key]}")
                self._stem_url[key] = url
                self._keys_of[url] = [key]
            return
        for url in self.urls:
            if url in self._names:
                raise InputError(url, "the same file is listed twice")
            stem = self._stem_of[url] = self._new_stem(url)
            names = self._names[url] = self._parse(url).index
            dup = names.first_duplicate()  # (keys of two files differ by their stems)
            if dup is not None:
                i0, i = dup
                name = names.name(i)
                raise InputError(url, f"duplicate record name {name!r}: item key "
                                 f"{stem + '/' + name!r} is also {url} record {name!r} "
                                 f"(#{i0 + 1})", name, i)

    def _new_stem(self, url: str) -> str:
        stem, n = file_stem(url), 1
        while stem in self._stem_url:
            n += 1
            stem = f"{file_stem(url)}~{n}"
        self._stem_url[stem] = url
        return stem

    def _parse(self, url: str, raw: bytes | None = None) -> RecordColumns:
        return parsed_file(url, raw, self.fmt, self.allow_empty)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.update(_keys_of={}, _names={}, _slim=True)
        return state

    def _driver(self, what: str) -> None:
        if self._slim:
            raise RuntimeError(f"SequenceCatalog.{what} is driver-side; this is the slim copy "
                               "workers get")

    def keys(self) -> list[str]:
        """Every item's key, in input order (files in the order given, records in file order)."""
        self._driver("keys()")
        return [k for url in self.urls for k in self.keys_of(url)]

    def keys_of(self, url: str) -> list[str]:
        """The keys of one file's items."""
        self._driver("keys_of()")
        if self.item == "file":
            return list(self._keys_of[url])
        stem = self._stem_of[url] + "/"
        return [stem + name for name in self._names[url].names()]

    def location(self, key: str) -> tuple[str, int | None, str | None]:
        """(file, 0-based record index, record name) of a key; the record's index and name are
        None for a whole-file item, and the index is None on a slim copy (found when read)."""
        if self.item == "file":
            return self._stem_url[key], None, None
        stem, _, name = key.partition("/")
        url = self._stem_url[stem]
        names = self._names.get(url)
        return url, (names.find(name) if names is not None else None), name

    def url(self, key: str) -> str:
        """The file an item comes from."""
        return self.location(key)[0]

    def fetch_url(self, key: str) -> str | None:
        """What an all-pairs app's ``url(key)`` should answer: the file of a whole-file item (the
        engine fetches it on its I/O threads), None for a record (``records`` reads the file
        through the per-process cache instead of once per record)."""
        return self.location(key)[0] if self.item == "file" else None

    def file_records(self, url: str, raw: bytes | None = None) -> RecordColumns:
        """Every record of one input file (a list of records to read, kept as columns:
        ``sequences()`` gives them all at once), through the per-process cache (an app that
        builds the items of all of a file's records at once reads them here)."""
        return _parsed(url, raw, self.fmt, self.allow_empty)

    def index_of(self, key: str, raw: bytes | None = None) -> tuple[str, int]:
        """(file, 0-based record index) of a record item, on a slim copy too (the file's index
        of names comes from the per-process cache)."""
        if self.item != "record":
            raise ValueError("index_of is for record items (item='record')")
        url, index, name = self.location(key)
        if index is None:
            index = _parsed(url, raw, self.fmt, self.allow_empty).find(name)
            if index is None:
                raise InputError(url, "the file changed since the run started (record not "
                                 "found)", record=name)
        return url, index

    def records(self, key: str, raw: bytes | None = None) -> list[SequenceRecord]:
        """The records of one item (all of a file's, or the one record), from ``raw`` (the
        file's bytes) when the caller has them."""
        url, _, name = self.location(key)
        records = _parsed(url, raw, self.fmt, self.allow_empty)
        if self.item == "file":
            return list(records)
        index = records.find(name)
        if index is None:
            raise InputError(url, "the file changed since the run started (record not found)",
                             record=name)
        return [records[index]]
