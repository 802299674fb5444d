"""The journal read as columns (``JournalIndex``, issue 58 part 3): exactly the entries a reader
that parses each complete line with ``json`` keeps, whether Arrow reads a block or the block
falls back to lines (a damaged line, a value of another type), at block boundaries too; and
``replay`` keeps the last entry per tile, sink and location. The oracle here parses each line
itself and imports nothing of the journal's."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.engine.run import journal as J


def oracle(raw: bytes) -> list[dict]:
    """Every complete line that is a JSON object naming an int tile and a sink, in order."""
    out = []
    lines = raw.split(b"\n")[:-1]  # what follows the last newline is a partial line
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and "tile" in e and "sink" in e and isinstance(e["tile"], int) \
                and not isinstance(e["tile"], bool):
            out.append(e)
    return out


def as_rows(index: J.JournalIndex) -> list[tuple]:
    return [(int(t), index.keys[k], tuple(r) if r[0] >= 0 else None, int(n), int(c))
            for t, k, r, n, c in zip(index.tile, index.key, index.region.tolist(),
                                     index.length, index.crc32)]


def oracle_rows(entries: list[dict]) -> list[tuple]:
    return [(e["tile"], (e["sink"], e.get("location")),
             tuple(e["region"]) if isinstance(e.get("region"), list) and len(e["region"]) == 4
             else None,  # a region is [r0, r1, c0, c1]; anything else names none
             e.get("length", -1), e.get("crc32", -1)) for e in entries]


def entry(rng: random.Random, tile: int) -> dict:
    e = {"tile": tile, "actor": f"node-0/dev-{rng.randrange(3)}",
         "sink": rng.choice(["dense", "threshold", "topk"])}
    e["location"] = rng.choice(["matrix.zarr/value", "matrix.zarr/score",
                                f"parts/{tile:06d}.npy"])
    if rng.random() < 0.6:
        r0, c0 = rng.randrange(100), rng.randrange(100)
        e["region"] = [r0, r0 + 2, c0, c0 + 3]
    e["length"] = rng.randrange(1, 10 ** 6)
    e["crc32"] = rng.getrandbits(32)
    if rng.random() < 0.1:
        e["offset"] = rng.randrange(1000)  # a field the index does not read
    return e


def damage(rng: random.Random, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        r = rng.random()
        if r < 0.03:
            out.append(line[: rng.randrange(1, len(line))])  # a torn line, appended over
        elif r < 0.05:
            out.append("")
        elif r < 0.06:
            out.append('{"tile": "seven", "sink": "dense", "location": "x"}')
        elif r < 0.07:
            out.append('{"actor": "a", "sink": "dense"}')  # no tile
        elif r < 0.08:
            out.append("[1, 2]")
        elif r < 0.09:
            out.append('{"tile": 3, "sink": "dense", "region": [1, 2, 3]}')
        elif r < 0.10:
            out.append('{"tile": 4, "sink": "dense", "location": null, "length": 7}')
        out.append(line)
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(0, 400),
       block=st.sampled_from([64, 700, 4096, 1 << 20]), partial=st.booleans(),
       damaged=st.booleans())
def test_the_index_holds_what_a_line_by_line_reader_keeps(tmp_path_factory, seed, n, block,
                                                          partial, damaged):
    rng = random.Random(seed)
    lines = [json.dumps(entry(rng, rng.randrange(50))) for _ in range(n)]
    if damaged:
        lines = damage(rng, lines)
    raw = "".join(x + "\n" for x in lines)
    if partial:
        raw += '{"tile": 3, "actor": "node-0/dev-0", "sink": "dense", "locat'
    path = tmp_path_factory.mktemp("j") / "journal.jsonl"
    path.write_text(raw)
    want = oracle_rows(oracle(raw.encode()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(J, "BLOCK_BYTES", block)
        mp.setattr(J, "ARROW_MIN_BYTES", 0)  # Arrow for any journal, as for a large one
        assert as_rows(J.JournalIndex(str(path))) == want
        mp.setattr(J, "_arrow_block", lambda b: None)  # every block line by line
        assert as_rows(J.JournalIndex(str(path))) == want


def test_arrow_reads_a_clean_block_and_imports_no_pandas(tmp_path):
    rng = random.Random(1)
    raw = "".join(json.dumps(entry(rng, t)) + "\n" for t in range(2000)).encode()
    cols = J._arrow_block(raw)
    assert cols is not None  # a clean journal is never read line by line
    (path := tmp_path / "journal.jsonl").write_bytes(raw * 20)  # over ARROW_MIN_BYTES
    assert len(raw) * 20 >= J.ARROW_MIN_BYTES
    assert as_rows(J.JournalIndex(str(path))) == oracle_rows(oracle(raw * 20))
    import subprocess
    import sys
    code = ("import sys; from pairflow.engine.run.journal import JournalIndex; "
            f"JournalIndex({str(path)!r}); print('pandas' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


class Verifier:
    """A sink whose verify says yes to the CRCs in ``good`` (by entry), counting its calls."""

    def __init__(self, good):
        self.good, self.calls = good, 0

    def verify(self, e):
        self.calls += 1
        return (e["tile"], e["location"], e["crc32"]) in self.good


@pytest.mark.parametrize("many", [False, True])
def test_replay_keeps_the_last_entry_per_tile_sink_and_location(tmp_path, many):
    rng = random.Random(7)
    lines, good = [], set()
    for _ in range(600):
        t = rng.randrange(80)
        for sink, loc in (("a", "x/1"), ("b", "y/2")):
            if rng.random() < 0.9:
                crc = rng.getrandbits(32)
                lines.append({"tile": t, "actor": "w", "sink": sink, "location": loc,
                              "length": 1, "crc32": crc})
                if rng.random() < 0.95:
                    good.add((t, loc, crc))
    (path := tmp_path / "journal.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    sinks = {"a": Verifier(good), "b": Verifier(good)}
    if many:  # verify_many gets the same entries as verify would, as columns
        for s in sinks.values():
            s.verify_many = (lambda s: lambda es: [s.verify(es.entry(i))
                                                   for i in range(len(es))])(s)
    done, report = J.replay(str(path), sinks, 100)
    # the oracle: the last line per (tile, sink, location); a tile needs both sinks, all good
    last = {}
    for e in lines:
        last[(e["tile"], e["sink"], e["location"])] = e
    want_done, want_bad = [], []
    for t in sorted({e["tile"] for e in lines}):
        mine = [e for (tt, _, _), e in last.items() if tt == t]
        if {e["sink"] for e in mine} != {"a", "b"}:
            want_bad.append(t)
        elif all((t, e["location"], e["crc32"]) in good for e in mine):
            want_done.append(t)
        else:
            want_bad.append(t)
    assert done == want_done
    assert report["corrupt_tiles"] == want_bad
    assert report["recomputed"] == 100 - len(want_done) - len(want_bad)
    assert np.all([s.calls <= len(last) for s in sinks.values()])
