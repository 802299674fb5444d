"""The L4 store's item codec (engine/pairs/codec.py): what it writes comes back identical
(``tests/item_oracle.py``, which does not import the codec); what it does not write is refused
before anything is stored; and no payload, however it was made, runs code when read."""
from __future__ import annotations

import collections
import dataclasses
import io
import json
import os
import pickle
import struct
import typing
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from pairflow.engine.pairs.codec import ItemCodec, Undecodable, Unencodable
from tests.item_oracle import assert_identical

_DTYPES = st.one_of(
    hnp.boolean_dtypes(), hnp.integer_dtypes(endianness="?"),
    hnp.unsigned_integer_dtypes(endianness="?"), hnp.floating_dtypes(endianness="?"),
    hnp.complex_number_dtypes(endianness="?"), hnp.datetime64_dtypes(endianness="?"),
    hnp.timedelta64_dtypes(endianness="?"), hnp.byte_string_dtypes(max_len=6),
    hnp.unicode_string_dtypes(max_len=6),
    st.lists(st.tuples(st.text("abcxyz_", min_size=1, max_size=3),
                       hnp.integer_dtypes(endianness="?") | hnp.floating_dtypes()),
             min_size=1, max_size=3, unique_by=lambda f: f[0]).map(np.dtype))


@st.composite
def _arrays(draw):
    a = draw(hnp.arrays(_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                    max_side=5)))
    layout = draw(st.sampled_from(["c", "fortran", "strided"]))
    if layout == "fortran" and a.ndim >= 2:
        a = np.asfortranarray(a)
    elif layout == "strided" and a.ndim >= 1:
        a = a[::2]
    return a


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 80), 2 ** 80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8), st.binary(max_size=8),
    _arrays().filter(lambda a: a.ndim == 0).map(lambda a: a[()]))
_KEYS = st.one_of(st.text(max_size=5), st.integers(-5, 5), st.booleans(), st.none(),
                  st.tuples(st.integers(0, 3), st.text(max_size=2)))
_ITEMS = st.recursive(
    _SCALARS | _arrays(),
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple)
    | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12)


@settings(derandomize=True, max_examples=300, deadline=None)
@given(item=_ITEMS)
def test_what_it_writes_comes_back_identical(item):
    codec = ItemCodec()
    back = codec.decode(codec.encode(item))
    assert_identical(item, back)
    for a in _arrays_in(back):  # arrays of their own: aligned, writable
        assert a.flags.writeable and a.flags.aligned and a.flags.owndata


