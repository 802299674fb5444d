"""Incremental reading of files that a live run is still writing.

A dashboard refreshes every second for hours; re-reading a run's JSON Lines files from the start
each time would cost more with every refresh. :class:`JsonlTailer` keeps a byte offset and hands
out only the lines completed since its last call (holding back a partial last line until its
newline arrives, or the run has ended); :class:`JsonFile` re-reads a file that is replaced as a
whole only when it changed, and keeps the last value that parsed when it catches a half-written
one. Files that do not exist yet read as "nothing yet".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["JsonlTailer", "JsonFile"]


class JsonlTailer:
    """Incremental reader of an append-only JSON Lines file.

    ``poll()`` returns the objects of the lines completed since the previous call.  It keeps the
    byte offset of what it has consumed and the bytes of an incomplete last line; a file that does
    not exist (yet) yields nothing.  If the file is replaced (different inode) or truncated, the
    tailer starts again from the beginning and increments :attr:`resets` so that its owner can
    drop what it accumulated.  Lines that are complete but not valid JSON (or not objects) are
    counted in :attr:`bad_lines` and skipped.
    """

    def __init__(self, path: str | os.PathLike, chunk_bytes: int = 8 << 20):
        self.path = Path(path)
        self.offset = 0  # bytes consumed, including the partial line held in _partial
        self.chunk_bytes = chunk_bytes
        self.resets = 0
        self.bad_lines = 0
        self.lines_read = 0
        self._partial = b""
        self._head = b""  # first bytes of the file, to notice it was recreated
        self._ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file being tailed

    @property
    def exists(self) -> bool:
        return self.path.exists()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete last line held back."""
        return len(self._partial)

    def _reset(self) -> None:
        self.offset = 0
        self._partial = b""
        self._head = b""
        self.lines_read = 0
        self.resets += 1

    def _same_head(self) -> bool:
        """The first bytes are still those read first (a file recreated under a reused inode is not)."""
        if not self._head:
            return True
        try:
            with open(self.path, "rb") as f:
                return f.read(len(self._head)) == self._head
        except OSError:
            return True

    def poll(self, final: bool = False, max_bytes: int | None = None) -> list[dict]:
        """Return the records of newly completed lines.

        ``final=True`` (the run has ended) also accepts a last line without its newline if it
        parses as JSON.  ``max_bytes`` bounds how much is read in this call (the rest is read by
        the next calls), which keeps the first refresh of a huge file responsive.
        """
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if self._ident is not None:  # it existed and went away: whatever came from it is void
                self._reset()
                self._ident = None
            return []
        ident = (st.st_dev, st.st_ino)
        if self._ident is not None and (ident != self._ident or st.st_size < self.offset
                                         or not self._same_head()):
            self._reset()
        self._ident = ident
        out: list[dict] = []
        want = st.st_size - self.offset
        if max_bytes is not None:
            want = min(want, max_bytes)
        if want > 0:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    data = f.read(want)
            except (FileNotFoundError, PermissionError):
                return []
            if self.offset == 0:
                self._head = data[:64]
            self.offset += len(data)
            buf = self._partial + data if self._partial else data
            cut = buf.rfind(b"\n")
            if cut < 0:
                self._partial = buf
            else:
                self._partial = buf[cut + 1 :]
                for line in buf[:cut].split(b"\n"):
                    self._parse_into(line, out)
        if final and self._partial.strip() and self.offset >= st.st_size:
            try:
                obj = json.loads(self._partial)
            except ValueError:
                pass  # still incomplete (or garbage): keep it, it may yet be completed
            else:
                if isinstance(obj, dict):
                    out.append(obj)
                    self.lines_read += 1
                self._partial = b""
        return out

    def _parse_into(self, line: bytes, out: list[dict]) -> None:
        line = line.strip()
        if not line:
            return
        try:
            obj = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        if isinstance(obj, dict):
            out.append(obj)
            self.lines_read += 1
        else:
            self.bad_lines += 1


class JsonFile:
    """A JSON (or text) file that is replaced as a whole; re-read only when it changes.

    Keeps the last value that parsed, so a reader racing a non-atomic writer sees the previous
    content rather than an error.  ``get()`` returns ``None`` while the file does not exist.
    """

    def __init__(self, path: str | os.PathLike, text: bool = False, parse=None):
        """``parse``: bytes -> value in place of ``json.loads`` (raises ValueError on a file
        it cannot read yet)."""
        self.path = Path(path)
        self.text = text
        self.parse = parse
        self._sig: tuple | None = None
        self._value: Any = None
        self.version = 0  # incremented whenever the value changes

    def get(self) -> Any:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            if self._sig is not None:  # the file went away (e.g. directory reused): forget it
                self._sig, self._value = None, None
                self.version += 1
            return None
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        if sig == self._sig:
            return self._value
        try:
            raw = self.path.read_bytes()
            value = raw.decode("utf-8", "replace") if self.text else \
                (self.parse or json.loads)(raw)
        except (OSError, ValueError):
            return self._value  # half-written: keep the previous good value, try again later
        self._sig, self._value = sig, value
        self.version += 1
        return value
