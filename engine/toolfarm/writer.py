"""Per node and stream, one output file written through two buffers: workers append units'
outputs to the filling buffer while a background thread writes and fsyncs the other, so the file
system sees a few large writes instead of one small write per unit per process.

A buffer is flushed when it holds ``flush_bytes`` or its oldest block is ``flush_s`` old.
``drain()`` hands out the index entries of blocks that are on disk (written *and* fsynced): only
those go into the journal, so the journal never names bytes a crash could lose. The file is
named ``.partial`` until the run finishes (``finalize``).
"""
from __future__ import annotations

import os
import threading
import time
import zlib

PARTIAL = ".partial"


class BlockWriter:
    """One stream's file on one node; thread-safe ``append``, ``drain``, ``close``."""

    def __init__(self, path: str, stream: str, flush_bytes: int = 4 << 20,
                 flush_s: float = 1.0):
        self.path, self.stream = path, stream
        self.location = os.path.basename(path)
        self.flush_bytes, self.flush_s = flush_bytes, flush_s
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.fd = os.open(path + PARTIAL, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pos = 0
        self.filling: list[tuple[int, int, bytes]] = []  # (unit, record, bytes)
        self.filling_bytes = 0
        self.filling_since = 0.0
        self.durable: list[dict] = []
        self.written_bytes = 0
        self.flushes = 0
        self.error: BaseException | None = None
        self.cond = threading.Condition()
        self.closing = False
        self.thread = threading.Thread(target=self._loop, daemon=True, name=f"writer-{stream}")
        self.thread.start()

    def append(self, unit: int, record: int, data: bytes) -> None:
        """Queue one unit's bytes; waits while both buffers are full (back-pressure)."""
        with self.cond:
            while self.filling_bytes >= 2 * self.flush_bytes and self.error is None:
                self.cond.wait(0.5)
            if self.error is not None:
                raise self.error
            if not self.filling:
                self.filling_since = time.monotonic()
            self.filling.append((unit, record, data))
            self.filling_bytes += len(data)
            if self.filling_bytes >= self.flush_bytes:
                self.cond.notify_all()

    def _due(self) -> bool:
        return bool(self.filling) and (self.closing or self.filling_bytes >= self.flush_bytes
                                       or time.monotonic() - self.filling_since >= self.flush_s)

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self._due() and not (self.closing and not self.filling):
                    self.cond.wait(self.flush_s / 4)
                if self.closing and not self.filling:
                    return
                blocks, self.filling, self.filling_bytes = self.filling, [], 0
                self.cond.notify_all()  # the other buffer is free for appends again
            try:
                self._write(blocks)
            except BaseException as exc:  # a full disk: appends fail from now on
                with self.cond:
                    self.error = exc
                    self.cond.notify_all()
                return

    def _write(self, blocks: list[tuple[int, int, bytes]]) -> None:
        entries, start = [], self.pos
        for unit, record, data in blocks:
            entries.append({"unit": unit, "record": record, "stream": self.stream,
                            "location": self.location, "offset": self.pos,
                            "length": len(data), "crc32": zlib.crc32(data) & 0xFFFFFFFF})
            self.pos += len(data)
        payload = b"".join(d for _, _, d in blocks)
        view, off = memoryview(payload), 0
        while off < len(payload):
            off += os.pwrite(self.fd, view[off:], start + off)
        os.fsync(self.fd)
        self.written_bytes += len(payload)
        self.flushes += 1
        with self.cond:
            self.durable.extend(entries)

    def drain(self) -> list[dict]:
        """Index entries of blocks now on disk, each handed out once."""
        with self.cond:
            if self.error is not None:
                raise self.error
            out, self.durable = self.durable, []
            return out

    def close(self) -> list[dict]:
        """Write what is buffered, stop the thread and close the file; the last entries."""
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.thread.join()
        os.close(self.fd)
        return self.drain()


def finalize(path: str) -> None:
    """The run finished: its file moves from ``.partial`` to its final name."""
    if os.path.exists(path + PARTIAL):
        os.replace(path + PARTIAL, path)
