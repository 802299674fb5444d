"""The align app reads every record of its files in one pass (``AlignApp._read_all``): on drawn
FASTA files (mixed case, wrapped lines, several files), its items equal a plain parse here,
upper-cased, and a bad letter is still reported with its file and record."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairflow.apps.align import AlignApp
from pairflow.engine.errors import InputError

AA = "ARNDCQEGHILKMFPSTWYV"


def _plain_fasta(path):
    out, name = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith(">"):
            name = line[1:].split()[0]
            out[name] = ""
        elif line:
            out[name] += line.upper()
    return out


def _write(path, recs, width):
    with open(path, "w") as fh:
        for name, seq in recs:
            fh.write(f">{name} some description\n")
            for i in range(0, len(seq), width):
                fh.write(seq[i:i + width] + "\n")


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_q=st.integers(1, 12), n_t=st.integers(1, 30),
       width=st.integers(10, 90), files=st.integers(1, 3))
def test_items_equal_a_plain_parse(tmp_path_factory, seed, n_q, n_t, width, files):
    rng = np.random.default_rng(seed)
    d = tmp_path_factory.mktemp("fa")

    def recs(prefix, n):
        out = []
        for i in range(n):
            s = "".join(rng.choice(list(AA), int(rng.integers(20, 400))))
            if rng.random() < 0.3:
                s = s.lower()
            out.append((f"{prefix}{i}", s))
        return out

    qf = d / "q.fa"
    _write(qf, recs("q", n_q), width)
    tfs = []
    for f in range(files):
        tf = d / f"t{f}.fa"
        _write(tf, recs(f"t{f}_", n_t), width)
        tfs.append(str(tf))
    app = AlignApp([str(qf)], tfs)
    want = {}
    for path in [str(qf)] + tfs:
        stem = app.catalog.keys_of(path)[0].split("/")[0]
        want.update({f"{stem}/{n}": s for n, s in _plain_fasta(path).items()})
    assert app._items == want
    assert app.lengths == {k: len(s) for k, s in want.items()}


def test_a_bad_letter_names_its_file_and_record(tmp_path):
    good = "".join(np.random.default_rng(1).choice(list(AA), 50))
    _write(tmp_path / "q.fa", [("a", good), ("b", good)], 60)
    _write(tmp_path / "t.fa", [("x", good), ("y", good[:10] + "J" + good[11:])], 60)
    with pytest.raises(InputError, match=r"t.fa: record 'y' \(#2\): letter 'J' at position 11"):
        AlignApp([str(tmp_path / "q.fa")], [str(tmp_path / "t.fa")])
