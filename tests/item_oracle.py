"""What "the same item" means for the L4 store's codec, written apart from it (no import of
``engine.pairs.codec``): the same Python types all the way down, arrays of the same dtype
(byte order included), shape and bytes, floats of the same IEEE bits (so NaN and -0.0 count),
dicts with the same keys in the same order."""
from __future__ import annotations

import dataclasses
import struct

import numpy as np


def assert_identical(a, b, path: str = "item") -> None:
    assert type(a) is type(b), f"{path}: {type(a).__name__} came back as {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str, \
            f"{path}: dtype {a.dtype.str} came back as {b.dtype.str}"
        assert a.shape == b.shape, f"{path}: shape {a.shape} came back as {b.shape}"
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), \
            f"{path}: the array's bytes differ"
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.dtype.str == b.dtype.str, f"{path}: {a.dtype} {b.dtype}"
        assert a.tobytes() == b.tobytes(), f"{path}: the scalar's bytes differ"
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {a!r} came back {b!r}"
    elif isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
        assert len(a) == len(b), f"{path}: {len(a)} elements came back as {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{path}[{i}]")
    elif isinstance(a, tuple):  # a named tuple
        assert a._fields == b._fields
        for name in a._fields:
            assert_identical(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif isinstance(a, dict):
        assert len(a) == len(b), f"{path}: {len(a)} keys came back as {len(b)}"
        for i, ((ka, va), (kb, vb)) in enumerate(zip(a.items(), b.items())):
            assert_identical(ka, kb, f"{path} key #{i}")
            assert_identical(va, vb, f"{path}[{ka!r}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    else:
        assert a == b, f"{path}: {a!r} came back as {b!r}"
