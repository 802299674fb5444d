"""Items as typed data: how the L4 store (``store.py``) writes a parsed item and reads it back.

Why not pickle: a store is shared (a lab's directory, a bucket), and reading a pickle runs
whatever its writer put in it. An entry here is data only: a JSON manifest of the item's shape
and its arrays as ``.npy`` segments (numpy's own format, object dtypes refused), so a hostile
entry can at worst be wrong, and a wrong entry fails its checks and is parsed again.

What the codec writes (``ItemCodec().encode`` takes, and ``decode`` gives back, exactly these):
``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``; numpy arrays of any dtype without
objects (structured ones with latin-1 field names), and numpy scalars; ``list``, ``tuple`` and ``dict`` of these (keys any of them that
hashes); and instances of the dataclasses or named tuples an app names
(``app.item_codec()`` returning ``ItemCodec(types=(CompositionVector,))``): a name in an entry
is looked up among those only, never imported. Exact types only (a dict subclass, a masked
array or a device array is refused): what comes back is what went in, byte for byte. An item
the codec refuses raises ``Unencodable``; the store then keeps it out and counts it.

Payload (inside the store's header and SHA-256): 8 bytes little-endian manifest length, the
manifest (UTF-8 JSON: ``{"format": "pairflow-item", "version": 1, "root": node, "arrays":
[[start, end], ...]}``), then the arrays' ``.npy`` segments, offsets counted from the end of
the manifest. A node is a JSON null, boolean, integer or string for those Python values, else
one tagged object: ``{"f64": hex of the IEEE bits}``, ``{"list": [...]}``, ``{"tuple": [...]}``,
``{"dict": [[key, value], ...]}``, ``{"array": i}``, ``{"scalar": i}`` (a 0-d array),
``{"bytes": i}`` (a uint8 array), ``{"obj": name, "fields": {...}}`` (a named dataclass) or
``{"ntuple": name, "items": [...]}`` (a named tuple).
"""
from __future__ import annotations

import dataclasses
import io
import json
import math
import struct

import numpy as np

FORMAT, VERSION = "pairflow-item", 1
_LEN = struct.Struct("<Q")
_MAX_NPY_HEADER = 10000  # numpy's own default bound on an .npy header


class Unencodable(TypeError):
    """The item holds something the codec does not write (the store keeps it out)."""


class Undecodable(ValueError):
    """A payload that is not an entry this codec wrote (the store counts it corrupt)."""


