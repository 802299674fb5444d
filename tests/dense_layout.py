"""Where a dense result's bytes are on disk, read from the documented format (docs/run-directory.md)
without pairflow's code: the tests that corrupt a tile behind the journal's back find its bytes
here.

While a run is under way a tile's values are records in the writers' logs
(``matrix.zarr.tiles.partial/*.log``: 8-byte magic, header length and header CRC32 as two
little-endian u32, a JSON header naming field and region, then the values); once it is finished
they are cells of uncompressed zarr v3 chunks (C order, ``c/I/J`` under the field's array).
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

MAGIC = b"PFTILE\x00\x01"


def staged_records(staging_dir: str) -> list[dict]:
    """Every record of every log: {"path", "start" (its magic), "payload" (where the values
    start), "end", "field", "region"}; the logs must be intact."""
    out = []
    for name in sorted(os.listdir(staging_dir)) if os.path.isdir(staging_dir) else ():
        path = os.path.join(staging_dir, name)
        raw = open(path, "rb").read()
        pos = 0
        while pos < len(raw):
            assert raw[pos:pos + 8] == MAGIC, (path, pos)
            hlen, _ = struct.unpack("<II", raw[pos + 8:pos + 16])
            header = json.loads(raw[pos + 16:pos + 16 + hlen])
            r0, r1, c0, c1 = header["region"]
            payload = pos + 16 + hlen
            end = payload + (r1 - r0) * (c1 - c0) * np.dtype(header["dtype"]).itemsize
            out.append({"path": path, "start": pos, "payload": payload, "end": end,
                        "field": header["field"], "region": [r0, r1, c0, c1]})
            pos = end
    return out


def tile_records(staging_dir: str, region, field: str | None = None) -> list[dict]:
    return [r for r in staged_records(staging_dir)
            if r["region"] == list(region) and field in (None, r["field"])]


def cell_span(array_dir: str, i: int, j: int) -> tuple[str, int, int]:
    """The chunk file holding cell (i, j) of a finished array, and the cell's bytes in it."""
    meta = json.load(open(os.path.join(array_dir, "zarr.json")))
    rows, cols = meta["chunk_grid"]["configuration"]["chunk_shape"]
    assert [c["name"] for c in meta["codecs"]] == ["bytes"], "chunks must be uncompressed"
    itemsize = np.dtype(meta["data_type"]).itemsize
    path = os.path.join(array_dir, "c", str(i // rows), str(j // cols))
    start = ((i % rows) * cols + j % cols) * itemsize
    return path, start, start + itemsize


def region_spans(array_dir: str, region, mirror: bool) -> list[tuple[str, int, int]]:
    """Every cell of a region (and of its mirror) of a finished array."""
    r0, r1, c0, c1 = region
    cells = [(i, j) for i in range(r0, r1) for j in range(c0, c1)]
    if mirror:
        cells += [(j, i) for i, j in cells]
    return [cell_span(array_dir, i, j) for i, j in cells]


def flip_byte(path: str, position: int) -> None:
    raw = bytearray(open(path, "rb").read())
    raw[position] ^= 0xFF
    open(path, "wb").write(bytes(raw))
