"""Reading an item's bytes through fsspec, with errors that name the URL."""
from __future__ import annotations

from ..errors import InputError


def fetch(url: str) -> bytes:
    """The raw bytes at an fsspec URL (no decompression: parsers decide)."""
    import fsspec
    try:
        with fsspec.open(url, "rb", compression=None) as fh:
            return fh.read()
    except FileNotFoundError:
        raise InputError(url, "file not found") from None
    except IsADirectoryError:
        raise InputError(url, "is a directory, not a file") from None
    except PermissionError:
        raise InputError(url, "permission denied") from None
    except OSError as exc:
        raise InputError(url, f"cannot read: {exc}") from None