def _name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class ItemCodec:
    """Encode and decode one app's items. ``types``: the dataclasses and named tuples its items
    may hold (nothing else is ever constructed from an entry)."""

    def __init__(self, types=()):
        self.types = {}
        for cls in types:
            if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)) and \
                    not (isinstance(cls, type) and issubclass(cls, tuple)
                         and hasattr(cls, "_fields")):
                raise TypeError(f"{cls!r} is neither a dataclass nor a named tuple")
            self.types[_name(cls)] = cls

    def __reduce__(self):  # travels to load tasks as its classes' names via Ray (by reference)
        return (ItemCodec, (tuple(self.types.values()),))

    # -- writing ------------------------------------------------------------------------------

    def encode(self, item) -> bytes:
        """The payload of ``item``; ``Unencodable`` naming what the codec does not write."""
        arrays: list[np.ndarray] = []
        root = self._node(item, arrays, 0)
        parts, spans, at = [], [], 0
        for a in arrays:
            head, data = _npy(a)
            parts += [head, data]
            spans.append([at, at + len(head) + data.nbytes])
            at = spans[-1][1]
        manifest = json.dumps({"format": FORMAT, "version": VERSION, "root": root,
                               "arrays": spans}, separators=(",", ":"),
                              allow_nan=False).encode()
        return b"".join([_LEN.pack(len(manifest)), manifest, *parts])

    def _node(self, x, arrays: list, depth: int):
        if depth > 100:
            raise Unencodable("an item nested more than 100 levels deep")
        t = type(x)
        if x is None or t in (bool, int, str):
            return x
        if t is float:
            return {"f64": struct.pack("<d", x).hex()}
        if t is bytes:
            arrays.append(np.frombuffer(x, np.uint8))
            return {"bytes": len(arrays) - 1}
        if t is np.ndarray or isinstance(x, np.generic):
            a = np.asarray(x)
            if a.dtype.hasobject:
                raise Unencodable(f"a numpy array of dtype {a.dtype} (objects)")
            arrays.append(a)
            return {"array" if t is np.ndarray else "scalar": len(arrays) - 1}
        if t is list or t is tuple:
            return {t.__name__: [self._node(v, arrays, depth + 1) for v in x]}
        if t is dict:
            return {"dict": [[self._node(k, arrays, depth + 1), self._node(v, arrays, depth + 1)]
                             for k, v in x.items()]}
        name = _name(t)
        if self.types.get(name) is t:
            if issubclass(t, tuple):
                return {"ntuple": name, "items": [self._node(v, arrays, depth + 1) for v in x]}
            fields = dataclasses.fields(x)
            if any(not f.init for f in fields):
                raise Unencodable(f"{name} has fields its constructor does not take")
            return {"obj": name, "fields": {f.name: self._node(getattr(x, f.name), arrays,
                                                               depth + 1) for f in fields}}
        raise Unencodable(f"a {name} (the store writes numpy arrays, numbers, strings, bytes, "
                          "lists, tuples, dicts and the app's named dataclasses)")

    # -- reading ------------------------------------------------------------------------------

    def decode(self, payload: bytes):
        """The item ``encode`` wrote; ``Undecodable`` for anything else. Never runs code
        named by the payload: JSON, numpy's .npy header (a literal) and raw array bytes."""
        view = memoryview(payload)
        if len(view) < _LEN.size:
            raise Undecodable("shorter than its manifest's length")
        (n,) = _LEN.unpack_from(view)
        if n > len(view) - _LEN.size:
            raise Undecodable("a manifest longer than the entry")
        try:
            manifest = json.loads(bytes(view[_LEN.size:_LEN.size + n]))
        except (ValueError, RecursionError) as exc:
            raise Undecodable(f"the manifest is not JSON: {exc}") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
                manifest.get("version") != VERSION:
            raise Undecodable("not a pairflow item manifest of this version")
        area = view[_LEN.size + n:]
        spans = manifest.get("arrays")
        if not isinstance(spans, list):
            raise Undecodable("the manifest lists no arrays")
        arrays = [_read_npy(area, span) for span in spans]
        try:
            return self._value(manifest.get("root"), arrays, 0)
        except RecursionError:
            raise Undecodable("nested too deeply") from None

    def _value(self, node, arrays: list, depth: int):
        if depth > 100:
            raise Undecodable("nested more than 100 levels deep")
        if node is None or type(node) in (bool, int, str):
            return node
        if type(node) is not dict or not node:
            raise Undecodable(f"a node of JSON type {type(node).__name__}")
        tag = next(iter(node))
        body = node[tag]
        if tag == "f64" and len(node) == 1 and type(body) is str and len(body) == 16:
            try:
                return struct.unpack("<d", bytes.fromhex(body))[0]
            except ValueError:
                raise Undecodable(f"a float of bits {body!r}") from None
        if tag in ("list", "tuple") and len(node) == 1 and type(body) is list:
            out = [self._value(v, arrays, depth + 1) for v in body]
            return out if tag == "list" else tuple(out)
        if tag == "dict" and len(node) == 1 and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise Undecodable("a dict entry that is not a [key, value] pair")
                key = self._value(pair[0], arrays, depth + 1)
                try:
                    hash(key)
                except TypeError:
                    raise Undecodable(f"an unhashable dict key {type(key).__name__}") from None
                out[key] = self._value(pair[1], arrays, depth + 1)
            return out
        if tag in ("array", "scalar", "bytes") and len(node) == 1:
            if type(body) is not int or not 0 <= body < len(arrays):
                raise Undecodable(f"an array index {body!r} of {len(arrays)}")
            a = arrays[body]
            if tag == "array":
                return a
            if a.ndim != 0 and tag == "scalar":
                raise Undecodable(f"a scalar of shape {a.shape}")
            if tag == "scalar":
                return a[()]
            if a.dtype != np.uint8 or a.ndim != 1:
                raise Undecodable(f"bytes of dtype {a.dtype}, shape {a.shape}")
            return a.tobytes()
        if tag == "obj" and set(node) == {"obj", "fields"} and type(node["fields"]) is dict:
            cls = self._type(body, tuple_type=False)
            names = {f.name for f in dataclasses.fields(cls)}
            if set(node["fields"]) != names:
                raise Undecodable(f"{body}'s fields are {sorted(names)}, the entry has "
                                  f"{sorted(node['fields'])}")
            return cls(**{k: self._value(v, arrays, depth + 1)
                          for k, v in node["fields"].items()})
        if tag == "ntuple" and set(node) == {"ntuple", "items"} and type(node["items"]) is list:
            cls = self._type(body, tuple_type=True)
            if len(node["items"]) != len(cls._fields):
                raise Undecodable(f"{body} has {len(cls._fields)} fields, the entry "
                                  f"{len(node['items'])}")
            return cls(*(self._value(v, arrays, depth + 1) for v in node["items"]))
        raise Undecodable(f"an unknown node {sorted(node)[:3]}")

    def _type(self, name, tuple_type: bool):
        cls = self.types.get(name) if type(name) is str else None
        if cls is None or issubclass(cls, tuple) != tuple_type:
            raise Undecodable(f"a type {name!r} this app's codec does not name")
        return cls


