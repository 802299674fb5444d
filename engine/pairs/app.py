"""What a user writes: the ``PairApp`` protocol, and the wrapper behind the REPL form.

An app says which items exist (``keys``), where each lives (``url``, an fsspec URL), how raw bytes
become a host item (``parse``, CPU, numpy so the object store shares it zero-copy), how a host item
becomes a device item (``preprocess``), how one *tile* of items is compared (``compare``: per-pair
Python overhead is paid once per tile), and how a tile's block becomes named result fields
(``postprocess``). ``BasePairApp`` fills in the defaults; ``FunctionApp`` turns two plain
functions into an app so that ``pairflow.allpairs(keys, load=..., compare=...)`` works from a REPL.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from .space import PairSpace, Tile, Triangle

Key = str


class PackKey(str):
    """The key of a pack of items (``BasePairApp.packs``): reads as its first and last member's
    keys (in messages and traces), and carries every member's key.

    A pack is never its member: a pack key equals only a pack key with the same members, and
    its text is never a member's key. (A pack of one record once read as that record's key, and
    an in-process run handed it the record's item that the probe had parsed, in place of the
    pack's list: ``len() of unsized object`` in the compare.)"""

    members: tuple

    def __new__(cls, members):
        members = tuple(str(m) for m in members)
        n = len(members)
        text = f"{members[0]} (a pack of 1 item)" if n == 1 else \
            f"{members[0]} .. {members[-1]} ({n} items)"
        key = super().__new__(cls, text)
        key.members = members
        return key

    def __eq__(self, other):
        return isinstance(other, PackKey) and self.members == other.members

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((PackKey, self.members))

    def __reduce__(self):
        return PackKey, (self.members,)


def default_parse_params(app) -> dict:
    """What an app's parse may depend on, when it does not say: its class and every public
    attribute that is a plain scalar (k, canonical, fmt, ...). Lists (the inputs) are left out,
    so a run over more inputs still finds the items of the earlier ones; an app whose parse
    depends on anything else overrides ``parse_params``."""
    out = {"app": f"{type(app).__module__}.{type(app).__qualname__}"}
    for name, value in sorted(vars(app).items()):
        if not name.startswith("_") and isinstance(value, (bool, int, float, str, type(None))):
            out[name] = value
    return out


@runtime_checkable
class PairApp(Protocol):
    """What the engine calls on an all-pairs app, stage by stage: ``keys``, ``url`` (where an
    item's bytes are, or None), ``parse``, ``preprocess`` (on the device), ``compare`` (one
    tile) and ``postprocess`` (a tile's fields); subclass ``BasePairApp`` for their defaults."""

    def keys(self) -> Sequence[Key]: ...
    def url(self, key: Key) -> str | None: ...
    def parse(self, key: Key, raw: bytes | None) -> Any: ...
    def preprocess(self, key: Key, item: Any, device: str) -> Any: ...
    def compare(self, left: list, right: list, mask: np.ndarray, device: str) -> Any: ...
    def postprocess(self, block: Any, tile: Tile, mask: np.ndarray) -> dict[str, np.ndarray]: ...


