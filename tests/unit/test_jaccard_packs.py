"""A pack of reads (``JaccardApp.parse_pack``), built from its own records only, holds what each
read parsed alone holds, for both kernels, with keys of two files in any order; and its items'
sets are the reads' k-mer sets (Python sets, tests/oracles.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from tests.oracles import canonical_kmers


def _files(tmp_path):
    rng = random.Random(4)
    reads = {f: [("".join(rng.choice("ACGT") for _ in range(rng.randint(20, 90))))
                 for _ in range(40)] for f in ("a", "b")}
    paths = []
    for f, seqs in reads.items():
        path = tmp_path / f"{f}.fa"
        path.write_text("".join(f">{f}{i}\n{s}\n" for i, s in enumerate(seqs)))
        paths.append(str(path))
    return paths, {f"{f}/{f}{i}": s for f, seqs in reads.items() for i, s in enumerate(seqs)}


@pytest.mark.parametrize("kernel", ["bitset", "merge"])
def test_a_pack_equals_its_reads_parsed_alone(tmp_path, kernel):
    from pairflow.apps.jaccard import JaccardApp
    paths, seqs = _files(tmp_path)
    app = JaccardApp(paths, k=5, item="record", kernel=kernel)
    keys = app.keys()
    pick = random.Random(2).sample(keys, 30)  # both files, interleaved
    pack = app.parse_pack(pick)
    alone = [app.parse(key, None) for key in pick]
    if kernel == "bitset":
        assert np.array_equal(pack, np.stack(alone))
        bits = np.unpackbits(np.ascontiguousarray(pack).view(np.uint8), axis=1).sum(axis=1)
        assert bits.tolist() == [len(canonical_kmers([seqs[key]], 5)) for key in pick]
    else:
        assert len(pack) == len(alone)
        assert all(np.array_equal(a, b) for a, b in zip(pack, alone))
        for key, item in zip(pick, pack):  # the merge kernel's items: one per k-mer
            assert len(item) == len(canonical_kmers([seqs[key]], 5))