def _arrays_in(x):
    if isinstance(x, np.ndarray):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _arrays_in(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _arrays_in(v)


@dataclasses.dataclass
class _Vector:
    words: typing.Any
    norm2: float
    extra: typing.Any = None


class _Pair(typing.NamedTuple):
    left: typing.Any
    right: int


@dataclasses.dataclass
class _Hidden:
    a: int
    b: int = dataclasses.field(init=False, default=0)


def test_named_types_only_come_back_through_the_codec_that_names_them():
    codec = ItemCodec(types=(_Vector, _Pair))
    item = [_Vector(np.arange(5, dtype=">u8"), -0.0, {"k": (1, 2.5)}),
            _Pair(np.ones((2, 3), np.complex64).T, 7)]
    payload = codec.encode(item)
    assert_identical(item, codec.decode(payload))
    # as a load task gets it (the store travels to Ray workers pickled, by Ray)
    assert_identical(item, pickle.loads(pickle.dumps(codec)).decode(payload))
    # a codec that does not name them (another app's, the default) reads no such entry
    with pytest.raises(Undecodable, match="does not name"):
        ItemCodec().decode(payload)
    with pytest.raises(Undecodable, match="does not name"):
        ItemCodec(types=(_Pair,)).decode(payload)
    with pytest.raises(TypeError):
        ItemCodec(types=(dict,))


@pytest.mark.parametrize("item", [
    np.array([1, "a"], dtype=object), {"x": np.array([None])}, {1, 2}, frozenset(),
    collections.OrderedDict(a=1), np.ma.array([1, 2], mask=[0, 1]), _Vector(1, 2.0),
    [1, [2, [object()]]], 1 + 2j, bytearray(b"x"), np.array([(1, None)], "i4,O"),
    _Hidden(1), np.zeros(2, [("\u0100", "i1")])], ids=lambda x: type(x).__name__)
def test_what_it_does_not_write_is_refused(item):
    """(The last: .npy 3.0, field names beyond latin-1, which numpy's public reader lacks.)"""
    codec = ItemCodec(types=(_Hidden,))
    with pytest.raises(Unencodable):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy's note on the 3.0 format
            codec.encode(item)


def _payload(manifest: dict, area: bytes = b"") -> bytes:
    text = json.dumps(manifest).encode()
    return struct.pack("<Q", len(text)) + text + area


def _npy(a: np.ndarray, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


class _Plant:
    """Unpickled, it creates ``path``: what a hostile writer would put in a pickle."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_no_payload_runs_code_when_read(tmp_path):
    marker = str(tmp_path / "marker")
    codec = ItemCodec(types=(_Vector,))
    head = {"format": "pairflow-item", "version": 1}
    obj_npy = _npy(np.array([_Plant(marker)], dtype=object), allow_pickle=True)
    hostile = {
        "a pickle": pickle.dumps({"x": _Plant(marker)}),
        "a pickle as an array": _payload({**head, "root": {"array": 0}, "arrays": [[0, len(
            pickle.dumps(_Plant(marker)))]]}, pickle.dumps(_Plant(marker))),
        "an object array": _payload({**head, "root": {"array": 0},
                                     "arrays": [[0, len(obj_npy)]]}, obj_npy),
        "a type by name": _payload({**head, "root": {"obj": "builtins.open", "fields": {
            "file": marker, "mode": "w"}}, "arrays": []}),
        "a named tuple by name": _payload({**head, "root": {"ntuple": "os.system", "items": [
            f"touch {marker}"]}, "arrays": []}),
        "a dataclass with other fields": _payload({**head, "root": {
            "obj": f"{_Vector.__module__}._Vector", "fields": {"words": 1}}, "arrays": []}),
    }
    for what, payload in hostile.items():
        with pytest.raises(Undecodable):
            codec.decode(payload)
        assert not os.path.exists(marker), what
    pickle.loads(hostile["a pickle"])  # the control: unpickled, the payload does run
    assert os.path.exists(marker)


def test_a_payload_that_lies_about_its_arrays_is_refused_before_allocating():
    head = {"format": "pairflow-item", "version": 1, "root": {"array": 0}}
    npy = _npy(np.arange(3, dtype=np.int64))
    huge = npy.replace(b"(3,)", b"(10000000000000,)".ljust(4))  # header names 10^13 items
    header_len = np.frombuffer(huge[8:10], "<u2")[0]
    huge = huge[:8] + np.array([header_len + len(huge) - len(npy)], "<u2").tobytes() + huge[10:]
    cases = {
        "10^13 items in 24 bytes": _payload({**head, "arrays": [[0, len(huge)]]}, huge),
        "a span past the end": _payload({**head, "arrays": [[0, len(npy) + 1]]}, npy),
        "a span backwards": _payload({**head, "arrays": [[5, 2]]}, npy),
        "a missing array": _payload({**head, "root": {"array": 1},
                                     "arrays": [[0, len(npy)]]}, npy),
        "a truncated array": _payload({**head, "arrays": [[0, len(npy) - 8]]}, npy),
        "a manifest longer than the entry": struct.pack("<Q", 10 ** 9) + b"{}",
        "not JSON": struct.pack("<Q", 3) + b"{{{",
        "another format": _payload({"format": "x", "version": 1, "root": 1, "arrays": []}),
        "an unknown node": _payload({**head, "root": {"set": [1]}, "arrays": []}),
        "deep nesting": struct.pack("<Q", 200002) + b"[" * 100001 + b"]" * 100001,
        "a bad float": _payload({**head, "root": {"f64": "zz" * 8}, "arrays": []}),
        "an unhashable key": _payload({**head, "root": {"dict": [[{"list": []}, 1]]},
                                       "arrays": []}),
    }
    for what, payload in cases.items():
        with pytest.raises(Undecodable):
            ItemCodec().decode(payload)
        assert what


@settings(derandomize=True, max_examples=200, deadline=None)
@given(item=_ITEMS, flips=st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(1, 255)),
                                   min_size=1, max_size=4))
def test_a_damaged_payload_reads_as_undecodable_or_as_data(item, flips):
    """Damage the store's SHA-256 would catch, read anyway: the codec either refuses it or
    gives back plain data, and never raises anything else."""
    payload = bytearray(ItemCodec().encode(item))
    for at, x in flips:
        payload[at % len(payload)] ^= x
    try:
        ItemCodec().decode(bytes(payload))
    except Undecodable:
        pass