class BasePairApp:
    """Defaults for every stage but ``keys``, ``parse`` and ``compare_pair``/``compare``.

    ``row_keys``/``col_keys`` default to ``keys`` (all pairs of one set); an app comparing
    queries with targets overrides them and ``space``. ``check`` is the pre-flight: it sees the
    raw bytes of each item before any compute starts and raises an error naming the file, record
    and problem.
    """

    name = "app"

    def keys(self) -> Sequence[Key]:
        raise NotImplementedError

    def row_keys(self) -> Sequence[Key]:
        return self.keys()

    def col_keys(self) -> Sequence[Key]:
        return self.keys()

    def space(self) -> PairSpace:
        return Triangle(len(self.keys()))

    def url(self, key: Key) -> str | None:
        return None

    def check(self, key: Key, raw: bytes | None) -> None:
        return None

    def inputs(self) -> list[str]:
        """Every URL the app reads besides ``url(key)`` (files whose records are items): with
        ``shared_fs=False`` the driver ships the local ones to the workers."""
        return []

    def warmup(self, device: str) -> None:
        """Pay one-off per-process costs (JIT loading, library start-up) before the clock starts.

        The engine calls it once in every process that will run a stage: the loader processes
        during the pre-flight (``device="host"``) and each device actor before it takes a tile.
        A numba kernel costs most of a second of CPU on its first call in a process even with
        its cache on disk; paid inside the first tiles, that is most of a short run's lost
        efficiency.

        Once per process and class, unless the app has a ``warm_token`` (any hashable): then
        once per token, for a warm-up that also prepares this app's inputs (``loading.
        warm_process``).
        """
        return None

    def parse(self, key: Key, raw: bytes | None) -> Any:
        raise NotImplementedError

    # optional: ``write_run_files(run_dir)``, called once before any compute, adds the app's own
    # files to the run directory (e.g. the inputs it skipped and why)

    def packs(self) -> bool:
        """Optional: may the engine load and cache a tile side's items as one *pack*
        (``parse_pack``)? For items of microseconds (a read's k-mer bitset), whose per-item
        bookkeeping (a load, a cache entry, the scheduler's sets) costs more than comparing
        them. Then ``preprocess``, ``item_nbytes``, ``check`` and ``url`` also see pack keys
        (a ``PackKey``: ``.members`` are the item keys), and ``compare`` gets the rows of packs:
        an array (or list) whose row r is the item of the tile side's row r."""
        return False

    def row_calls(self) -> bool:
        """Optional: does ``compare`` make one kernel call per row of a tile, each against the
        tile's columns with a fixed cost (Opal: one query against a database of targets, whose
        SIMD lanes also idle at its end)? Then a weighted rectangle whose items the host tier
        holds is cut into strips as wide as it (``plan.sizing.plan_run``): one call per row."""
        return False

    def imports_after(self) -> Sequence[str]:
        """Optional: modules the step after the run needs (align's E-values: scipy.special),
        imported on a thread once the tiles compute, not after them."""
        return ()

    def parse_pack(self, keys: list[Key]) -> Any:
        """The items of ``keys`` as one value, indexable by position (a 2-D array whose row r
        is ``parse(keys[r], ...)``, or a list), when ``packs()`` says so."""
        raise NotImplementedError

    def preprocess(self, key: Key, item: Any, device: str) -> Any:
        return item

    def compare_pair(self, a: Any, b: Any, device: str) -> float:
        raise NotImplementedError

    def compare(self, left: list, right: list, mask: np.ndarray, device: str) -> Any:
        out = np.full(mask.shape, np.nan)
        for i, j in zip(*np.nonzero(mask)):
            out[i, j] = self.compare_pair(left[i], right[j], device)
        return out

    def compare_reduced(self, left: list, right: list, mask: np.ndarray, device: str,
                        reductions: list) -> list | None:
        """Optional: compare a tile keeping only what its sinks keep (``reductions``, one per
        sink: ``TopKReduction``, ``ThresholdReduction``), one ``TileCandidates`` per reduction,
        or ``None`` to decline (then ``compare`` and ``postprocess`` run as usual). A kernel
        that keeps a tile's few best cells as it computes them never writes the tile's fields:
        for pairs of nanoseconds, making, storing and re-reading those matrices costs several
        times the pairs. The candidates must equal what each sink keeps of the full fields."""
        return None

    def postprocess(self, block: Any, tile: Tile, mask: np.ndarray) -> dict[str, np.ndarray]:
        if isinstance(block, dict):
            return {k: np.asarray(v) for k, v in block.items()}
        return {"value": np.asarray(block, dtype=np.float64)}

    def fields(self) -> dict[str, str]:
        """Result fields and their dtypes, so sinks can be created before any tile exists."""
        return {"value": "float64"}

    def item_nbytes(self, item: Any) -> int:
        return sizeof(item)

    def describe(self) -> dict:
        return {"app": self.name}

    def parse_params(self) -> dict:
        """The settings ``parse`` (and a host-side ``preprocess``) depends on, beside the item's
        bytes: the L4 store (cache/store.py) keys parsed items by them. The default takes every
        public scalar attribute; an app whose parse reads anything else says so here."""
        return default_parse_params(self)

    def store_source(self, key: Key) -> str | None:
        """The URL whose bytes item ``key`` is parsed from, for the L4 store's content digest:
        ``url(key)`` by default; an app that reads records of a file itself (``url`` is None)
        names the file."""
        return self.url(key)

    def fingerprint(self) -> dict:
        """What decides the results (compared on resume). Apps add their parameters and the
        digests of their inputs (``url_digest``)."""
        import hashlib
        keys = hashlib.sha256("\n".join(map(str, self.keys())).encode()).hexdigest()
        return {**self.describe(), "keys_sha256": keys}


def imports_after(app) -> tuple:
    """The modules ``app``'s step after the run needs (``BasePairApp.imports_after``; an app
    of the protocol alone has none)."""
    return tuple(getattr(app, "imports_after", tuple)())


def url_digest(url: str) -> str:
    """SHA-256 of a file's bytes through fsspec (inputs are compared by content on resume)."""
    import hashlib
    import fsspec
    h = hashlib.sha256()
    with fsspec.open(url, "rb", compression=None) as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def sizeof(obj: Any) -> int:
    """Bytes held by an item: numpy/torch arrays counted exactly, containers summed."""
    if hasattr(obj, "nbytes"):
        return int(obj.nbytes)
    if hasattr(obj, "element_size") and hasattr(obj, "numel"):
        return int(obj.element_size() * obj.numel())
    if isinstance(obj, (bytes, bytearray, str)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(sizeof(v) for v in obj.values()) + 64
    if isinstance(obj, (list, tuple)):
        return sum(sizeof(v) for v in obj) + 64
    if hasattr(obj, "__dict__"):
        return sizeof(vars(obj))
    return 64


class FunctionApp(BasePairApp):
    """An app from plain functions: ``load(key) -> item`` and ``compare(a, b) -> float``.

    With ``tile=True``, ``compare(lefts, rights) -> 2-D array`` is called once per tile.
    """

    name = "function"

    def __init__(self, keys: Sequence[Key], load: Callable[[Key], Any],
                 compare: Callable, tile: bool = False, targets: Sequence[Key] | None = None,
                 preprocess: Callable | None = None):
        self._keys = [str(k) for k in keys]
        self._targets = [str(k) for k in targets] if targets is not None else None
        if len(set(self._keys)) != len(self._keys):
            raise ValueError("keys must be unique")
        self._load, self._compare, self._tile = load, compare, tile
        self._pre = preprocess

    def keys(self):
        if self._targets is None:
            return self._keys
        return list(dict.fromkeys(self._keys + self._targets))

    def row_keys(self):
        return self._keys

    def col_keys(self):
        return self._targets if self._targets is not None else self._keys

    def space(self):
        from .space import Rectangle
        if self._targets is None:
            return Triangle(len(self._keys))
        return Rectangle(len(self._keys), len(self._targets))

    def parse(self, key, raw):
        return self._load(key)

    def preprocess(self, key, item, device):
        return self._pre(item) if self._pre else item

    def compare_pair(self, a, b, device):
        return float(self._compare(a, b))

    def compare(self, left, right, mask, device):
        if self._tile:
            return np.asarray(self._compare(left, right), dtype=np.float64)
        return super().compare(left, right, mask, device)
