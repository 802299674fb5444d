"""Apps whose items are whole files (a proteome, a photo, a particle), one key per file."""
from __future__ import annotations

import os
from typing import Callable

from pairflow.engine import InputError
from pairflow.engine import BasePairApp


def base_name(url: str) -> str:
    """``dir/cam0_shot1.jpg`` -> ``cam0_shot1``."""
    return os.path.splitext(os.path.basename(url))[0]


class FileItemsApp(BasePairApp):
    """Keys are the files' names (``key_of``); two files of one name would overwrite each
    other's results, so they are refused before anything is read."""

    def _index_files(self, urls, what: str, key_of: Callable[[str], str] = base_name) -> None:
        if not urls:
            raise InputError("inputs", f"no input {what}")
        self.urls = list(urls)
        self._url: dict[str, str] = {}
        for url in self.urls:
            key = key_of(url)
            if key in self._url:
                raise InputError(url, f"two inputs have the same name {key!r}: "
                                 f"{self._url[key]} and {url}")
            self._url[key] = url
        self._keys = list(self._url)

    def keys(self):
        return self._keys

    def url(self, key):
        return self._url[key]
