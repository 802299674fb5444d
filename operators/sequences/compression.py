"""Bytes to text: fetching a file (fsspec, through the engine) and undoing gzip, bgzip, bzip2 and xz
by magic number.

Why here and not in htslib: decompressing in Python gives clear errors for truncated or corrupt
gzip (htslib prints to stderr and raises "unknown problem parsing"), reads bgzip for free (it is
multi-member gzip) and bzip2/xz by their magic numbers, and a BGZF file cut exactly between two
blocks is caught by its missing end-of-file block.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import zlib

from .records import InputError


def _fetch(url: str) -> bytes:
    from pairflow.engine import InputError as EngineInputError, fetch
    try:
        return fetch(url)
    except EngineInputError as exc:  # this package's subclass, same message
        raise InputError(exc.file, exc.problem) from None


_BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def _decompress(name: str, raw: bytes) -> bytes:
    """Undo gzip/bgzip/bzip2/xz by magic number (not by suffix: names lie, magic does not)."""
    try:
        if raw[:2] == b"\x1f\x8b":
            out = gzip.decompress(raw)  # multi-member: reads bgzip too, and checks every CRC
            # BGZF cut exactly between two blocks is still valid multi-member gzip; only its empty
            # end-of-file block tells (htslib warns about it; a shorter sequence must not pass).
            if raw[:4] == b"\x1f\x8b\x08\x04" and raw[12:14] == b"BC" and not raw.endswith(_BGZF_EOF):
                raise InputError(name, "truncated BGZF file (its end-of-file block is missing: "
                                 "cut between two blocks?)")
            return out
        if raw[:3] == b"BZh":
            return bz2.decompress(raw)
        if raw[:6] == b"\xfd7zXZ\x00":
            return lzma.decompress(raw)
    except EOFError:
        raise InputError(name, "truncated compressed file (data ends before the end-of-stream marker)") from None
    except (gzip.BadGzipFile, zlib.error, OSError, lzma.LZMAError) as e:
        raise InputError(name, f"corrupt compressed file: {e}") from None
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        raise InputError(name, "zstd-compressed files are not supported; use gzip or bgzip")
    return raw