def _npy(a: np.ndarray) -> tuple[bytes, memoryview]:
    """An array's ``.npy`` header (numpy's own writer, format 1.0 or 2.0) and its data as the
    header says (C order, or Fortran order for a Fortran-contiguous array), uncopied where it
    can be."""
    fmt = np.lib.format
    d = fmt.header_data_from_array_1_0(a)
    data = a.T if d["fortran_order"] else a
    data = np.ascontiguousarray(data)
    head = io.BytesIO()
    try:
        try:
            fmt.write_array_header_1_0(head, d)
        except ValueError:  # a header over 64 KiB
            head = io.BytesIO()
            fmt.write_array_header_2_0(head, d)
    except UnicodeEncodeError:  # would need .npy 3.0, which numpy's public reader lacks
        raise Unencodable("a structured dtype with non-latin-1 field names") from None
    return head.getvalue(), memoryview(data.reshape(-1).view(np.uint8)) if data.size else \
        memoryview(b"")


def _read_npy(area: memoryview, span) -> np.ndarray:
    """One ``.npy`` segment as an array of its own (aligned, writable): the header read by
    numpy (a literal, object dtypes refused), its length checked before anything is allocated."""
    if type(span) is not list or len(span) != 2 or \
            not all(type(v) is int for v in span) or not 0 <= span[0] <= span[1] <= len(area):
        raise Undecodable(f"an array span {span!r} outside the entry ({len(area)} bytes)")
    fp = io.BytesIO(area[span[0]:min(span[1], span[0] + 12 + _MAX_NPY_HEADER)])  # the header
    try:
        version = np.lib.format.read_magic(fp)
        read = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise Undecodable(f"an .npy segment of version {version}")
        shape, fortran, dtype = read(fp, max_header_size=_MAX_NPY_HEADER)
    except Undecodable:
        raise
    except Exception as exc:  # numpy's ValueError for a bad header, or anything it raises
        raise Undecodable(f"an .npy header numpy refuses: {exc}") from None
    if dtype.hasobject:
        raise Undecodable(f"an array of dtype {dtype} (objects are never read)")
    start = span[0] + fp.tell()
    count = math.prod(shape)
    if count * dtype.itemsize != span[1] - start:
        raise Undecodable(f"an array of shape {shape} and dtype {dtype} in "
                          f"{span[1] - start} bytes")
    order = "F" if fortran else "C"
    if count == 0 or dtype.itemsize == 0:
        return np.empty(shape, dtype, order=order)
    flat = np.frombuffer(area, dtype, count, start)
    a = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    return a.copy(order=order)


def item_codec(app) -> ItemCodec:
    """``app.item_codec()`` when the app declares one, else the inferred codec (no named
    types): what its items hold decides whether they are stored."""
    hook = getattr(app, "item_codec", None)
    codec = hook() if callable(hook) else ItemCodec()
    if not isinstance(codec, ItemCodec):
        raise TypeError(f"{type(app).__name__}.item_codec() returned {type(codec).__name__}, "
                        "not an ItemCodec")
    return codec
